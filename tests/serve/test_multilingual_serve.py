"""A multilingual run served: every direction it was trained on, chosen by the request's source and target;
/languages lists every pair, /v1/models each direction of the model; answers equal `nmt translate`'s; the
torch run and its CTranslate2 export alike (but where the tiny run's scores tie), for both tag placements."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from starlette.testclient import TestClient

from nmt.decode.exported import load_export
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from nmt.serve.engines import Catalog, load_catalog
from tests.conftest import MULTILINGUAL_DIRECTIONS, run_cli
from tests.serve.conftest import make_client
from tests.ties import assert_equal_but_for_ties


@pytest.fixture(scope="module", params=["encoder", "decoder"])
def run(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue("multilingual_run" if request.param == "encoder" else "decoder_tag_run")


@pytest.fixture(scope="module")
def client(run: Path) -> Iterator[TestClient]:
    with make_client(load_catalog([run], "torch", torch.device("cpu"), None, None)) as test_client:
        yield test_client


def lines_of(run: Path, lang: str) -> list[str]:
    return (run.parent / "data" / f"test.{lang}").read_text().splitlines()


def offline(run: Path, tgt: str, lines: list[str]) -> list[str]:
    return TorchTranslator.of_run(load_run(run, torch.device("cpu"))).toward(tgt).translate(lines)


def test_every_direction_is_translated_as_offline(client: TestClient, run: Path) -> None:
    for name in MULTILINGUAL_DIRECTIONS:
        src, tgt = name.split("-")
        lines = lines_of(run, src)
        answer = client.post("/translate", json={"q": lines, "source": src, "target": tgt})
        assert answer.status_code == 200, answer.text
        assert answer.json()["translatedText"] == offline(run, tgt, lines)
        v1 = client.post(
            "/v1/translate", json={"q": lines[0], "source": src, "target": tgt, "model": run.name}
        )
        assert (v1.json()["source"], v1.json()["target"]) == (src, tgt)
        assert v1.json()["translations"][0]["translatedText"] == offline(run, tgt, lines[:1])[0]


def test_languages_and_models_list_every_direction(client: TestClient, run: Path) -> None:
    languages = {language["code"]: language["targets"] for language in client.get("/languages").json()}
    assert languages == {"xa": ["xb", "xc"], "xb": ["xa"], "xc": ["xa"]}
    models = client.get("/v1/models").json()["models"]
    assert [(m["name"], f"{m['source']}-{m['target']}", m["default"]) for m in models] == [
        (run.name, name, True) for name in MULTILINGUAL_DIRECTIONS
    ]


def test_a_direction_never_trained_is_refused(client: TestClient, run: Path) -> None:
    answer = client.post("/translate", json={"q": "a b", "source": "xb", "target": "xc"})
    assert answer.status_code == 400 and "xb → xc is not served" in answer.json()["error"]
    named = client.post("/v1/translate", json={"q": "a b", "source": "xb", "target": "xc", "model": run.name})
    assert named.status_code == 400
    assert f"model '{run.name}' translates xa→xb, xb→xa, xa→xc, xc→xa; not xb → xc" in named.json()["error"]
    into_xa = client.post("/translate", json={"q": "a b", "source": "auto", "target": "xa"})
    assert into_xa.status_code == 400 and "matches 2 served pairs" in into_xa.json()["error"]


def test_an_export_is_served_as_the_run(run: Path, tmp_path: Path) -> None:
    """Served, the export answers as it translates offline, which is the run's greedy output but where the
    10-update model's scores tie (tests/ties.py)."""
    pytest.importorskip("ctranslate2")
    export = tmp_path / "ct2"
    assert run_cli("export", str(run), str(export))[0] == 0
    catalog: Catalog = load_catalog([export], "ctranslate2", torch.device("cpu"), None, 1)
    exported = load_export(export, "cpu").with_search(beam_size=1)
    greedy = TorchTranslator.of_run(load_run(run, torch.device("cpu"))).with_search(beam_size=1)
    assert greedy.tags is not None
    with make_client(catalog) as client:
        for name in MULTILINGUAL_DIRECTIONS:
            src, tgt = name.split("-")
            lines = lines_of(run, src)
            answer = client.post("/translate", json={"q": lines, "source": src, "target": tgt}).json()
            ours, theirs = greedy.toward(tgt), exported.toward(tgt)
            sources = ours.encode(lines)
            found = [hyps[0] for hyps in ours.search(sources)]
            other = [hyps[0] for hyps in theirs.search(sources)]
            assert_equal_but_for_ties(greedy.model, sources, found, other, greedy.tags.forced_prefix(tgt))
            assert answer["translatedText"] == theirs.tokenizers.tgt.decode([h.tokens for h in other])


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_the_target_vocabulary_is_a_request_field_of_the_native_api(
    engine: str, multilingual_run: Path, tmp_path: Path
) -> None:
    """`target_vocabulary: true` holds a trained direction's outputs to the target language's vocabulary, as
    `nmt translate --target-vocabulary` does (on this tiny run it changes the lines of xa → xc), on the run
    and on its CTranslate2 export (encoder tags: the export's vocabulary map)."""
    run, lines = multilingual_run, lines_of(multilingual_run, "xa")
    if engine == "torch":
        served, translator = run, TorchTranslator.of_run(load_run(run, torch.device("cpu")))
    else:
        pytest.importorskip("ctranslate2")
        served = tmp_path / "ct2"
        assert run_cli("export", str(run), str(served))[0] == 0
        translator = load_export(served, "cpu")
    toward = translator.toward("xc", "xa")
    held = toward.with_search(target_vocabulary=True).translate(lines)
    assert any(a != b for a, b in zip(held, toward.translate(lines), strict=True))  # the field matters
    with make_client(load_catalog([served], engine, torch.device("cpu"), None, None)) as client:
        request = {"q": lines, "source": "xa", "target": "xc", "target_vocabulary": True}
        answer = client.post("/v1/translate", json=request)
    assert answer.status_code == 200, answer.text
    assert [t["translatedText"] for t in answer.json()["translations"]] == held
