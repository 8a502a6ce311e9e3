"""`nmt train CONFIG --init-from RUN_DIR`: fine-tuning. The new run starts from the parent run's weights (the
checkpoint its report chose) and keeps its sentencepiece model, so the vocabulary is the parent's; the
optimizer and the learning-rate schedule start afresh."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

from nmt.atomic_files import atomic_write
from nmt.config.schema import Config, replace
from nmt.config.yaml_file import load_saved_config
from nmt.data.tokenizer import tokenizer_files
from nmt.errors import UserError
from nmt.models.config import ModelConfig
from nmt.run.checkpoint_io import load_checkpoint
from nmt.run.directory import RunDir

log = logging.getLogger(__name__)

FREE_MODEL_KEYS = ("dropout", "transformer.attention_dropout")  # a child may change them: no weight's shape


@dataclass(frozen=True)
class Parent:
    """The run a new one starts from, and the checkpoint it starts from."""

    run_dir: RunDir
    cfg: Config
    checkpoint: Path

    def weights(self) -> dict:
        return load_checkpoint(self.checkpoint)["model"]

    def copy_tokenizers(self, run_dir: RunDir) -> None:
        """Copy the parent's sentencepiece model(s), and an imported model's vocabulary files, into the new
        run directory."""
        tokenizer = self.cfg.tokenizer
        for path in tokenizer_files(self.run_dir.path, tokenizer.joint, tokenizer.vocabulary):
            model = path.read_bytes()
            atomic_write(run_dir.path / path.name, lambda handle, model=model: handle.write(model))


def model_settings(model: ModelConfig) -> dict[str, object]:
    """The model settings by their names below `model.` (`transformer.d_model`); the other family has none."""
    settings: dict[str, object] = {}
    for field in dataclasses.fields(model):
        value = getattr(model, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a section
            settings |= {f"{field.name}.{inner}": item for inner, item in dataclasses.asdict(value).items()}
        elif value is not None:
            settings[field.name] = value
    return settings


def find_parent(cfg: Config, path: Path) -> tuple[Parent, Config]:
    """The parent run at `path`, and `cfg` with the parent's tokenizer settings; a model setting that would
    change a weight's shape is a UserError naming the key."""
    run_dir = RunDir(path)
    checkpoint = run_dir.find_checkpoint()  # first: a path that is no run directory is named as such
    parent_cfg = load_saved_config(run_dir.config)
    mine, theirs = model_settings(cfg.model), model_settings(parent_cfg.model)
    for key in dict.fromkeys([*mine, *theirs]):  # model.type first: another type has other settings
        if key not in FREE_MODEL_KEYS and mine.get(key) != theirs.get(key):
            raise UserError(
                f"model.{key}={mine.get(key)} contradicts the model of {path} that --init-from starts from "
                f"({key}={theirs.get(key)}); set model.{key}={theirs.get(key)} or train from scratch"
            )
    if cfg.tokenizer != parent_cfg.tokenizer:
        log.info("--init-from keeps the sentencepiece model of %s (its tokenizer settings apply)", path)
    parent = Parent(run_dir, parent_cfg, checkpoint)
    return parent, replace(cfg, tokenizer=dataclasses.asdict(parent_cfg.tokenizer))
