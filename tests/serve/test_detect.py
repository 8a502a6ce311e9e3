"""POST /detect and `source: auto` (nmt/serve/detect.py): py3langid chooses among the served languages only;
auto routes each text of a list to its detected direction; without py3langid, or for languages it does not
know, /detect is refused in one line and auto is the one source served. The tiny runs' languages are renamed
to real ones (their engines stay what they are) for py3langid to choose among."""

from __future__ import annotations

import dataclasses
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from starlette.testclient import TestClient

from nmt.config.multilingual import Direction
from nmt.data import language_id
from nmt.serve.app import create_app
from nmt.serve.engines import Catalog, load_catalog
from nmt.serve.requests import Limits
from tests.serve.conftest import make_client

SENTENCES = {
    "en": "Two young children are playing in the snow near a red fence.",
    "de": "Zwei kleine Kinder spielen im Schnee neben einem roten Zaun.",
    "fr": "Deux jeunes enfants jouent dans la neige près d'une clôture rouge.",
}


def renamed(catalog: Catalog, names: dict[str, str]) -> Catalog:
    """`catalog` with its languages renamed by `names`: the same engines, served under other codes."""

    def moved(direction: Direction) -> Direction:
        return Direction(names[direction.src], names[direction.tgt])

    engines = {
        name: {moved(d): dataclasses.replace(engine, direction=moved(d)) for d, engine in served.items()}
        for name, served in catalog.engines.items()
    }
    return Catalog(engines, {moved(d): name for d, name in catalog.defaults.items()})


@pytest.fixture(scope="module")
def german_english(catalog: Catalog) -> Catalog:
    pytest.importorskip("py3langid")
    return renamed(catalog, {"src": "de", "tgt": "en"})


@pytest.fixture(scope="module")
def three_languages(multilingual_run: Path) -> Catalog:
    pytest.importorskip("py3langid")
    loaded = load_catalog([multilingual_run], "torch", torch.device("cpu"), None, None)
    return renamed(loaded, {"xa": "en", "xb": "de", "xc": "fr"})


def test_detect_answers_the_likeliest_served_language_per_text(german_english: Catalog) -> None:
    with make_client(german_english) as client:
        one = client.post("/detect", data={"q": SENTENCES["de"]})  # a form, as libretranslatepy sends it
        assert one.status_code == 200, one.text
        [detected] = one.json()
        assert detected["language"] == "de" and 50 < detected["confidence"] <= 100
        many = client.post("/detect", json={"q": [SENTENCES["en"], SENTENCES["de"]]}).json()
        assert [[d["language"] for d in found] for found in many] == [["en"], ["de"]]
        french = client.post("/detect", json={"q": SENTENCES["fr"]}).json()
        assert french[0]["language"] in ("de", "en")  # fr is not served: never answered


def test_detect_is_bounded_as_translate(german_english: Catalog) -> None:
    with make_client(german_english, Limits(max_chars=20)) as client:
        answer = client.post("/detect", json={"q": SENTENCES["en"]})
    assert answer.status_code == 400
    assert (
        answer.json()["error"] == f"q holds {len(SENTENCES['en'])} characters; this server takes at most 20"
    )


def test_auto_on_a_bilingual_server_translates_from_its_source_and_detects(german_english: Catalog) -> None:
    translator = german_english.engines["tf"][Direction("de", "en")].translator
    with make_client(german_english) as client:
        body = client.post(
            "/translate", json={"q": [SENTENCES["en"]], "source": "auto", "target": "en"}
        ).json()
    assert body["translatedText"] == translator.translate([SENTENCES["en"]])
    [detected] = body["detectedLanguage"]
    assert detected["language"] == "en" and detected["confidence"] > 50


def test_auto_routes_each_text_to_its_detected_direction(three_languages: Catalog) -> None:
    [name] = three_languages.engines
    engines = three_languages.engines[name]
    texts = [SENTENCES["fr"], SENTENCES["de"], SENTENCES["fr"]]
    expected = [
        engines[Direction(src, "en")].translator.translate([text])[0]
        for src, text in zip(["fr", "de", "fr"], texts, strict=True)
    ]
    with make_client(three_languages) as client:
        body = client.post("/translate", json={"q": texts, "source": "auto", "target": "en"}).json()
        one = client.post("/translate", json={"q": SENTENCES["de"], "source": "auto", "target": "en"}).json()
    assert body["translatedText"] == expected
    assert [d["language"] for d in body["detectedLanguage"]] == ["fr", "de", "fr"]
    assert one["translatedText"] == expected[1] and one["detectedLanguage"]["language"] == "de"


def test_auto_detects_a_page_by_its_sentences(three_languages: Catalog) -> None:
    """The markup of a page is not text: a French page full of English tag names is still French."""
    markup = '<div class="navigation header main content"><p><span class="title bold" data-role="heading">'
    page = f"{markup}Deux enfants</span></p></div>"  # py3langid takes the whole of it for English
    with make_client(three_languages) as client:
        body = client.post("/translate", json={"q": page, "source": "auto", "target": "en", "format": "html"})
    assert body.json()["detectedLanguage"]["language"] == "fr"


def test_auto_into_a_language_with_one_source_takes_it(three_languages: Catalog) -> None:
    """Only en is translated into fr: an English text goes en → fr; a German one too (de → fr is not served),
    and its detection still says de."""
    with make_client(three_languages) as client:
        body = client.post(
            "/translate", json={"q": [SENTENCES["en"], SENTENCES["de"]], "source": "auto", "target": "fr"}
        ).json()
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "de"]
    [name] = three_languages.engines
    translator = three_languages.engines[name][Direction("en", "fr")].translator
    assert body["translatedText"] == translator.translate([SENTENCES["en"], SENTENCES["de"]])


def test_languages_py3langid_does_not_know_leave_detect_refused_and_auto_the_one_source(
    client: TestClient,
) -> None:
    pytest.importorskip("py3langid")
    answer = client.post("/detect", json={"q": "a b"})
    assert answer.status_code == 403
    assert answer.json() == {
        "error": "Language detection is disabled on this server: "
        "py3langid does not know the language code(s) src, tgt"
    }
    auto = client.post("/translate", json={"q": "a b", "source": "auto", "target": "tgt"}).json()
    assert auto["detectedLanguage"] == {"confidence": 100.0, "language": "src"}


def test_without_py3langid_detect_is_refused_in_one_line(
    german_english: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("py3langid", "py3langid.langid"):  # importing them raises ImportError
        monkeypatch.setitem(sys.modules, module, None)
    language_id.classifier.cache_clear()
    language_id.identifier.cache_clear()
    try:
        with make_client(german_english) as client:
            answer = client.post("/detect", json={"q": SENTENCES["de"]})
            auto = client.post("/translate", json={"q": SENTENCES["de"], "source": "auto", "target": "en"})
    finally:
        language_id.classifier.cache_clear()
        language_id.identifier.cache_clear()
    assert answer.status_code == 403
    assert answer.json() == {
        "error": "Language detection is disabled on this server: "
        "it needs py3langid (pip install 'nmt[langid]')"
    }
    assert auto.json()["detectedLanguage"] == {"confidence": 100.0, "language": "de"}


@pytest.fixture(scope="module")
def live_german_english(german_english: Catalog) -> Iterator[str]:
    """The app over `german_english` served by uvicorn on 127.0.0.1, in a thread."""
    uvicorn = pytest.importorskip("uvicorn")
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    app = create_app(german_english, Limits(), None, 4096, 0.005)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    while not server.started:
        thread.join(0.05)
    yield f"http://127.0.0.1:{listening.getsockname()[1]}"
    server.should_exit = True
    thread.join(30)


@pytest.mark.slow
def test_libretranslatepy_detects_against_a_live_server(live_german_english: str) -> None:
    libretranslatepy = pytest.importorskip("libretranslatepy")
    client = libretranslatepy.LibreTranslateAPI(live_german_english)
    [detected] = client.detect(SENTENCES["de"])
    assert detected["language"] == "de" and detected["confidence"] > 50
