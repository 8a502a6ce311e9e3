"""benchmarks/finetune_bench.py on a tiny reordering corpus as the general domain and 447 pairs of it as the
second: every step runs (train, export, import, fine-tune, from scratch) and the table has a row per model;
no figure is checked."""

import re
from pathlib import Path

import pytest

from benchmarks import finetune_bench
from nmt.data.synthetic import reordering_pairs, write_reordering_corpus

TINY = [f"model.{key}" for key in ("encoder_layers=1", "decoder_layers=1", "transformer.d_model=32")]
TINY += ["model.transformer.heads=2", "model.transformer.ff_dim=64", "tokenizer.vocab_size=300"]
TINY += ["train.final_report=false"]


@pytest.mark.slow
def test_every_step_runs_and_the_table_has_a_row_per_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    general = write_reordering_corpus(
        tmp_path / "general", 400, 30, 30, vocab=60, src_lang="en", tgt_lang="fr"
    )
    src, tgt = reordering_pairs(447, 60, 3, 8, seed=7)
    domain = tmp_path / "domain.src-tgt"
    domain.write_text("".join(f"{s} ||| {t} \n" for s, t in zip(src, tgt, strict=True)), encoding="utf-8")
    sets = [option for setting in TINY for option in ("--set", setting)]
    argv = ["--general", str(general), "--domain", str(domain), "--work", str(tmp_path / "work")]
    finetune_bench.main([*argv, "--steps", "20", "--finetune-steps", "10", "--", *sets])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert [row.split("|")[1].strip() for row in rows] == [
        "model",
        "stand-in, imported",
        "fine-tuned",
        "from scratch",
    ]
    assert all(len(re.findall(r"\| +\d+\.\d ", row + " ")) == 4 for row in rows[1:])
    assert (tmp_path / "work" / "domain" / "test.fr").read_text().count("\n") == 150
    assert "updates: stand-in 20, domain 10 each" in out
