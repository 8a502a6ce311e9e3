"""benchmarks/scale_bench.py's tables from the figures its child processes report (the measurement itself
writes corpora of millions of pairs): the columns docs/benchmarks.md publishes, a row per run."""

from benchmarks import scale_bench
from tests.conftest import ROOT

PUBLISHED = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()


def test_a_row_per_run_under_the_published_columns() -> None:
    memory = {"peak_rss_gib": 0.63, "child_peak_rss_gib": 0.42, "peak_anon_gib": 0.51}
    memory |= {"rss_anon_gib": 0.34, "rss_file_gib": 0.12, "private_gib": 0.45}
    phases = {"check": [0.1, 0.1], "tokenizer": [2.1, 2.0], "encoding": [3.3, 9.0], "planning": [0.03, 0.03]}
    cold = {"pairs": 100_000, "run": "cold", "nproc": 1, "rank": 0, "cache_mib": 16.2, "memory": memory}
    cold |= {"phases": phases | {"first_update": [8.9, 13.0]}, "spm_cpu": 6.0, "spm_runs": [6.0, 6.0]}
    cold |= {"spm_paused_cpu": 5.46}
    warm = cold | {"run": "warm", "phases": {"planning": [0.04, 0.04], "first_update": [3.2, 4.0]}}
    for key in ("spm_cpu", "spm_runs", "spm_paused_cpu"):
        del warm[key]
    table = scale_bench.table([cold, warm]).splitlines()
    assert table[0] in PUBLISHED and table[1] == "|" + "---:|" * len(scale_bench.COLUMNS)
    assert table[2] == (
        "| 100,000 | cold | 0.1 | 2.1 | 3.3 | 0.03 | 8.9 | 13 | 6 (6, 6) | 2.17 | 5 | 2.38 "
        "| 0.63 (0.42) | 0.51 | 0.34 + 0.12 | 0.45 | 16 |"
    )
    assert table[3].startswith("| 100,000 | warm | 0.0 | 0.0 | 0.0 | 0.04 | 3.2 | 4 |  |  |  |  |")
