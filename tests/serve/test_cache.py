"""The translation cache (nmt/serve/cache.py): a text sent again is answered from it, byte for byte as a fresh
translation, and never with the translation of another model, direction, search, format or n-best; it stays
within its bounds (entries and bytes, measured with tracemalloc); clearing it takes nothing from a request in
flight; /health counts its hits and misses; `nmt serve --no-cache` turns it off."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import torch
from starlette.testclient import TestClient

from nmt.decode.decoded import DecodedHypothesis, DecodedLine
from nmt.serve.cache import CacheLimits, TranslationCache
from nmt.serve.engines import Catalog, Engine, load_catalog
from tests.conftest import run_cli
from tests.serve.conftest import sentences_of

PAIR = {"source": "src", "target": "tgt"}
NO_CACHE = CacheLimits(entries=0)


def _app(catalog: Catalog, cache: CacheLimits) -> Any:
    from nmt.serve.app import create_app
    from nmt.serve.requests import Limits

    return create_app(catalog, Limits(), None, 4096, 0.005, cache=cache)


def answers(client: TestClient, requests: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    found = []
    for path, body in requests:
        response = client.post(path, json=body)
        assert response.status_code == 200, response.text
        found.append(response.content)
    return found


def varied_requests(sentence: str, other: str) -> list[tuple[str, dict[str, Any]]]:
    """One text asked for in every way that changes its translation, and a list holding it and another."""
    v1 = {"q": sentence}
    return [
        ("/translate", {"q": sentence, **PAIR}),
        ("/translate", {"q": sentence, **PAIR, "alternatives": 2}),
        ("/translate", {"q": sentence, **PAIR, "format": "html"}),
        ("/v1/translate", v1),
        ("/v1/translate", v1 | {"nbest": 3}),
        ("/v1/translate", v1 | {"attention": True}),
        ("/v1/translate", v1 | {"alignments": True}),
        ("/v1/translate", v1 | {"min_length": 12}),
        ("/v1/translate", v1 | {"sampling": True, "temperature": 5.0, "seed": 1}),
        ("/v1/translate", v1 | {"sampling": True, "temperature": 5.0, "seed": 2}),
        ("/v1/translate", {"q": [other, sentence]}),
    ]


def translations_of(answer: bytes) -> str:
    """What an answer says of its texts' translations, leaving out what it repeats of the request."""
    found = json.loads(answer)
    found.pop("beam_size", None)
    return json.dumps(found)


def test_a_cached_answer_is_the_fresh_one_whatever_the_request_varies(catalog: Catalog, corpus: Path) -> None:
    """Each request twice, in turn, to a server with a cache: every answer is, byte for byte, the one a server
    without a cache gives. The variations change the translations (checked), so that an answer served for
    another variation would show."""
    sentence, other = sentences_of(corpus, 2)
    requests = varied_requests(sentence, other)
    with TestClient(_app(catalog, NO_CACHE)) as fresh_client:
        fresh = answers(fresh_client, requests)
    v1 = [translations_of(a) for (path, _), a in zip(requests, fresh, strict=True) if path == "/v1/translate"]
    assert len(set(v1)) == len(v1), "two variations translate alike: the test could not see a wrong hit"
    with TestClient(_app(catalog, CacheLimits())) as client:
        assert answers(client, requests) == fresh
        first = client.get("/health").json()["cache"]
        assert answers(client, requests[::-1]) == fresh[::-1]
        second = client.get("/health").json()["cache"]
    texts = sum(len(body["q"]) if isinstance(body["q"], list) else 1 for _, body in requests)
    # the two APIs ask some texts alike (alternatives 2 is nbest 3, html needs the word links): 8 searches
    assert (first["misses"], first["hits"], first["entries"]) == (8, texts - 8, 8)
    assert (second["misses"], second["hits"]) == (8, 2 * texts - 8)  # the second pass: all from the cache
    assert 0 < second["bytes"] <= second["max_bytes"]


def test_a_paragraph_split_and_whole_are_remembered_apart(catalog: Catalog, corpus: Path) -> None:
    """A paragraph of two sentences translated sentence by sentence and whole (`split_sentences: false`), in
    either order: each answer is the fresh one, never the other's."""
    first, second = sentences_of(corpus, 2)
    paragraph = {"q": f"{first}. {second.capitalize()}."}  # a capital starts a sentence
    requests = [("/v1/translate", paragraph), ("/v1/translate", paragraph | {"split_sentences": False})]
    with TestClient(_app(catalog, NO_CACHE)) as fresh_client:
        fresh = answers(fresh_client, requests)
    assert fresh[0] != fresh[1]
    with TestClient(_app(catalog, CacheLimits())) as client:
        assert answers(client, requests) == fresh
        assert answers(client, requests[::-1]) == fresh[::-1]
        assert client.get("/health").json()["cache"]["hits"] == 2


def perturbed(engine: Engine, name: str) -> Engine:
    """The engine's model with other weights, served under `name`: another model of the same pair."""
    translator = copy.copy(engine.translator)
    model = copy.deepcopy(translator.model)  # type: ignore[attr-defined]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=torch.Generator().manual_seed(1)))
    translator.model = model  # type: ignore[attr-defined]
    return dataclasses.replace(engine, name=name, translator=translator)


def test_one_models_translation_is_never_served_for_another(catalog: Catalog, corpus: Path) -> None:
    [(name, engines)] = catalog.engines.items()
    [(direction, engine)] = engines.items()
    both = Catalog({name: engines, "other": {direction: perturbed(engine, "other")}}, {direction: name})
    sentence = sentences_of(corpus, 1)[0]
    requests = [("/v1/translate", {"q": sentence, "model": model}) for model in (name, "other", name)]
    with TestClient(_app(both, NO_CACHE)) as fresh_client:
        fresh = answers(fresh_client, requests)
    assert translations_of(fresh[0]).replace(name, "other") != translations_of(fresh[1])
    with TestClient(_app(both, CacheLimits())) as client:
        assert answers(client, requests) == fresh
        assert client.get("/health").json()["cache"]["hits"] == 1  # the first model's text, asked again


def test_one_directions_translation_is_never_served_for_another(decoder_tag_run: Path) -> None:
    """A multilingual model translates the same text into two languages: each answer is its own."""
    catalog = load_catalog([decoder_tag_run], "torch", torch.device("cpu"), None, None)
    text = (decoder_tag_run.parent / "data" / "test.xa").read_text().splitlines()[0]
    requests = [
        ("/translate", {"q": text, "source": "xa", "target": tgt}) for tgt in ("xb", "xc", "xb", "xc")
    ]
    with TestClient(_app(catalog, NO_CACHE)) as fresh_client:
        fresh = answers(fresh_client, requests)
    assert fresh[0] != fresh[1]
    with TestClient(_app(catalog, CacheLimits())) as client:
        assert answers(client, requests) == fresh
        assert client.get("/health").json()["cache"]["hits"] == 2


def test_no_cache_translates_every_text_again(catalog: Catalog, corpus: Path) -> None:
    sentence = sentences_of(corpus, 1)[0]
    with TestClient(_app(catalog, NO_CACHE)) as client:
        for _ in range(3):
            assert client.post("/translate", json={"q": sentence, **PAIR}).status_code == 200
        health = client.get("/health").json()
    assert health["sentences"] == 3 and health["cache"] | {"misses": 0} == {
        "entries": 0,
        "bytes": 0,
        "max_entries": 0,
        "max_bytes": NO_CACHE.max_bytes,
        "hits": 0,
        "misses": 0,
    }


def test_the_settings_of_the_last_requests_are_remembered_within_a_bound(
    catalog: Catalog, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests of more distinct search settings than the server keeps the checked settings of: each answer is
    the one a server without a cache gives, the kept settings stay within their bound, and a setting out of
    range is refused every time it is sent, never remembered."""
    monkeypatch.setattr("nmt.serve.service.DECODINGS_KEPT", 3)
    sentence = sentences_of(corpus, 1)[0]
    requests = [("/v1/translate", {"q": sentence, "min_length": n}) for n in (0, 4, 8, 12, 16, 0, 12)]
    with TestClient(_app(catalog, NO_CACHE)) as client:
        assert len(set(answers(client, requests[:5]))) > 1, "the settings translate alike: nothing to see"
        fresh = answers(client, requests)
        service = client.app.state.service  # type: ignore[attr-defined]
        assert len(service._decodings) == 3
        for _ in range(2):
            refused = client.post("/v1/translate", json={"q": sentence, "beam_size": 10_000})
            assert refused.status_code == 400 and "beam" in refused.json()["error"]
    with TestClient(_app(catalog, NO_CACHE)) as client:
        for request, expected in zip(requests, fresh, strict=True):
            assert answers(client, [request]) == [expected]
            client.app.state.service._decodings.clear()  # type: ignore[attr-defined]


def translated(text: str, words: int) -> list[DecodedLine]:
    """A line's translation as the server holds it: its subwords and one hypothesis, `words` long."""
    pieces = [f"▁{text[:8]}{i}" for i in range(words)]
    hypothesis = DecodedHypothesis(" ".join(pieces), -1.0, list(range(1000, 1000 + words)), [*pieces, "</s>"])
    return [DecodedLine([*pieces, "</s>"], [hypothesis])]


def fill(cache: TranslationCache[list[DecodedLine]], texts: list[str], words: int) -> None:
    async def translate(fresh: list[str]) -> list[list[DecodedLine]]:
        return [translated(text, words) for text in fresh]

    for text in texts:
        asyncio.run(cache.translate([text], "how", translate))


def test_the_least_recently_used_text_leaves_first() -> None:
    cache: TranslationCache[list[DecodedLine]] = TranslationCache(CacheLimits(entries=3))
    fill(cache, ["a", "b", "c"], 2)
    fill(cache, ["a", "d"], 2)  # a is used again: b is the oldest
    assert (len(cache), cache.stats.hits, cache.stats.misses, cache.stats.evictions) == (3, 1, 4, 1)
    fill(cache, ["b"], 2)
    assert cache.stats.misses == 5  # b had left
    fill(cache, ["a", "d", "b"], 2)
    assert cache.stats.hits == 4


def test_a_cache_full_of_long_texts_stays_within_its_memory_bound() -> None:
    """20 texts of 5,000 characters with 750-subword translations (~0.15 MB each) into a cache of 1 MiB: it
    keeps as many as fit (about 6), and what it holds (traced by tracemalloc) stays within the bound."""
    limits = CacheLimits(entries=1_000_000, mib=1)
    texts = [f"{i:04d} " + "Wörter " * 714 for i in range(20)]
    cache: TranslationCache[list[DecodedLine]] = TranslationCache(limits)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fill(cache, texts, 750)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0 < len(cache) < 20 and cache.stats.evictions == 20 - len(cache)
    assert 0.8 * limits.max_bytes < cache.bytes <= limits.max_bytes
    assert held <= limits.max_bytes


def test_a_translation_larger_than_the_whole_cache_is_not_kept() -> None:
    cache: TranslationCache[list[DecodedLine]] = TranslationCache(CacheLimits(mib=1))
    fill(cache, ["short"], 3)
    fill(cache, ["long"], 20_000)
    assert len(cache) == 1 and cache.bytes < 2**20
    fill(cache, ["short"], 3)
    assert cache.stats.hits == 1


def test_clearing_takes_nothing_from_a_request_in_flight() -> None:
    cache: TranslationCache[list[DecodedLine]] = TranslationCache(CacheLimits())
    fill(cache, ["seen"], 2)

    async def main() -> list[list[DecodedLine]]:
        release = asyncio.Event()

        async def translate(fresh: list[str]) -> list[list[DecodedLine]]:
            await release.wait()
            return [translated(text, 2) for text in fresh]

        request = asyncio.create_task(cache.translate(["seen", "new"], "how", translate))
        await asyncio.sleep(0)  # "seen" found, "new" being translated
        cache.clear()
        release.set()
        return await request

    assert [lines[0].hypotheses[0].text for lines in asyncio.run(main())] == ["▁seen0 ▁seen1", "▁new0 ▁new1"]
    assert len(cache) == 1  # the new text, remembered once translated


def test_the_command_line_sizes_or_turns_off_the_cache(
    trained_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nmt.serve.server

    served: list[Any] = []
    monkeypatch.setattr(
        nmt.serve.server,
        "serve",
        lambda catalog, settings: served.append((settings, torch.get_num_threads())),
    )
    threads = torch.get_num_threads()
    try:
        for flags in (
            [],
            ["--cache-entries", "50", "--cache-mib", "2.5"],
            ["--no-cache"],
            ["--threads", "1"],
        ):
            code, _, err = run_cli("serve", str(trained_run), "--port", "0", *flags)
            assert code == 0, err
    finally:
        torch.set_num_threads(threads)
    cores = len(os.sched_getaffinity(0))
    assert [threads for _, threads in served] == [max(1, cores - 1)] * 3 + [1]
    assert [settings.cache for settings, _ in served] == [
        CacheLimits(10_000, 64),
        CacheLimits(50, 2.5),
        CacheLimits(0, 64),
        CacheLimits(10_000, 64),
    ]
