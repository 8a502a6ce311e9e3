"""benchmarks/export_bench.py on a tiny trained run: one table with a row per runtime and search, where greedy
CTranslate2 float32 and transformers (and Argos Translate, where its virtual environment can be made) give
nmt's translations; no speed is checked."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.argos_offline import harness
from tests.conftest import ROOT


def table_rows(stdout: str) -> dict[tuple[str, str], list[str]]:
    """The table's rows by runtime and search: their cells."""
    lines = [line for line in stdout.splitlines() if line.startswith("| ")][1:]  # after the column names
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if "---" not in line]
    return {(cells[0], cells[1]): cells for cells in rows}


@pytest.mark.slow
def test_the_table_compares_every_runtime_with_nmt(trained_run: Path, corpus: Path) -> None:
    for module in ("ctranslate2", "onnx", "transformers"):
        pytest.importorskip(module)
    work = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nmt-tests" / "export-bench"
    try:
        harness.argos_python(work, harness.ARGOSTRANSLATE)  # kept for the next run, as the script keeps it
        without = []
    except RuntimeError:  # no PyPI
        without = ["--without", "argos"]
    command = [
        sys.executable,
        "-m",
        "benchmarks.export_bench",
        "--run",
        str(trained_run),
        "--data",
        str(corpus),
        "--work",
        str(work),
        "--sentences",
        "20",
        "--threads",
        "1",
        "--repeats",
        "1",
        *without,
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the first 20 sentences" in result.stdout and "1 threads a runtime" in result.stdout
    rows = table_rows(result.stdout)
    nmt = {search: cells for (name, search), cells in rows.items() if name == "nmt translate (PyTorch)"}
    assert list(nmt) == ["greedy", "beam 5, lp 1.0", "beam 4, lp 0.2 (Argos)"]
    for name in ("CTranslate2 float32", "transformers generate (Hugging Face export)"):
        bleu, *_, identical = rows[(name, "greedy")][2:]
        assert identical == "20/20" and bleu == nmt["greedy"][2]
    greedy = [name for name, search in rows if search == "greedy"]  # PyTorch's runtimes before CTranslate2's
    assert greedy == [
        "nmt translate (PyTorch)",
        "transformers generate (Hugging Face export)",
        "CTranslate2 float32",
        "CTranslate2 int8",
    ]
    assert len(rows) == 10 - len(without) // 2  # nmt, CTranslate2 float32: 3 searches; int8: 2; the rest: 1
    if not without:
        argos = rows[("Argos Translate (argostranslate, a call per sentence)", "beam 4, lp 0.2 (Argos)")]
        assert argos[-1] == rows[("CTranslate2 float32", "beam 4, lp 0.2 (Argos)")][-1]
        assert "Argos Translate's output equals CTranslate2 float32's: 20/20." in result.stdout
