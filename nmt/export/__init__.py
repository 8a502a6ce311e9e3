"""Exporting a trained Transformer for CTranslate2 (ctranslate2.py) or as an Argos Translate package
(argos.py, its sentence splitter in sentence_splitter.py), and translating with an export (runtime.py)."""
