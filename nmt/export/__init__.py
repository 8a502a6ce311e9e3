"""Exporting a trained Transformer for CTranslate2 (ctranslate2.py) and translating with an export
(runtime.py)."""
