"""benchmarks/import_speed.py on a tiny MarianMT model: both loads run in fresh processes and both models
train, and the tables have their rows; no figure is checked."""

import json

import pytest

from benchmarks import import_speed

TINY = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2}
TINY |= {"decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32}


@pytest.mark.slow
def test_the_tables_have_their_rows(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--work", str(tmp_path / "work"), "--vocab", "300", "--repeats", "1", "--steps", "1"]
    import_speed.main([*argv, "--batch", "2", "6", "--shape", json.dumps(TINY)])
    out = capsys.readouterr().out
    rows = [line.split("|")[1].strip() for line in out.splitlines() if line.startswith("| ")]
    assert rows == [
        "loading a model of OPUS-MT's size",
        "transformers",
        "nmt import",
        "nmt import ÷ transformers",
        "weights (model.safetensors)",
        "memory growth ÷ weights (transformers, nmt import)",
        "update, batch 2×6 tokens, cpu",
        "imported (post-norm, swish, logits bias)",
        "nmt Transformer (pre-norm, relu)",
        "imported ÷ nmt",
    ]
    assert "parameters;" in out and "machine: " in out and "cores" in out
