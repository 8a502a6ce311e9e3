"""benchmarks/detect_bench.py on a few sentences of each language: its table counts what /detect answers."""

import sys
from pathlib import Path

import pytest

from benchmarks import detect_bench

SENTENCES = {
    "cs": "Dvě malé děti si hrají ve sněhu u červeného plotu.",
    "de": "Zwei kleine Kinder spielen im Schnee neben einem roten Zaun.",
    "en": "Two young children are playing in the snow near a red fence.",
    "fr": "Deux jeunes enfants jouent dans la neige près d'une clôture rouge.",
}


def test_the_table_counts_each_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("py3langid")
    for language, sentence in SENTENCES.items():
        wrong = SENTENCES["en"] if language == "fr" else sentence  # one French line is English
        (tmp_path / f"test2016.{language}").write_text(f"{sentence}\n{wrong}\n", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["detect_bench", "--data", str(tmp_path)])
    detect_bench.main()
    table = capsys.readouterr().out.splitlines()
    assert "| de | 2 | 100.00% | - |" in table
    assert "| fr | 2 | 50.00% | en 1 |" in table
    assert table[-1] == "| all | 8 | 87.50% |  |"
