"""Measurements of nmt: the experiments and benchmarks behind the figures in docs/ and the device check, each
run from the repository's root as `python -m benchmarks.NAME …`; common.py is what they share. nmt never
imports them, the wheel ships none, and the tests import them as a package.
"""
