"""argostranslate (argos-translate-lt, LibreTranslate) in a virtual environment of its own, run offline
(harness.py), with the guard that refuses the network there (sitecustomize.py)."""
