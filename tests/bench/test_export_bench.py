"""benchmarks/export_bench.py: every row timed in a child process of its own, the children run in interleaved
rounds (fast, with stand-in children), and on a tiny trained run one table with a row per runtime and search,
where greedy CTranslate2 float32 (called directly and through nmt's engine) and transformers (and Argos
Translate, where its virtual environment can be made) give nmt's translations; no speed is checked."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.export_bench import (
    ARGOS,
    CT2,
    ENGINE,
    LOG,
    NMT,
    NMT_INT8,
    Answer,
    Job,
    Runtime,
    fastest,
    measure,
)
from benchmarks.export_timing import by_length, openmp_libraries
from nmt.data.batching import search_groups
from tests.argos_offline import harness
from tests.conftest import ROOT


def test_rounds_are_interleaved_and_each_row_keeps_its_fastest() -> None:
    jobs = [Job(Runtime(name, name, Path(name), ("greedy",)), "greedy") for name in ("a", "b", "c")]
    seconds = iter([3.0, 2.0, 1.0, 1.0, 2.5, 4.0])  # round 0: a b c; round 1: a b c
    pids = iter(range(100, 106))

    def child(job: Job) -> Answer:
        return Answer([job.runtime.name], next(seconds), next(pids), [], [])

    answers, record = measure(jobs, 2, child)
    assert [(r["round"], r["runtime"]) for r in record] == [
        (0, "a"),
        (0, "b"),
        (0, "c"),
        (1, "a"),
        (1, "b"),
        (1, "c"),
    ]
    assert [fastest(answers[job]).seconds for job in jobs] == [1.0, 2.0, 1.0]
    assert [r["pid"] for r in record] == list(range(100, 106))


def test_the_childs_batches_are_nmts() -> None:
    lengths = [3, 9, 1, 9, 4, 7, 2]
    assert by_length(lengths, 30, 2) == search_groups(lengths, 30, 2)


def test_the_openmp_libraries_of_a_process_show_torchs() -> None:
    import torch  # noqa: F401  (mapped by this process already; the children are checked for its absence)

    assert any(f"{os.sep}torch{os.sep}" in path for path in openmp_libraries())


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
    ]
    command += ["--work", str(work), "--sentences", "20", "--threads", "1", "--repeats", "1", "--rounds", "2"]
    result = subprocess.run([*command, *without], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the first 20 sentences" in result.stdout and "1 threads a runtime" in result.stdout
    assert "in a fresh process of its own" in result.stdout and "2 interleaved rounds" in result.stdout
    rows = table_rows(result.stdout)
    nmt = {search: cells for (name, search), cells in rows.items() if name == NMT}
    assert list(nmt) == ["greedy", "beam 5, lp 1.0", "beam 4, lp 0.2 (Argos)"]
    for name in (CT2, ENGINE, "transformers generate (Hugging Face export)"):
        bleu, *_, identical = rows[(name, "greedy")][2:]
        assert identical == "20/20" and bleu == nmt["greedy"][2]
    for search in nmt:
        assert rows[(ENGINE, search)][-1] == rows[(CT2, search)][-1]  # the engine's output is CTranslate2's
    greedy = [name for name, search in rows if search == "greedy"]
    assert greedy == [
        NMT,
        NMT_INT8,
        CT2,
        ENGINE,
        "CTranslate2 int8",
        "transformers generate (Hugging Face export)",
    ]
    assert [search for name, search in rows if name == NMT_INT8] == ["greedy", "beam 5, lp 1.0"]
    assert len(rows) == 15 - len(without) // 2  # nmt, CTranslate2 float32, its engine: 3 searches; int8s: 2
    assert "nmt's CTranslate2 engine's speed ÷ CTranslate2 called directly: greedy: " in result.stdout
    assert f"{NMT}: its speed ÷ CTranslate2 float32's: greedy: " in result.stdout
    if not without:
        argos = rows[(ARGOS, "beam 4, lp 0.2 (Argos)")]
        assert argos[-1] == rows[(CT2, "beam 4, lp 0.2 (Argos)")][-1]
        assert "Argos Translate's output equals CTranslate2 float32's: 20/20." in result.stdout
    check_the_children(json.loads((work / LOG).read_text()), len(rows))


def check_the_children(log: dict, rows: int) -> None:
    """Every row ran in a child of its own each round (pids distinct, none the parent's), rounds in turn,
    with only its runtime imported: CTranslate2 called directly without torch or its OpenMP library, the
    PyTorch runtimes without CTranslate2."""
    runs = log["runs"]
    assert log["rows"] == rows and len(runs) == 2 * rows
    pids = [run["pid"] for run in runs]
    assert len(set(pids)) == len(pids) and log["parent"] not in pids
    order = [(run["runtime"], run["search"]) for run in runs]
    assert [run["round"] for run in runs] == [0] * rows + [1] * rows and order[:rows] == order[rows:]
    for run in runs:
        modules, openmp = run["modules"], run["openmp"]
        if run["runtime"] in (CT2, "CTranslate2 int8"):
            assert "torch" not in modules and not [
                path for path in openmp if f"{os.sep}torch{os.sep}" in path
            ]
        elif run["runtime"] in (NMT, NMT_INT8, "transformers generate (Hugging Face export)"):
            assert "torch" in modules and "ctranslate2" not in modules
        elif run["runtime"] == ARGOS:
            assert "ctranslate2" in modules and "torch" not in modules
