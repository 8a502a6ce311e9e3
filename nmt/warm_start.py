"""`nmt train CONFIG --init-from RUN_DIR`: fine-tuning. The new run starts from the parent run's weights (the
checkpoint its report chose) and keeps its sentencepiece model, so the vocabulary is the parent's; the
optimizer and the learning-rate schedule start afresh."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from nmt.checkpoint import load_checkpoint
from nmt.config import Config, ModelConfig, replace
from nmt.data.tokenizer import tokenizer_paths
from nmt.errors import UserError
from nmt.files import atomic_write
from nmt.run_dir import RunDir

log = logging.getLogger(__name__)

FREE_MODEL_KEYS = ("dropout", "attention_dropout")  # the model settings a child may change: no weight's shape


@dataclass(frozen=True)
class Parent:
    """The run a new one starts from, and the checkpoint it starts from."""

    run_dir: RunDir
    cfg: Config
    checkpoint: Path

    def weights(self) -> dict:
        return load_checkpoint(self.checkpoint)["model"]

    def copy_tokenizers(self, run_dir: RunDir) -> None:
        """Copy the parent's sentencepiece model(s) into the new run directory."""
        for path in dict.fromkeys(tokenizer_paths(self.run_dir.path, self.cfg.tokenizer.joint)):
            model = path.read_bytes()
            atomic_write(run_dir.path / path.name, lambda handle, model=model: handle.write(model))


def find_parent(cfg: Config, path: Path) -> tuple[Parent, Config]:
    """The parent run at `path`, and `cfg` with the parent's tokenizer settings; a model setting that would
    change a weight's shape is a UserError naming the key."""
    run_dir = RunDir(path)
    parent_cfg = run_dir.load_config()
    for field in dataclasses.fields(ModelConfig):
        mine, theirs = getattr(cfg.model, field.name), getattr(parent_cfg.model, field.name)
        if field.name not in FREE_MODEL_KEYS and mine != theirs:
            raise UserError(
                f"model.{field.name}={mine} contradicts the model of {path} that --init-from starts from "
                f"({field.name}={theirs}); set model.{field.name}={theirs} or train from scratch"
            )
    if cfg.tokenizer != parent_cfg.tokenizer:
        log.info("--init-from keeps the sentencepiece model of %s (its tokenizer settings apply)", path)
    parent = Parent(run_dir, parent_cfg, run_dir.find_checkpoint())
    return parent, replace(cfg, tokenizer=dataclasses.asdict(parent_cfg.tokenizer))
