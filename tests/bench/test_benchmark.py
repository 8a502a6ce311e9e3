"""`nmt benchmark` runs on CPU with small settings and reports every figure."""

import json
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli


@pytest.mark.slow  # trains and profiles: 9 s
def test_benchmark_reports_training_and_decoding_figures(small_corpus: Path, tmp_path: Path) -> None:
    """300 training pairs in batches of 600 tokens: a warm-up epoch and 3 timed updates of the next are some
    fifteen updates; then one second of training towards an unreachable BLEU."""
    out = tmp_path / "bench.json"
    code, stdout, err = run_cli(
        "benchmark",
        str(ROOT / "configs" / "tiny-transformer.yaml"),
        "--data",
        str(small_corpus),
        "--device",
        "cpu",
        "--warmup-steps",
        "1",
        "--steps",
        "3",
        "--bleu-target",
        "99",
        "--bleu-budget",
        "1",
        "--decode-sentences",
        "20",
        "--json",
        str(out),
        "--set",
        "model.transformer.d_model=32",
        "--set",
        "model.transformer.ff_dim=64",
        "--set",
        "train.batch_tokens=600",
        "--set",
        "train.static_shapes=true",
        "--set",
        "train.max_shapes=4",
        "--set",
        "search.max_len_a=1.0",  # an untrained model decodes to the limit: each step is profiled, one step
        "--set",
        "search.max_len_b=2",  # is as good as the next, and half as many halve the profiler's work
    )
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["train_steps_timed"] == 3 and result["decode_sentences"] == 20
    for key in (
        "train_target_tokens_per_s",
        "train_tokens_per_s",
        "epoch_seconds",
        "beam1_sent_per_s",
        "beam5_sent_per_s",
        "beam5_tokens_per_s",
    ):
        assert result[key] > 0, key
    assert result["train_tokens_per_s"] > result["train_target_tokens_per_s"]
    assert result["seconds_to_bleu"] is None and result["torch"] and result["device"]
    assert "train_target_tokens_per_s" in stdout
    # why an update takes its time: counted by the profiler on CPU; the GPU-only figures are null
    assert result["operators_per_update"] > 100 and result["host_syncs_per_update"] == 0
    assert result["optimizer_operators_per_update"] == 6  # fused AdamW: one multi-tensor operator per step
    for beam in (1, 5):  # and why a decoding step takes its time: operators and host syncs per step
        assert result[f"beam{beam}_operators_per_step"] > 10 and result[f"beam{beam}_host_syncs_per_step"] > 0
        assert result[f"beam{beam}_kernel_launches_per_step"] is None  # CUDA only
    assert result["kernel_launches_per_update"] is None and result["gpu_busy_fraction"] is None
    assert 1 <= result["static_shapes"] <= 4 and result["shapes_captured_or_compiled"] == 0
    assert 0.05 < result["peak_resident_memory_gib"] < 64
