"""`nmt serve`: the HTTP layer (app.py, FastAPI: the routes and the OpenAPI document, with the LibreTranslate
API in libretranslate.py and nmt's own in native.py), the gate every request passes first (gate.py: body,
keys, disconnects), what a request is (requests.py: its fields read, checked and refused) and what the
answers are (answers.py), the dynamic batcher (batcher.py) over the served models (engines.py, service.py),
the translation cache (cache.py), the process (server.py) and the attention explorer page (static/). Nothing
here loads training code."""
