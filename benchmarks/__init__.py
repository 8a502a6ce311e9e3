"""Measurements of nmt: the experiments and benchmarks behind the figures in docs/ (speed beside a
plain-PyTorch ceiling, alignment error rates, multilingual against bilingual, exports, serving, scale, seeds)
and the device check. Each module runs from the repository's root as `python -m benchmarks.NAME …` and says
how in its docstring; argos_offline/ runs argostranslate offline for export_bench and the Argos tests, and
export_timing times one of export_bench's runtimes in a process of its own.

scripts/ keeps the tools a user runs (make_reverse_corpus.py, docs_reference.py, explorer_screenshots.py);
benchmarks/ holds what measures. nmt never imports either, and the wheel ships neither (pyproject.toml's
packages are `nmt*`); the tests import these modules as a package.
"""
