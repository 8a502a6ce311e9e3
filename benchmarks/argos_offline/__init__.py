"""argostranslate (argos-translate-lt, LibreTranslate) in a virtual environment of its own, run offline: the
harness of export_bench's Argos row and of the Argos tests (harness.py), the driver it runs in that
environment (driver.py) and the guard that refuses the network there (sitecustomize.py)."""
