"""A trained run loaded for use: its config, tokenizers and model, rebuilt from the run directory and one of
its checkpoints. Commands load runs through nmt/decode/loading.py (which also makes their ensembles)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config.schema import Config
from nmt.config.yaml_file import load_saved_config
from nmt.data.tokenizer import Tokenizers, load_tokenizers
from nmt.errors import UserError
from nmt.models.base import Seq2Seq
from nmt.models.build import build_model
from nmt.run.checkpoint import same_vocabulary
from nmt.run.checkpoint_io import load_checkpoint
from nmt.run.directory import RunDir


@dataclass
class TrainedRun:
    """Everything a trained run directory provides: its config, tokenizers and model."""

    directory: RunDir
    cfg: Config
    tokenizers: Tokenizers
    model: Seq2Seq
    checkpoint: dict[str, Any]
    checkpoint_path: Path

    @property
    def checkpoint_name(self) -> str:
        """'best', 'last' or 'averaged'."""
        return self.checkpoint_path.stem


def load_run(
    path: Path | RunDir, device: torch.device, which: str | None = None, overrides: list[str] | None = None
) -> TrainedRun:
    """Rebuild the trained model of a run directory from its config (with dotted `overrides`, e.g.
    `search.beam_size=3`), tokenizers and a checkpoint (`which`: best, last or averaged; by default the one
    the run's report chose)."""
    run_dir = path if isinstance(path, RunDir) else RunDir(Path(path))
    checkpoint_path = run_dir.find_checkpoint(which)
    cfg = load_saved_config(run_dir.config, overrides)
    markers = cfg.data.terminology.markers if cfg.data.terminology is not None else ()
    tokenizers = load_tokenizers(run_dir.path, cfg.tokenizer.joint, cfg.tokenizer.vocabulary, markers)
    checkpoint = load_checkpoint(checkpoint_path)
    if not same_vocabulary(checkpoint.get("vocab"), tokenizers):
        raise UserError(
            f"{checkpoint_path} was trained with another vocabulary than {tokenizers.src.path}; "
            f"use the checkpoint and sentencepiece model of the same run"
        )
    model = build_model(cfg.model, len(tokenizers.src), len(tokenizers.tgt), tokenizers.joint, tokenizers.pad)
    try:
        model.load_state_dict(checkpoint["model"])
    except RuntimeError as err:
        problem = [line.strip() for line in str(err).splitlines() if line.strip()][-1][:200]
        raise UserError(
            f"{checkpoint_path} does not match the model in {run_dir.config} ({problem}); "
            f"use the config the checkpoint was trained with"
        ) from err
    return TrainedRun(run_dir, cfg, tokenizers, model.to(device).eval(), checkpoint, checkpoint_path)
