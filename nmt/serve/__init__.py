"""`nmt serve`: the HTTP layer (app.py, with the LibreTranslate API in libretranslate.py and nmt's own in
native.py), request checks (payloads.py), the dynamic batcher (batcher.py) over the served models
(engines.py, service.py), the process (server.py) and the attention explorer page (static/). Nothing here
loads training code."""
