"""benchmarks/evaluation_bench.py on the tiny trained run and its export, on 30 test sentences: its table has
a row per goal, and its paired tests equal sacreBLEU's command line; no speed or figure is checked."""

import re
import sys
from pathlib import Path

import pytest

from benchmarks import evaluation_bench
from tests.conftest import run_cli


@pytest.mark.slow  # an export and every metric's intervals and paired tests: 8 s
def test_the_table_has_a_row_per_goal_and_the_paired_tests_agree(
    trained_run: Path,
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli("export", str(trained_run), str(tmp_path / "ct2"))[0] == 0
    for name in ("src", "tgt"):
        lines = (corpus / f"test.{name}").read_text().splitlines()[:30]
        (tmp_path / name).write_text("".join(line + "\n" for line in lines))
    files = ["--src", str(tmp_path / "src"), "--ref", str(tmp_path / "tgt")]
    argv = ["evaluation_bench", "--run", str(trained_run), "--export", str(tmp_path / "ct2"), *files]
    monkeypatch.setattr(sys, "argv", [*argv, "--repeats", "1"])
    evaluation_bench.main()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("30 sentences, 1 thread; ") and "cores" in out[0] and "sacrebleu " in out[0]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in out if line.startswith("| ")]
    rows = {name: rest for name, *rest in cells}
    assert list(rows)[1:4] == [
        "four metrics with intervals, seconds on one core",
        "paired test bs, equal to sacreBLEU's command line",
        "paired test ar, equal to sacreBLEU's command line",
    ]
    assert rows["paired test bs, equal to sacreBLEU's command line"][0] == "yes"
    assert rows["paired test ar, equal to sacreBLEU's command line"][0] == "yes"
    for engine in ("torch", "ctranslate2"):
        float(rows[f"Spearman, confidence vs sentence chrF ({engine})"][0])  # nan where every chrF is equal
    assert rows["flag recall: reported loops"][1].endswith(" of 6")
    assert rows["flag recall: a word looped"][1].endswith(" of 30")  # one of five kinds built on a line
    looped = int(rows["flag recall: its translations of words"][1].split(" of ")[1])
    assert rows["flag recall: every degenerate output"][1].endswith(f" of {6 + 5 * 30 + looped}")
    for name in ("flagged: the references (false positives)", "flagged: the run's translations"):
        assert re.fullmatch(r"\d+\.\d%( of 30)?", rows[name][0]), rows[name]
    assert re.fullmatch(
        r"\d+\.\d% of \d+", rows["flagged: its translations of words of --src, once, 3 and 8 times"][0]
    )
