"""Paragraphs on every path that takes running text: the server's /translate (text and html),
/translate_file (.txt, .html, .htm), /v1/translate and `nmt translate --split-sentences` and `--format html`
translate each sentence of a paragraph as the sentence alone is translated, joined with the paragraph's own
white space; the guard reports a translation that lacks a sentence (/v1/translate, /health, --format jsonl);
a paragraph, a page or a sentence over the model's limit is answered, never refused; odd paragraphs too."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from starlette.testclient import TestClient

from nmt.data.sentences import split_sentences
from nmt.decode.running_text import CUT_MARK
from nmt.decode.trained_run import load_run
from nmt.decode.translator import TorchTranslator
from tests.conftest import run_cli
from tests.markup_checks import assert_well_formed_with_every_tag, words
from tests.serve.conftest import sentences_of

PAIR = {"source": "src", "target": "tgt"}


@pytest.fixture(scope="module")
def sentences(corpus: Path) -> list[str]:
    """Six test sentences as running text writes them: capitalized, with a full stop."""
    return [f"{s[0].upper()}{s[1:]}." for s in sentences_of(corpus)]


@pytest.fixture(scope="module")
def alone(trained_run: Path, sentences: list[str]) -> dict[str, str]:
    """Each sentence translated alone, offline."""
    translator = TorchTranslator.of_run(load_run(trained_run, torch.device("cpu")))
    return dict(zip(sentences, translator.translate(sentences), strict=True))


def paragraph_and_translation(alone: dict[str, str], gaps: tuple[str, ...] = (" ", "  ")) -> tuple[str, str]:
    """Three sentences as one paragraph (separated by `gaps`), and their translations joined alike."""
    first, second, third = list(alone)[:3]
    paragraph = f"{first}{gaps[0]}{second}{gaps[1]}{third}"
    return paragraph, f"{alone[first]}{gaps[0]}{alone[second]}{gaps[1]}{alone[third]}"


def test_translate_and_v1_translate_translate_every_sentence_of_a_paragraph(
    client: TestClient, alone: dict[str, str]
) -> None:
    paragraph, expected = paragraph_and_translation(alone)
    answer = client.post("/translate", json={"q": f"{paragraph}\n\n{paragraph}", **PAIR})
    assert answer.status_code == 200, answer.text
    assert answer.json()["translatedText"] == f"{expected}\n\n{expected}"
    v1 = client.post("/v1/translate", json={"q": paragraph}).json()["translations"][0]
    assert v1["translatedText"] == expected and v1["dropped"] == [] and v1["cut"] == []
    assert [(line["line"], line["hypotheses"][0]["text"]) for line in v1["lines"]] == [
        (0, alone[s]) for s in list(alone)[:3]
    ]


def test_a_text_file_is_translated_sentence_by_sentence(client: TestClient, alone: dict[str, str]) -> None:
    paragraph, expected = paragraph_and_translation(alone, ("\t", " "))
    answer = client.post("/translate_file", data=PAIR, files={"file": ("notes.txt", paragraph.encode())})
    assert client.get(answer.json()["translatedFileUrl"]).text == expected


def page_of(alone: dict[str, str]) -> tuple[str, list[str]]:
    """A page in the source language whose block holds three sentences, a tag spanning the boundary of the
    second and third; the words of their translations, one after the other."""
    first, second, third = (s.split() for s in list(alone)[:3])
    block = (
        f"{first[0]} <b>{' '.join(first[1:])}</b> {' '.join(second[:-1])} <i>{second[-1]} {third[0]}</i> "
        f"{' '.join(third[1:])}"
    )
    page = f'<!doctype html><html lang="src"><body><p>{block}</p></body></html>'
    return page, [word for s in list(alone)[:3] for word in alone[s].split()]


def test_a_page_s_blocks_are_translated_sentence_by_sentence_into_the_target_language(
    client: TestClient, alone: dict[str, str]
) -> None:
    page, expected = page_of(alone)
    translated = client.post("/translate", json={"q": page, "format": "html", **PAIR}).json()[
        "translatedText"
    ]
    assert_well_formed_with_every_tag(page, translated)
    assert words(translated) == expected and '<html lang="tgt">' in translated
    for name in ("page.html", "page.htm"):
        answer = client.post("/translate_file", data=PAIR, files={"file": (name, page.encode())})
        assert answer.status_code == 200, answer.text
        download = client.get(answer.json()["translatedFileUrl"])
        assert download.text == translated and download.headers["content-type"].startswith("text/html")


def test_a_page_with_a_block_over_the_model_s_limit_is_translated_whole(
    client: TestClient, alone: dict[str, str]
) -> None:
    """One paragraph of 60 sentences, far over the model's limit on one line: every sentence translated."""
    block = " ".join(list(alone) * 10)
    expected = [word for _ in range(10) for s in alone for word in alone[s].split()]
    page = f"<html><body><p>{block}</p></body></html>"
    answer = client.post("/translate", json={"q": page, "format": "html", **PAIR})
    assert answer.status_code == 200, answer.text
    assert words(answer.json()["translatedText"]) == expected
    sent = client.post("/translate_file", data=PAIR, files={"file": ("long.html", page.encode())})
    assert words(client.get(sent.json()["translatedFileUrl"]).text) == expected


def test_the_guard_reports_a_paragraph_translated_whole_that_lacks_sentences(
    client: TestClient, alone: dict[str, str], offline: dict[str, str]
) -> None:
    paragraph, _ = paragraph_and_translation(alone)
    before = client.get("/health").json()["dropped_sentences"]
    one = next(iter(offline))  # a sentence of the training text's kind, with a translation
    whole = client.post("/v1/translate", json={"q": [one, paragraph], "split_sentences": False}).json()
    [dropped] = whole["translations"][1]["dropped"]
    assert dropped["line"] == 0 and dropped["source_sentences"] == 3 and dropped["translated_sentences"] < 3
    assert whole["translations"][0]["dropped"] == []
    lost = 3 - dropped["translated_sentences"]
    assert client.get("/health").json()["dropped_sentences"] == before + lost


@pytest.mark.parametrize(
    "text",
    [
        " ".join(["ka zufete giholo"] * 600),  # a run-on sentence of 10,000 characters
        "... !!! ??? 123 4.5 6,7 ---",
        "Привет, мир. Hello there! Γειά σου. 你好。Ende",
    ],
)
def test_odd_paragraphs_are_answered_every_sentence_translated(client: TestClient, text: str) -> None:
    """Every sentence is sent to the model (a long one in parts), none cut; one it translates as nothing (a
    script it never saw) is reported."""
    answer = client.post("/v1/translate", json={"q": text})
    assert answer.status_code == 200, answer.text
    found = answer.json()["translations"][0]
    assert len(found["lines"]) >= len(split_sentences(text, "src")) and found["cut"] == []
    empty = sum(not line["hypotheses"][0]["text"] for line in found["lines"])
    assert sum(d["source_sentences"] - d["translated_sentences"] for d in found["dropped"]) == empty


def test_a_word_over_the_model_s_limit_is_cut_and_the_cut_stated(client: TestClient) -> None:
    word = "kajuzufete" * 500  # thousands of subwords, no space
    answer = client.post("/v1/translate", json={"q": f"Ka zufete. {word} Giholo."})
    found = answer.json()["translations"][0]
    [cut] = found["cut"]
    assert cut["line"] == 0 and cut["subwords"] > cut["translated"]
    assert len(found["lines"]) == 3 and f" {CUT_MARK} " in found["translatedText"]
    libre = client.post("/translate", json={"q": f"Ka zufete. {word} Giholo.", **PAIR}).json()
    assert CUT_MARK in libre["translatedText"]


def test_nmt_translate_split_sentences(trained_run: Path, alone: dict[str, str]) -> None:
    paragraph, expected = paragraph_and_translation(alone, (" ", " "))  # the command reads one space
    single = run_cli("translate", str(trained_run), input="Ka.\n")[1]
    code, out, err = run_cli(
        "translate", str(trained_run), "--split-sentences", input=f"{paragraph}\n\nKa.\n"
    )
    assert code == 0, err
    assert out == f"{expected}\n\n{single}"


def test_nmt_translate_jsonl_counts_sentences_and_warns_of_a_line_that_lacks_some(
    trained_run: Path, alone: dict[str, str]
) -> None:
    paragraph, _ = paragraph_and_translation(alone)
    code, out, err = run_cli("translate", str(trained_run), "--format", "jsonl", input=f"{paragraph}\n")
    assert code == 0, err
    line = json.loads(out)
    assert line["source_sentences"] == 3 and line["translated_sentences"] < 3
    assert re.search(r"translations of 1 lines hold fewer sentences than their source", err)
    assert "--split-sentences" in err
    code, out, err = run_cli(
        "translate", str(trained_run), "--format", "jsonl", "--split-sentences", input=f"{paragraph}\n"
    )
    assert json.loads(out)["translated_sentences"] == 3 and "fewer sentences" not in err


def test_nmt_translate_format_html_translates_every_sentence(
    trained_run: Path, tmp_path: Path, alone: dict[str, str]
) -> None:
    page, expected = page_of(alone)
    code, out, err = run_cli("translate", str(trained_run), "--format", "html", input=page)
    assert code == 0, err
    assert_well_formed_with_every_tag(page, out)
    assert words(out) == expected and '<html lang="tgt">' in out


def test_a_translated_page_s_language_is_the_target(client: TestClient, offline: dict[str, str]) -> None:
    sentence = next(iter(offline))
    page = f'<html lang="src" xml:lang="src"><body><p>{sentence}</p></body></html>'
    answer = client.post("/translate", json={"q": page, "format": "html", **PAIR}).json()
    assert answer["translatedText"] == (
        f'<html lang="tgt" xml:lang="tgt"><body><p>{offline[sentence]}</p></body></html>'
    )


def test_every_translated_element_s_language_is_the_target_and_kept_ones_keep_theirs(
    client: TestClient, offline: dict[str, str]
) -> None:
    sentence = next(iter(offline))
    kept = '<pre lang="src">a <b lang="src">b</b></pre><code lang="src">c</code>'
    image = f'<img alt="{sentence}" xml:lang=src>'
    page = f'<html lang="src"><body><p lang="src">{sentence}</p>{kept}{image}</body></html>'
    answer = client.post("/translate", json={"q": page, "format": "html", **PAIR}).json()
    translated = answer["translatedText"]
    assert f'<p lang="tgt">{offline[sentence]}</p>' in translated
    assert f'<img alt="{offline[sentence]}" xml:lang="tgt">' in translated
    assert kept in translated and translated.startswith('<html lang="tgt">')


def test_an_htm_file_is_translated_as_a_page(client: TestClient, offline: dict[str, str]) -> None:
    sentence = next(iter(offline))
    page = f"<html><body><p>{sentence}</p></body></html>"
    answer = client.post("/translate_file", data=PAIR, files={"file": ("page.htm", page.encode())})
    assert answer.status_code == 200, answer.text
    translated = client.get(answer.json()["translatedFileUrl"]).text
    assert translated == f"<html><body><p>{offline[sentence]}</p></body></html>"
