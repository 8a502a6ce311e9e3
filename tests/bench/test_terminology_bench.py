"""benchmarks/terminology_bench.py on the tiny trained run (its corpus named as Multi30k's splits): the table
has plain beam search's row and constrained search's, and constrained search writes every chosen term."""

import sys
from pathlib import Path

import pytest

from benchmarks import terminology_bench


def test_the_table_has_plain_and_constrained_search(
    trained_run: Path,
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for split, named in (("train", "train"), ("valid", "val"), ("test", "test2016")):
        for side, lang in (("src", "de"), ("tgt", "en")):
            (tmp_path / f"{named}.{lang}").symlink_to(corpus / f"{split}.{side}")
    argv = ["terminology_bench", "--run", str(trained_run), "--data", str(tmp_path), "--beam", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--misses", "1", "--dice", "0.1"])
    terminology_bench.main()
    out = capsys.readouterr().out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| ")][1:]
    assert [row[0] for row in rows] == ["| plain beam 2", "| constrained (torch)"], out
    assert int(out.split()[0]) > 0 and rows[1][1] == "100.0%", out  # some entries; every term written
    assert rows[0][-1].endswith("(1.00×) |")
