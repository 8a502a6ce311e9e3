"""`format: html` on /translate and /v1/translate and `nmt translate --format html`: the text of each block is
translated as the plain sentence is, the inline tags placed on its words by the word alignment; every page
comes back well-formed with every tag, hostile ones too; a page over the size limit is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from starlette.testclient import TestClient

from nmt.decode.exported import load_export
from nmt.decode.markup import MAX_INLINE_DEPTH, read_page, translated_page
from nmt.serve.engines import Catalog, load_catalog
from nmt.serve.requests import Limits
from tests.conftest import assert_one_line_error, run_cli
from tests.markup_checks import assert_well_formed_with_every_tag, words
from tests.serve.conftest import make_client

PAIR = {"source": "src", "target": "tgt"}
HOSTILE = [
    "<p>un<b>closed <i>tags</p><p>stray</b> end",
    "<div><span>a <b>b <i>c</span> d</div><!-- a comment -->",
    "<p>a &amp; b &lt; c &bogus; &#169;</p><script>if (a < b) { x('<b>'); }</script><style>b{}</style>",
    "<ul><li>one <b>two<li>three</b></ul><pre>keep <i>this</i></pre>",
    "<p>an <img src=a.png alt='x'> and <code>code &amp; more</code> then",
]


def tagged(sentence: str) -> str:
    """`sentence` as a paragraph with its second word bold and its last two words a link."""
    first, second, *rest = sentence.split()
    middle, link = " ".join(rest[:-2]), " ".join(rest[-2:])
    return f'<p>{first} <b>{second}</b> {middle} <a href="/x?a=1&amp;b=2">{link}</a></p>'


def test_a_page_s_text_is_translated_as_the_plain_sentence(
    client: TestClient, offline: dict[str, str]
) -> None:
    pages = [tagged(sentence) for sentence in offline]
    answer = client.post("/translate", json={"q": pages, "format": "html", **PAIR})
    assert answer.status_code == 200, answer.text
    for page, translated, expected in zip(
        pages, answer.json()["translatedText"], offline.values(), strict=True
    ):
        assert_well_formed_with_every_tag(page, translated)
        assert words(translated) == expected.split()
        assert '<a href="/x?a=1&amp;b=2">' in translated  # attributes as they were


def test_alternatives_and_the_native_api_place_the_tags_too(
    client: TestClient, offline: dict[str, str]
) -> None:
    sentence = next(iter(offline))
    page = tagged(sentence)
    body = client.post("/translate", json={"q": page, "format": "html", "alternatives": 2, **PAIR}).json()
    for translated in [body["translatedText"], *body["alternatives"]]:
        assert_well_formed_with_every_tag(page, translated)
    v1 = client.post(
        "/v1/translate", json={"q": [page, f"<h1>{sentence}</h1>{page}"], "format": "html"}
    ).json()
    one, two = v1["translations"]
    assert_well_formed_with_every_tag(page, one["translatedText"])
    assert words(one["translatedText"]) == offline[sentence].split()
    assert [line["hypotheses"][0]["text"] for line in two["lines"]] == [
        offline[sentence]
    ] * 2  # a line a block


def test_hostile_pages_come_back_well_formed_with_every_tag(client: TestClient) -> None:
    answer = client.post("/translate", json={"q": HOSTILE, "format": "html", **PAIR})
    assert answer.status_code == 200, answer.text
    for page, translated in zip(HOSTILE, answer.json()["translatedText"], strict=True):
        assert_well_formed_with_every_tag(page, translated)
        assert "<!-- a comment -->" in translated or "comment" not in page


def test_a_page_over_the_limits_is_refused_in_one_line(client: TestClient, catalog: Catalog) -> None:
    megabyte = "<p>" + "a <b>b</b> " * 100_000 + "</p>"  # 1.1 MB
    answer = client.post("/translate", json={"q": megabyte, "format": "html", **PAIR})
    assert answer.status_code == 413
    assert answer.json()["error"].endswith(f"bytes; this server takes at most {Limits().max_body}")
    page = "<p>a <b>b</b> c <i>d</i> e f g h i j k l m n o p</p>"
    with make_client(catalog, Limits(max_chars=50)) as small:
        refused = small.post("/translate", json={"q": page, "format": "html", **PAIR})
    assert refused.json() == {"error": f"q holds {len(page)} characters; this server takes at most 50"}


def nested(depth: int) -> str:
    """A paragraph whose words lie inside `depth` bold tags, each inside the one before."""
    return "<p>" + "<b>" * depth + "a b" + "</b>" * depth + "</p>"


def test_a_page_nested_deeper_than_the_writer_goes_is_refused_in_one_line(
    client: TestClient, trained_run: Path, tmp_path: Path
) -> None:
    deepest = nested(MAX_INLINE_DEPTH)
    answer = client.post("/translate", json={"q": deepest, "format": "html", **PAIR})
    assert answer.status_code == 200, answer.text
    assert_well_formed_with_every_tag(deepest, answer.json()["translatedText"])
    hostile = nested(1000)
    error = f"the page opens more than {MAX_INLINE_DEPTH} inline tags (b, i, span, …) inside one another"
    for route, body in [
        ("/translate", {"q": hostile, "format": "html", **PAIR}),
        ("/v1/translate", {"q": hostile, "format": "html"}),
    ]:
        refused = client.post(route, json=body)
        assert refused.status_code == 400 and refused.json()["error"].startswith(error), refused.text
    upload = client.post("/translate_file", files={"file": ("deep.html", hostile.encode())}, data=PAIR)
    assert upload.status_code == 400 and upload.json()["error"].startswith(error), upload.text
    (tmp_path / "deep.html").write_text(hostile, encoding="utf-8")
    page = str(tmp_path / "deep.html")
    assert_one_line_error(run_cli("translate", str(trained_run), "-i", page, "--format", "html"), error)


def test_nmt_translate_format_html(trained_run: Path, tmp_path: Path, offline: dict[str, str]) -> None:
    sentence = next(iter(offline))
    page = f"<html><body>{tagged(sentence)}<script>x < 1</script></body></html>"
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    code, out, err = run_cli(
        "translate", str(trained_run), "-i", str(tmp_path / "page.html"), "--format", "html"
    )
    assert code == 0, err
    assert_well_formed_with_every_tag(page, out)
    assert "<script>x < 1</script>" in out and read_page(out).lines == [offline[sentence]]
    code, _, err = run_cli("translate", str(trained_run), "--format", "html", "--scores", input=page)
    assert code == 2 and "--format html writes the page" in err and len(err.strip().splitlines()) == 1


def test_a_page_not_in_utf8_is_one_line_naming_the_fix(trained_run: Path, tmp_path: Path) -> None:
    (tmp_path / "page.html").write_bytes("<p>caf\u00e9</p>".encode("latin-1"))
    result = run_cli("translate", str(trained_run), "-i", str(tmp_path / "page.html"), "--format", "html")
    assert_one_line_error(result, "is not valid UTF-8 (byte 0xe9 at 6)", "convert the page to UTF-8")


def test_a_ctranslate2_export_places_the_tags_through_its_alignments(
    trained_run: Path, tmp_path: Path, offline: dict[str, str]
) -> None:
    pytest.importorskip("ctranslate2")
    assert run_cli("export", str(trained_run), str(tmp_path / "ct2"), "--to", "ctranslate2")[0] == 0
    catalog = load_catalog([tmp_path / "ct2"], "ctranslate2", torch.device("cpu"), None, None)
    exported = load_export(tmp_path / "ct2", "cpu")
    pages = [tagged(sentence) for sentence in offline]
    with make_client(catalog) as client:
        answer = client.post("/translate", json={"q": pages, "format": "html", **PAIR}).json()
    assert answer["translatedText"] == [translated_page(exported, page) for page in pages]
    for page, translated in zip(pages, answer["translatedText"], strict=True):
        assert_well_formed_with_every_tag(page, translated)
