"""A whole experiment: the sections of a config together (nmt/config/sections.py; the model's section is
nmt/models/config.py, defined beside the models as nanoGPT keeps `GPTConfig` beside `GPT`), and changing them.
Reading and writing configs (YAML files, `--set` overrides, the dicts checkpoints hold, older layouts) is
nmt/config/yaml_file.py.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, is_dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from nmt.config.sections import DataConfig, SearchConfig, TokenizerConfig, TrainConfig
from nmt.errors import ConfigError
from nmt.models.config import ModelConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


@dataclass(frozen=True)
class Config:
    """A whole experiment."""

    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    search: SearchConfig = field(default_factory=SearchConfig)

    def __post_init__(self) -> None:
        multiple, limit = self.train.pad_to_multiple, self.model.position_limit
        longest = -(-(self.data.max_len + 1) // multiple) * multiple  # a sentence + bos/eos, padded
        if limit is not None and limit < longest:
            raise ConfigError(
                f"model.transformer.max_positions={limit} is too small for data.max_len={self.data.max_len}: "
                f"training needs {longest} positions; raise it or lower data.max_len"
            )
        if self.train.alignment is not None:
            heads = None if self.model.transformer is None else self.model.transformer.heads
            self.train.alignment.check_model(self.model.decoder_layers, heads)
            if self.train.alignment.links is not None and self.data.directions.back_translation:
                raise ConfigError(
                    "data.multilingual.back_translation: a back-translated pair has a new source that "
                    "train.alignment.links does not align; remove one of them"
                )
        if self.data.terminology is not None and self.train.alignment and self.train.alignment.links:
            raise ConfigError(
                "data.terminology writes terms into the training sources, whose words train.alignment.links "
                "then no longer aligns; remove one of them"
            )
        if self.model.share_embeddings and not self.tokenizer.joint:
            raise ConfigError(
                "model.share_embeddings=true needs one vocabulary for both sides: set tokenizer.joint=true"
            )
        if self.data.directions.tagged and not self.tokenizer.joint:
            raise ConfigError(
                "tokenizer.joint=false: a multilingual run needs one joint vocabulary for all its languages"
            )


def with_absolute_paths(cfg: Config) -> Config:
    """`cfg` with its data (terminology links among them), TensorBoard and alignment paths made absolute
    (relative ones are taken from the working directory), so that a run directory works from anywhere."""

    def absolute(path: str | None) -> str | None:
        return None if path is None else os.path.abspath(os.path.expanduser(path))

    data: dict[str, Any] = {
        name: absolute(getattr(cfg.data, name)) for name in ("dir", "train", "valid", "test")
    }
    if cfg.data.terminology is not None:
        data["terminology"] = {"links": absolute(cfg.data.terminology.links)}
    train: dict[str, Any] = {"tensorboard_dir": absolute(cfg.train.tensorboard_dir)}
    if cfg.train.alignment is not None:
        names = ("links", "gold_src", "gold_tgt", "gold_links")
        train["alignment"] = {name: absolute(getattr(cfg.train.alignment, name)) for name in names}
    return replace(cfg, data=data, train=train)


def section_class(hint: Any) -> Any:
    """The dataclass that a field's type hint names (`X` or `X | None`), or None for a plain value."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        named = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        hint = named[0] if len(named) == 1 else None
    return hint if is_dataclass(hint) else None


def sections(cls: type, prefix: str = "") -> list[tuple[str, type]]:
    """The section dataclasses inside dataclass `cls`, each with its dotted name, in the order of their fields
    (`model.transformer` right after `model`)."""
    found = []
    for name, hint in typing.get_type_hints(cls).items():
        inner = section_class(hint)
        if inner is not None:
            found += [(f"{prefix}{name}", inner), *sections(inner, f"{prefix}{name}.")]
    return found


def replace(cfg: Config, **sections: Mapping[str, Any]) -> Config:
    """A copy of `cfg` with some fields of some sections changed: replace(cfg, train={"max_steps": 5}); a
    mapping changes fields of a subsection, replace(cfg, model={"transformer": {"d_model": 32}})."""
    return _replaced(cfg, sections)


def _replaced(section: T, changes: Mapping[str, Any]) -> T:
    """A copy of dataclass `section` with `changes`; a mapping among them changes a section's fields (an
    absent section, e.g. `rnn` of a Transformer config, starts from its defaults)."""
    hints, values = typing.get_type_hints(type(section)), {}
    for name, value in changes.items():
        inner = section_class(hints[name]) if name in hints else None
        if inner is not None and isinstance(value, Mapping):
            value = _replaced(getattr(section, name) or inner(), value)
        values[name] = value
    return dataclasses.replace(section, **values)


def max_source_len(cfg: Config) -> int:
    """Longest source (in subwords) to translate: 4× the training limit, and short enough that the longest
    allowed output (a * length + b, after bos and a decoder tag) still fits the model's positions (a
    Transformer's)."""
    search_cfg, positions = cfg.search, cfg.model.position_limit
    if positions is None:
        return 4 * cfg.data.max_len
    forced = cfg.data.directions.forced_tokens
    limit = int((positions - 2 - forced - search_cfg.max_len_b) / max(search_cfg.max_len_a, 1.0))
    return max(1, min(4 * cfg.data.max_len, limit))
