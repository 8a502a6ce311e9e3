"""A request's glossary on /v1/translate and /translate: written into the source of a model trained with
terminology annotation, honoured by constrained search for one trained without, no change when absent or
empty, described in the OpenAPI document, and each refusal (html, alignments, the limits) a 400 naming the
problem."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from starlette.testclient import TestClient

from nmt.serve.engines import Catalog, load_catalog
from nmt.serve.requests import Limits
from tests.serve.conftest import make_client

MARKERS = ["｟term｠", "｟trans｠", "｟/term｠"]


@pytest.fixture(scope="module")
def terms_client(terminology_run: Path) -> Iterator[TestClient]:
    catalog = load_catalog([terminology_run], "torch", torch.device("cpu"), None, None)
    with make_client(catalog, Limits(max_terms=2, max_term_chars=20)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def line(labelled: Path) -> str:
    return labelled.joinpath("valid.src").read_text().splitlines()[0]


def test_a_glossary_is_written_into_the_source(terms_client: TestClient, line: str) -> None:
    first = line.split()[0]
    answer = terms_client.post("/v1/translate", json={"q": line, "glossary": [[first, "ZZZ"]]})
    assert answer.status_code == 200, answer.text
    pieces = answer.json()["translations"][0]["lines"][0]["source_pieces"]
    assert [piece for piece in pieces if piece in MARKERS][:3] == MARKERS
    assert (
        terms_client.post(
            "/translate", json={"q": line, "source": "src", "target": "tgt", "glossary": [[first, "ZZZ"]]}
        ).status_code
        == 200
    )


def test_an_absent_or_empty_glossary_changes_nothing(terms_client: TestClient, line: str) -> None:
    for path, fields in (("/v1/translate", {}), ("/translate", {"source": "src", "target": "tgt"})):
        plain = terms_client.post(path, json={"q": line, **fields}).json()
        assert terms_client.post(path, json={"q": line, "glossary": [], **fields}).json() == plain
        form = terms_client.post(path, data={"q": line, **fields}).json()  # a LibreTranslate client's form
        assert form == plain


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"glossary": [["a", "b"]] * 3}, "glossary holds 3 entries; this server takes at most 2"),
        ({"glossary": [["a" * 21, "b"]]}, "glossary[0][0] holds 21 characters; this server takes at most 20"),
        ({"glossary": [["a", ""]]}, "glossary[0][1] is an empty string"),
        ({"glossary": [["a", "b", "c"]]}, "glossary[0] must be a [source term, target term] pair"),
        ({"glossary": "a b"}, "glossary must be a list of [source term, target term] pairs, not a string"),
        ({"glossary": [["a", "漢字"]]}, "glossary[0]: the run's vocabulary cannot write the target term"),
        ({"glossary": [["a", "b"]], "alignments": True}, "send format text, without alignments"),
        ({"glossary": [["a", "b"]], "format": "html"}, "send format text, without alignments"),
    ],
)
def test_a_bad_glossary_is_a_400_naming_it(terms_client: TestClient, fields: dict, fragment: str) -> None:
    answer = terms_client.post("/v1/translate", json={"q": "a b", **fields})
    assert answer.status_code == 400 and fragment in answer.json()["error"], answer.text


def test_a_model_trained_without_annotation_searches_under_the_glossary(
    catalog: Catalog, corpus: Path, tmp_path: Path
) -> None:
    """Constrained search: each hypothesis holds the target term and names none unmet, on both APIs; the
    source is left as it is; a term the length limit leaves no room for is named; the limits still hold."""
    source = corpus.joinpath("valid.src").read_text().splitlines()[0]
    target = corpus.joinpath("valid.tgt").read_text().splitlines()[40].split()[0]
    entry = [[source.split()[0], target]]
    with make_client(catalog, Limits(max_terms=2)) as client:
        answer = client.post(
            "/v1/translate", json={"q": source, "glossary": entry, "beam_size": 3, "nbest": 2}
        )
        assert answer.status_code == 200, answer.text
        line = answer.json()["translations"][0]["lines"][0]
        assert "｟term｠" not in line["source_pieces"]
        for hypothesis in line["hypotheses"]:
            assert target in hypothesis["text"].split() and hypothesis["unmet_terms"] == []
        plain = client.post("/v1/translate", json={"q": source}).json()["translations"][0]["lines"][0]
        assert "unmet_terms" not in plain["hypotheses"][0]
        fields = {"q": source, "source": "src", "target": "tgt", "glossary": entry}
        assert target in client.post("/translate", json=fields).json()["translatedText"].split()
        long = " ".join([target] * 15)  # more words than the output length limit of a 3-to-7-word source
        answer = client.post("/v1/translate", json={"q": source, "glossary": [[source.split()[0], long]]})
        assert answer.status_code == 200, answer.text
        assert long in answer.json()["translations"][0]["lines"][0]["hypotheses"][0]["unmet_terms"]
        answer = client.post("/v1/translate", json={"q": source, "glossary": entry * 3})
        assert answer.status_code == 400 and "at most 2" in answer.json()["error"]
        assert client.post("/v1/translate", json={"q": "a b", "glossary": []}).status_code == 200


def test_the_openapi_document_describes_the_glossary(terms_client: TestClient) -> None:
    schemas = terms_client.get("/openapi.json").json()["paths"]
    for path in ("/translate", "/v1/translate"):
        body = schemas[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        glossary = body["properties"]["glossary"] if "properties" in body else None
        assert glossary is not None and "at most 2" in glossary["description"], path
