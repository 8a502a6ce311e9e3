"""A request's glossary on /v1/translate and /translate: written into the source of a model trained with
terminology annotation (into a text's lines or a page's, a term inside a tag kept inside it), honoured by
constrained search for a torch model trained without (text and HTML), no change when absent or empty,
described in the OpenAPI document, and each refusal (a CTranslate2 export trained without annotation, the
limits) a 400 naming the problem. A
server's glossary (`nmt serve --glossary`) goes into every request, written in or searched under, a request's
entries replacing its entries of the same source term; a bad one, or one for a CTranslate2 export trained
without annotation, stops the server at startup."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from starlette.testclient import TestClient

from nmt.serve.engines import Catalog, load_catalog
from nmt.serve.glossary import with_server_glossary
from nmt.serve.requests import Limits
from tests.conftest import assert_error_line_last, assert_one_line_error, run_cli
from tests.serve.conftest import make_client
from tests.serve.test_files import translated_file

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
        aligned = client.post("/v1/translate", json={"q": source, "glossary": entry, "alignments": True})
        assert aligned.status_code == 200, aligned.text
        assert target in aligned.json()["translations"][0]["translatedText"].split()
        words = source.split()
        page = f"<p>{words[0]} <b>{words[1]}</b> {' '.join(words[2:])}</p>"
        for path, fields in (("/v1/translate", {}), ("/translate", {"source": "src", "target": "tgt"})):
            answer = client.post(path, json={"q": page, "format": "html", "glossary": entry, **fields})
            assert answer.status_code == 200, answer.text
            found = answer.json()
            out = found.get("translatedText") or found["translations"][0]["translatedText"]
            assert out.count("<b>") == out.count("</b>") == 1 and target in out, out


def test_a_server_glossary_constrains_a_model_trained_without_annotation(
    catalog: Catalog, corpus: Path, tmp_path: Path
) -> None:
    """`nmt serve --glossary` on a torch run trained without annotation: every request searches under the
    server's terms, a request's entry of the same source term replacing the server's."""
    source = corpus.joinpath("valid.src").read_text().splitlines()[0]
    targets = corpus.joinpath("valid.tgt").read_text().splitlines()[40].split()[:2]
    glossary = tmp_path / "terms.tsv"
    glossary.write_text(f"{source.split()[0]}\t{targets[0]}\n")
    with make_client(with_server_glossary(catalog, glossary)) as client:
        hypothesis = client.post("/v1/translate", json={"q": source}).json()["translations"][0]["lines"][0]
        best = hypothesis["hypotheses"][0]
        assert targets[0] in best["text"].split() and best["unmet_terms"] == []
        replaced = [[source.split()[0].upper(), targets[1]]]
        answer = client.post("/v1/translate", json={"q": source, "glossary": replaced}).json()
        assert answer["translations"][0]["lines"][0]["hypotheses"][0]["unmet_terms"] == []
        assert targets[1] in answer["translations"][0]["translatedText"].split()
        fields = {"q": source, "source": "src", "target": "tgt"}
        assert targets[0] in client.post("/translate", data=fields).json()["translatedText"].split()


def test_the_openapi_document_describes_the_glossary(terms_client: TestClient) -> None:
    schemas = terms_client.get("/openapi.json").json()["paths"]
    for path in ("/translate", "/v1/translate"):
        body = schemas[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        glossary = body["properties"]["glossary"] if "properties" in body else None
        assert glossary is not None and "at most 2" in glossary["description"], path


def source_text(answer: dict) -> str:
    """The subwords /v1/translate read, as text (markers and written-in terms included)."""
    pieces = [p for line in answer["translations"][0]["lines"] for p in line["source_pieces"] if p != "</s>"]
    return "".join(pieces).replace("▁", " ").strip()


def test_html_and_alignments_take_a_glossary(terms_client: TestClient, line: str) -> None:
    words = line.split()
    page = f"<p>{words[0]} <b>{words[1]}</b> {' '.join(words[2:])}</p>"
    asked = {"q": page, "format": "html", "glossary": [[words[1], "ZZZ"]]}
    answer = terms_client.post("/v1/translate", json=asked)
    assert answer.status_code == 200, answer.text
    assert f"｟term｠ {words[1]} ｟trans｠ ZZZ ｟/term｠" in source_text(answer.json())
    page_out = answer.json()["translations"][0]["translatedText"]
    assert page_out.count("<b>") == page_out.count("</b>") == 1 and "｟" not in page_out
    libre = terms_client.post("/translate", json=asked | {"source": "src", "target": "tgt"})
    assert libre.status_code == 200 and libre.json()["translatedText"].count("<b>") == 1, libre.text
    aligned = terms_client.post(
        "/v1/translate", json={"q": line, "alignments": True, "glossary": [[words[1], "Z"]]}
    )
    assert aligned.status_code == 200, aligned.text


def test_a_server_glossary_goes_into_every_request(terminology_run: Path, line: str, tmp_path: Path) -> None:
    first = line.split()[0]
    second = next(word for word in line.split() if word != first)
    glossary = tmp_path / "terms.tsv"
    glossary.write_text(f"{first}\tZZZ\n{second}\tZZ\n")
    catalog = load_catalog([terminology_run], "torch", torch.device("cpu"), None, None)
    with make_client(with_server_glossary(catalog, glossary)) as client:
        plain = source_text(client.post("/v1/translate", json={"q": line}).json())
        assert f"｟term｠ {first} ｟trans｠ ZZZ ｟/term｠" in plain
        assert f"｟term｠ {second} ｟trans｠ ZZ ｟/term｠" in plain
        replaced = client.post("/v1/translate", json={"q": line, "glossary": [[first.upper(), "Z"]]})
        replaced_text = source_text(replaced.json())
        assert f"｟term｠ {first} ｟trans｠ Z ｟/term｠" in replaced_text and "ZZZ" not in replaced_text
        assert f"｟term｠ {second} ｟trans｠ ZZ ｟/term｠" in replaced_text
        libre = client.post("/translate", data={"q": line, "source": "src", "target": "tgt"})  # a form
        assert libre.status_code == 200, libre.text
        v1 = client.post("/v1/translate", json={"q": line}).json()["translations"][0]["translatedText"]
        assert translated_file(client, "a.txt", line.encode()) == v1  # a file gets the server's terms too


def test_a_server_without_a_glossary_leaves_texts_as_they_are(terminology_run: Path, line: str) -> None:
    catalog = load_catalog([terminology_run], "torch", torch.device("cpu"), None, None)
    assert all(engine.glossary_writer is None for engine in catalog.engines["run"].values())
    with make_client(catalog) as client:
        assert "｟" not in source_text(client.post("/v1/translate", json={"q": line}).json())


def test_nmt_serve_refuses_a_bad_glossary_at_startup(
    terminology_run: Path, trained_run: Path, tmp_path: Path
) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("a\tb\nno tab\n")
    result = run_cli("serve", str(terminology_run), "--port", "0", "--glossary", str(glossary))
    assert_one_line_error(result, f"{glossary} line 2: no tab")
    glossary.write_text("a\t漢字\n")  # found once the models are loaded (after their log lines)
    result = run_cli("serve", str(terminology_run), "--port", "0", "--glossary", str(glossary))
    assert_error_line_last(result, f"{glossary} line 1: the run's vocabulary cannot write the target term")
    glossary.write_text("a\tb\n")
    export = tmp_path / "ct2"
    assert run_cli("export", str(trained_run), str(export), "--to", "ctranslate2")[0] == 0
    result = run_cli("serve", str(export), "--port", "0", "--glossary", str(glossary))
    assert_error_line_last(result, "is a CTranslate2 export trained without terminology annotation")


def test_nmt_serve_takes_a_glossary_for_a_run_trained_without_annotation(
    trained_run: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nmt serve --glossary` in-process, up to the app it would serve, driven here by the TestClient (the
    tests in tests/serve/test_process.py drive the process): no refusal; the terms constrain the search."""
    import nmt.serve.server

    served: list[Catalog] = []
    monkeypatch.setattr(nmt.serve.server, "serve", lambda catalog, settings: served.append(catalog))
    source = corpus.joinpath("valid.src").read_text().splitlines()[0]
    target = corpus.joinpath("valid.tgt").read_text().splitlines()[40].split()[0]
    glossary = tmp_path / "terms.tsv"
    glossary.write_text(f"{source.split()[0]}\t{target}\n")
    threads = torch.get_num_threads()
    try:
        code, _, err = run_cli("serve", str(trained_run), "--port", "0", "--glossary", str(glossary))
    finally:
        torch.set_num_threads(threads)
    assert code == 0, err
    (catalog,) = served
    with make_client(catalog) as client:
        answer = client.post("/v1/translate", json={"q": source}).json()
    assert target in answer["translations"][0]["translatedText"].split(), answer
