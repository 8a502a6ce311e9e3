"""benchmarks/running_text.py on the session's tiny run: paragraphs drawn and their boundaries known, a
splitter scored on them, and the whole benchmark printing its two tables (sentence by sentence lacks no
sentence and keeps one per line's BLEU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchmarks import running_text as bench


def test_paragraphs_cover_every_sentence_in_order_with_their_boundaries() -> None:
    paragraphs = bench.Paragraphs.drawn(23, 2, 5, seed=1)
    assert [i for group in paragraphs.groups for i in group] == list(range(23))
    assert all(1 <= len(group) <= 5 for group in paragraphs.groups)
    sentences = [f"S{i}." for i in range(23)]
    for text, ends, group in zip(
        paragraphs.texts(sentences), paragraphs.boundaries(sentences), paragraphs.groups, strict=True
    ):
        assert sorted(text[end - 1] for end in ends) == ["."] * (len(group) - 1)
        assert all(text[end] == " " for end in ends)


def test_boundary_accuracy_counts_wrong_splits_against_it() -> None:
    texts, known = ["Ab. Cd. Ef."], [{3, 7}]
    assert bench.boundary_accuracy(lambda t, _: t.split(" "), "en", texts, known) == pytest.approx(100)
    assert bench.boundary_accuracy(lambda t, _: [t], "en", texts, known) == 0
    assert bench.boundary_accuracy(lambda t, _: t.replace(".", ". ").split(), "en", ["A.b. C."], [{4}]) == 50


def test_the_benchmark_prints_its_tables(
    trained_run: Path,
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = [f"{s[0].upper()}{s[1:]}." for s in (corpus / "test.src").read_text().splitlines()[:12]]
    target = (corpus / "test.tgt").read_text().splitlines()[:12]
    for lang, lines in {"de": source, "en": target, "fr": source, "cs": source}.items():
        (tmp_path / f"test2016.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["running_text", "--run", str(trained_run), "--data", str(tmp_path), "--sentences", "12"]
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    out = capsys.readouterr().out
    assert "| nmt rules | de | " in out and "| nmt rules | cs | " in out
    rows = {
        line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in out.splitlines() if "→" not in line
    }
    split = rows["each paragraph sentence by sentence (text)"]
    assert split[2] == "+0.00" and split[3] == "0 of 12"
    assert rows["each paragraph sentence by sentence (html, inline tags)"][4].startswith("1 / 1 page (")
