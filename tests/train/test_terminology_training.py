"""A tiny run trained with terminology annotation, end to end: its vocabulary holds the markers as whole
pieces, `nmt translate --glossary` writes a glossary's terms into the source on both engines (an empty
glossary changes no output), and a run trained without annotation is refused annotation in one line (it
translates a glossary by constrained search: tests/decode/test_constrained_translation.py)."""

from __future__ import annotations

import json
from pathlib import Path

from nmt.data.terminology import annotate, glossary_annotations
from nmt.decode.exported import META
from nmt.decode.terminology import TrainedMarkers
from tests.conftest import assert_one_line_error, run_cli

MARKERS = ["｟term｠", "｟trans｠", "｟/term｠"]


def translate(run: Path, lines: Path, *extra: str) -> str:
    code, out, err = run_cli("translate", str(run), "--input", str(lines), "--device", "cpu", *extra)
    assert code == 0, err
    return out


def test_the_run_reads_terms_between_its_markers(
    terminology_run: Path, labelled: Path, tmp_path: Path
) -> None:
    trained = TrainedMarkers.of(terminology_run)
    assert list(trained.markers) == MARKERS
    tokenizer = trained.tokenizer
    assert [tokenizer.pieces([i]) for i in tokenizer.ids(MARKERS)] == [[m] for m in MARKERS]
    source = labelled.joinpath("valid.src").read_text().splitlines()[0]
    first, target = source.split()[0], "ZZZ"
    glossary = tmp_path / "terms.tsv"
    glossary.write_text(f"{first.upper()}\t{target}\n")
    annotating = trained.annotating(_Stub(), glossary)
    (annotated,) = annotating.annotated([source])
    assert annotated == annotate(source, glossary_annotations(source, annotating.finder), trained.markers)
    assert annotated.startswith(f"｟term｠ {first} ｟trans｠ {target} ｟/term｠ ")  # matched across case
    (ids,) = tokenizer.encode([annotated])
    counts = [ids.count(i) for i in tokenizer.ids(MARKERS)]  # each marker one piece, once per occurrence
    assert counts == [source.split().count(first)] * 3


def test_translate_with_a_glossary_on_both_engines(
    terminology_run: Path, labelled: Path, tmp_path: Path
) -> None:
    lines = tmp_path / "in.txt"
    lines.write_text("\n".join(labelled.joinpath("valid.src").read_text().splitlines()[:6]) + "\n")
    empty, terms = tmp_path / "empty.tsv", tmp_path / "terms.tsv"
    empty.write_text("")
    terms.write_text(f"{lines.read_text().split()[0]}\tZZZ\n")
    export = tmp_path / "export"
    code, _, err = run_cli("export", str(terminology_run), str(export))
    assert code == 0, err
    assert json.loads((export / META).read_text(encoding="utf-8"))["terminology"] == MARKERS
    for model in (terminology_run, export):
        plain = translate(model, lines)
        assert translate(model, lines, "--glossary", str(empty)) == plain  # an empty glossary changes nothing
        assert len(translate(model, lines, "--glossary", str(terms)).splitlines()) == 6


def test_a_run_trained_without_annotation_is_refused_annotation(kept_run: Path, tmp_path: Path) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("a\tb\n")
    asked = ("--glossary", str(glossary), "--glossary-mode", "annotated")
    result = run_cli("translate", str(kept_run), *asked, input="a b\n")
    assert_one_line_error(
        result, "was not trained with terminology annotation", "--glossary-mode constrained"
    )


def test_a_bad_glossary_is_one_line(terminology_run: Path, tmp_path: Path) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("a\tb\nno tab here\n")
    result = run_cli("translate", str(terminology_run), "--glossary", str(glossary), input="a b\n")
    assert_one_line_error(result, f"{glossary} line 2: no tab")
    glossary.write_text("a\tb\nc\t漢字\n")  # characters the synthetic corpus never holds
    result = run_cli("translate", str(terminology_run), "--glossary", str(glossary), input="a b\n")
    assert_one_line_error(result, f"{glossary} line 2: the run's vocabulary cannot write the target term")


class _Stub:
    """A translator of nothing: what `Annotating` wraps where only its annotation is under test."""

    source = target = ""
    max_source_len = 100

    def encode(self, texts: object) -> list[list[int]]:
        raise NotImplementedError

    def translate(self, texts: object, progress: object = None) -> list[str]:
        raise NotImplementedError

    def translated(self, texts: object, alignments: bool = False) -> list[object]:
        raise NotImplementedError
