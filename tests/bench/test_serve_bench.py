"""benchmarks/serve_bench.py: the requests of its rows and its percentiles; in the slow layer, the whole
benchmark on the session's tiny run and its CTranslate2 export (LibreTranslate left out), which must print
its table with every row and each nmt server's lone-request line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import serve_bench as bench
from tests.conftest import ROOT


def test_a_row_sends_its_target_and_two_requests_a_client_of_unseen_sentences() -> None:
    pool = iter(f"s{i}" for i in range(10_000))
    rows = {load: bench.requests_of(pool, *load, target=200) for load in bench.LOADS}
    assert {load: len(requests) for load, requests in rows.items()} == {
        (1, 1): 200,
        (4, 1): 200,
        (16, 1): 208,
        (1, 20): 10,
        (4, 20): 12,
        (16, 20): 32,
    }
    sent = [s for requests in rows.values() for request in requests for s in request]
    assert len(sent) == len(set(sent))  # no sentence twice: every row's are unseen
    assert all(len(request) == per for (_, per), requests in rows.items() for request in requests)


def test_percentiles_are_the_requests_own_latencies() -> None:
    row = bench.Row(seconds=2.0, sentences=10, latencies=[0.001 * i for i in range(1, 101)])
    assert (row.rate, row.ms(50), row.ms(95)) == (5.0, pytest.approx(51.0), pytest.approx(95.0))


@pytest.mark.slow
def test_the_benchmark_prints_its_table(trained_run: Path, corpus: Path, tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "benchmarks.serve_bench",
        "--run",
        str(trained_run),
        "--src",
        str(corpus / "train.src"),
        "--work",
        str(tmp_path),
        "--target",
        "4",
        "--lone",
        "5",
        "--memory-requests",
        "20",
        "--no-libretranslate",
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    for load in ("1 × 1", "4 × 1", "16 × 1", "1 × 20", "4 × 20", "16 × 20"):
        assert f"| {load} |" in out and f"| {load} again |" in out
    assert "| one text again and again |" in out
    for name in (bench.NMT, bench.CT2):
        assert f"{name}: a lone client's request of one sentence, p50" in out
        assert f"{name}: resident MiB every 2 of 20 new texts:" in out
    assert "exit codes after SIGTERM: {'nmt serve (run)': 0, 'nmt serve (CTranslate2 export)': 0}" in out
