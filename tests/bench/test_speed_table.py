"""benchmarks/speed_table.py: nmt's benchmark figures beside the ceiling's, and their ratio, as one table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import speed_table
from tests.conftest import ROOT

CEILING = {
    "train": [
        {"B": 256, "S": 24, "T": 24, "compiled": False, "src_pad_mask": False, "tgt_tok_per_s": 300_000.0},
        {"B": 256, "S": 24, "T": 24, "compiled": True, "src_pad_mask": False, "tgt_tok_per_s": 400_000.0},
        {"B": 256, "S": 24, "T": 24, "compiled": True, "src_pad_mask": True, "tgt_tok_per_s": 470_000.0},
        {"B": 1024, "S": 24, "T": 24, "compiled": True, "src_pad_mask": False, "tgt_tok_per_s": 500_000.0},
    ],
    "decode": {"greedy_kvcache": {"sent_per_s": 13_000.0}},
}


def test_the_table_puts_each_model_beside_the_ceiling() -> None:
    results = {
        "transformer": {
            "train_target_tokens_per_s": 250_000.0,
            "beam1_sent_per_s": 10_000.0,
            "seconds_to_bleu": None,
            "device": "H100",
            "torch": "2.13",
            "dtype": "bf16 autocast",
            "kernel_launches_per_update": 12.0,
            "gpu_busy_fraction": 0.714,
        },
        "rnn": {"train_target_tokens_per_s": 100_000.0, "beam1_sent_per_s": 11_000.0},
    }
    rows = speed_table.table(results, CEILING).splitlines()
    assert rows[0] == "| figure | transformer | rnn | ceiling (fixed 256×24×24 batch) |"
    assert "| training target tok/s | 250,000 | 100,000 | eager 300,000 / compiled 400,000 |" in rows
    assert "| training tok/s ÷ compiled ceiling | 0.62× | 0.25× | 1.00× |" in rows  # at the first shape
    assert "| seconds to validation BLEU target | — | — | — |" in rows  # not reached: no number
    assert "| greedy decoding sent/s | 10,000 | 11,000 | 13,000 |" in rows
    assert "| kernel launches per update | 12 | — | — |" in rows  # measured on CUDA only
    assert "| GPU busy (kernel time ÷ wall time) | 71% | — | — |" in rows
    assert rows[-1] == "device: H100, torch 2.13, bf16 autocast"


@pytest.mark.slow
def test_one_run_measures_both_on_cpu(corpus: Path, tmp_path: Path) -> None:
    """The default ceiling is the project's own benchmarks/ceiling_bench.py."""
    config = ROOT / "configs" / "tiny-transformer.yaml"
    options = ["--smoke", "--data", str(corpus), "--out", str(tmp_path)]
    benchmark = [
        "--device",
        "cpu",
        "--warmup-steps",
        "1",
        "--steps",
        "2",
        "--bleu-target",
        "99",
        "--bleu-budget",
        "2",
        "--decode-sentences",
        "10",
        "--set",
        "model.transformer.d_model=32",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.speed_table", str(config), *options, "--", *benchmark],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # the ceiling's smoke sizes still train its full-width model on a CPU
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "tiny-transformer.json").read_text())["train_steps_timed"] == 2
    assert "| training target tok/s |" in result.stdout and "ceiling (fixed 8×6×7 batch)" in result.stdout


def test_a_variant_names_its_column_and_its_overrides() -> None:
    parse = speed_table.parse_variant
    assert parse("configs/a.yaml") == ("a", Path("configs/a.yaml"), [])
    assert parse("graphs=configs/a.yaml+train.cuda_graphs=true+train.lr=1e-3") == (
        "graphs",
        Path("configs/a.yaml"),
        ["train.cuda_graphs=true", "train.lr=1e-3"],
    )
    assert parse("configs/a.yaml+train.amp=false") == ("a", Path("configs/a.yaml"), ["train.amp=false"])
