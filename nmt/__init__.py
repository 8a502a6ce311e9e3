"""nmt: train, use and inspect neural machine translation models from one command line."""

__version__ = "0.1.0"
