"""Exporting a trained Transformer for CTranslate2 (ctranslate2.py) or as an Argos Translate package (argos.py,
with the sentence splitter of sentence_splitter.py), and translating with an export (runtime.py)."""
