"""benchmarks/diverse_beam.py on the tiny trained run: its table has plain beam search's row and one per
strength, and self-BLEU reads 100 where every list is three copies."""

import sys
from pathlib import Path

import pytest

from benchmarks import diverse_beam


def test_self_bleu_is_100_for_copies_and_lower_for_different_outputs() -> None:
    copies = [["a dog runs on the grass"] * 3, ["two men are sitting on a bench"] * 3]
    assert diverse_beam.self_bleu(copies) == pytest.approx(100.0)
    apart = [["a dog runs", "the cat sleeps here", "birds fly high"], ["two men sit", "one child plays", "x"]]
    assert diverse_beam.self_bleu(apart) < 10.0


def test_the_table_has_beam_search_and_each_strength(
    trained_run: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src, ref = corpus / "test.src", corpus / "test.tgt"
    argv = ["diverse_beam", "--run", str(trained_run), "--src", str(src), "--ref", str(ref)]
    monkeypatch.setattr(
        sys, "argv", [*argv, "--beam", "4", "--groups", "2", "--nbest", "2", "--strengths", "0", "5"]
    )
    diverse_beam.main()
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines() if line.startswith("| ")][1:]
    assert [row[0] for row in rows] == ["| beam 4", "| diverse 2×2, strength 0", "| diverse 2×2, strength 5"]
    assert all(1.0 <= float(row[1]) <= 2.0 for row in rows)  # distinct outputs of a 2-best list
