"""Config files and dicts → `Config`, and back: strict YAML (no aliases, no duplicate keys, bounded depth),
dotted `--set` overrides, unknown keys and wrong types as one-line ConfigErrors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import logging
import math
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from nmt.atomic_files import atomic_write_text
from nmt.config.multilingual import BILINGUAL_PAIR, pair_beside_multilingual
from nmt.config.schema import Config, section_class
from nmt.errors import ConfigError, UserError
from nmt.models.config import ModelConfig

T = TypeVar("T")
log = logging.getLogger(__name__)

MAX_YAML_DEPTH = 32  # nesting of a config document (ours is 3 deep)


def _check_value(name: str, hint: Any, value: Any) -> Any:
    """Return `value` converted to `hint` where YAML is loose (int → float, list → tuple), or raise."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        alternatives = [arg for arg in args if arg is not type(None)]
        if len(alternatives) == 1:
            return _check_value(name, alternatives[0], value)
        for inner in alternatives:
            with contextlib.suppress(ConfigError):
                return _check_value(name, inner, value)
        expected = " or ".join(
            " or ".join(map(repr, typing.get_args(a))) if typing.get_origin(a) is Literal else a.__name__
            for a in alternatives
        )
        raise ConfigError(f"{name}={value!r}; expected {expected}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{name}={value!r}; expected one of {', '.join(map(repr, args))}")
        return value
    if origin is tuple and args[-1:] == (Ellipsis,):  # tuple[str, ...]: a list of any length
        if not isinstance(value, list | tuple):
            raise ConfigError(f"{name}={value!r} is not a list")
        return tuple(_check_value(f"{name}[{i}]", args[0], item) for i, item in enumerate(value))
    if origin is dict:  # dict[str, float]: a mapping
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name}={value!r} is not a mapping")
        return {str(key): _check_value(f"{name}.{key}", args[1], item) for key, item in value.items()}
    if origin is tuple:
        if not isinstance(value, list | tuple) or len(value) != len(args):
            raise ConfigError(f"{name}={value!r} is not a list of {len(args)} values")
        return tuple(
            _check_value(f"{name}[{i}]", arg, item)
            for i, (arg, item) in enumerate(zip(args, value, strict=True))
        )
    if hint is float and type(value) is int:  # `lr: 1` in YAML is a fine float
        value = float(value)
    if hint is float and type(value) is float and not math.isfinite(value):
        raise ConfigError(f"{name}={value!r} must be a finite number")
    if hint in (int, float, str, bool) and type(value) is not hint:
        tip = " (write floats with a dot, e.g. 3.0e-4)" if hint is float and isinstance(value, str) else ""
        kind = "an integer" if hint is int else f"a {hint.__name__}"
        raise ConfigError(f"{name}={value!r} is not {kind}{tip}")
    return value


def from_dict(cls: type[T], raw: Mapping[str, Any], prefix: str = "") -> T:
    """Build dataclass `cls` from a nested mapping; unknown keys and wrong types raise ConfigError."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"section '{prefix.rstrip('.') or 'top level'}' must be a mapping, got {raw!r}")
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        name, hint = f"{prefix}{key}", hints.get(key)
        if hint is None:
            raise ConfigError(_unknown_key(hints, str(key), prefix))
        section = section_class(hint)
        if section is not None and value is None and hint is not section:  # `rnn: null`: no such section
            values[key] = None
        elif section is not None:
            values[key] = from_dict(section, value or {}, f"{name}.")
        else:
            values[key] = _check_value(name, hint, value)
    try:
        return cls(**values)
    except TypeError as err:
        raise ConfigError(f"section '{prefix.rstrip('.')}': {err}") from err


# Names other toolkits (fairseq, Joey NMT, OpenNMT, Hugging Face) give settings of ours, too far from ours in
# spelling for difflib to find, and our own former names (`search.batch_size`, sentences, became
# `search.batch_tokens`): each → our names for it, the first one among a section's keys is suggested
KNOWN_ALIASES = {
    "learning_rate": ("lr",),
    "batch_size": ("batch_tokens",),
    "max_tokens": ("batch_tokens",),
    "epochs": ("max_epochs",),
    "num_epochs": ("max_epochs",),
    "max_update": ("max_steps",),
    "train_steps": ("max_steps",),
    "steps": ("max_steps",),
    "dropout_rate": ("dropout",),
    "warmup": ("warmup_steps",),
    "warmup_updates": ("warmup_steps",),
    "clip_grad_norm": ("clip_norm",),
    "max_grad_norm": ("clip_norm",),
    "num_layers": ("encoder_layers",),
    "layers": ("encoder_layers",),
    "num_heads": ("heads",),
    "attention_heads": ("heads",),
    "hidden_size": ("d_model",),
    "embed_dim": ("d_model", "embedding_size"),
    "emb_size": ("d_model", "embedding_size"),
    "dim_feedforward": ("ff_dim",),
    "ffn_dim": ("ff_dim",),
    "ff_size": ("ff_dim",),
    "beam": ("beam_size",),
    "validation_freq": ("eval_every",),
    "eval_steps": ("eval_every",),
    "logging_freq": ("log_every",),
    "max_length": ("max_len",),
    "max_sent_length": ("max_len",),
    "vocab": ("vocab_size",),
    "rnn_type": ("cell",),
    "scheduling": ("schedule",),
    "early_stopping_patience": ("patience",),
}


def _unknown_key(hints: dict[str, Any], key: str, prefix: str) -> str:
    """The error for an unknown `key` among the fields `hints`: the closest name, looked for among the fields
    and the keys of their sections (`model.dmodel` → `model.transformer.d_model`), and the valid keys."""
    names = {name: name for name in hints}
    for section_name, hint in hints.items():
        section = section_class(hint)
        for inner in typing.get_type_hints(section) if section is not None else ():
            names.setdefault(inner, f"{section_name}.{inner}")
    aliases = [name for name in KNOWN_ALIASES.get(key.lower(), ()) if name in names]
    guess = aliases or difflib.get_close_matches(key, names, n=1)
    tip = f"did you mean '{prefix}{names[guess[0]]}'? " if guess else ""
    return f"unknown key '{prefix}{key}'; {tip}valid keys: {', '.join(sorted(hints))}"


def apply_override(raw: dict[str, Any], override: str) -> None:
    """Write one `dotted.key=value` override into the raw config dict (value parsed as YAML)."""
    key, sep, text = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override '{override}' is not KEY=VALUE, e.g. train.lr=3.0e-4")
    *parents, leaf = key.strip().split(".")
    node = raw
    for part in parents:
        if node.get(part) is None:  # absent, or an empty `section:` in the YAML file
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            raise ConfigError(f"override '{override}': '{part}' is not a section")
    try:
        node[leaf] = parse_yaml(text) if text.strip() else None
    except yaml.YAMLError as err:
        raise ConfigError(f"override '{override}': {yaml_problem(err)}") from err


class _PlainLoader(yaml.SafeLoader):
    """A loader for plain documents: no aliases (an alias bomb expands ~1 KB into gigabytes), nesting at most
    MAX_YAML_DEPTH deep (the composer recurses), no key given twice (PyYAML keeps the last one)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed", mark)
        self.depth = getattr(self, "depth", 0) + 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(
                    None, None, f"nested over {MAX_YAML_DEPTH} levels deep", mark
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, typing.Hashable) or key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def parse_yaml(text: str) -> Any:
    """One plain YAML document (see _PlainLoader); raises yaml.YAMLError."""
    loader = _PlainLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def yaml_problem(err: yaml.YAMLError) -> str:
    """One line about a YAML error: the problem and where it is."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem:
        where = (
            f" (line {err.problem_mark.line + 1}, column {err.problem_mark.column + 1})"
            if err.problem_mark
            else ""
        )
        return f"{err.problem}{where}"
    return (str(err).splitlines() or ["invalid YAML"])[0]


def load_config(path: Path | None, overrides: list[str] | None = None, saved: bool = False) -> Config:
    """Load a YAML config (or the defaults when `path` is None) and apply dotted overrides. A `saved` config
    is one that nmt wrote into a run directory (those of earlier versions may hold `data.src_lang` and
    `data.tgt_lang` at their defaults beside `data.multilingual`)."""
    raw = _read_yaml(Path(path)) if path is not None else {}
    in_file = set(raw["data"]) if isinstance(raw.get("data"), dict) else set()
    for override in overrides or []:
        apply_override(raw, override)
    yielded: list[str] = []
    if not saved:
        overridden = {text.partition("=")[0].strip().removeprefix("data.") for text in overrides or []}
        yielded = _yield_pair_to_multilingual(raw, in_file - overridden)
    cfg = from_dict(Config, raw)
    named = [name for name in cfg.data.unused if name in (raw.get("data") or {})]
    if named and not saved:
        raise pair_beside_multilingual(named)
    if yielded:
        names = " and ".join(f"data.{name}" for name in yielded)
        log.info("%s of %s give way to data.multilingual, set on the command line", names, path)
    return cfg


def _yield_pair_to_multilingual(raw: dict[str, Any], from_file: set[str]) -> list[str]:
    """A bilingual config file made multilingual by overrides alone (`--set data.multilingual.directions=…`):
    the `data.src_lang`/`data.tgt_lang` that only the file names (`from_file`) give way; returns their names.
    Both in the file, or the pair set by an override, stay the error of load_config."""
    data = raw.get("data")
    if not isinstance(data, dict) or data.get("multilingual") is None or "multilingual" in from_file:
        return []
    yielded = [name for name in BILINGUAL_PAIR if name in data and name in from_file]
    for name in yielded:
        del data[name]
    return yielded


def load_saved_config(path: Path, overrides: list[str] | None = None) -> Config:
    """The config.yaml of a run directory, with dotted `overrides` (e.g. `search.beam_size=3`); a missing or
    unreadable one is a UserError."""
    if not path.is_file():
        raise UserError(f"{path.parent} has no {path.name}; the run directory is incomplete (copy it back)")
    try:
        return load_config(path, overrides, saved=True)
    except ConfigError as err:
        raise UserError(f"{path}: {err}") from err


def _read_yaml(path: Path) -> dict[str, Any]:
    """The mapping of sections in a config file; ConfigError when there is none."""
    if path.is_dir():
        raise ConfigError(
            f"config {path} is a directory; pass a YAML file, e.g. configs/tiny-transformer.yaml"
        )
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        raw = parse_yaml(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {yaml_problem(err)}") from err
    except (UnicodeDecodeError, OSError) as err:
        raise ConfigError(f"cannot read {path}: {str(err).splitlines()[0]}") from err
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping of sections (data:, model:, …), got {raw!r}")
    return raw


def saved_model_config(raw: Mapping[str, Any]) -> ModelConfig:
    """The model settings in a checkpoint (its config's `model` dict)."""
    return from_dict(ModelConfig, raw, "model.")


def to_dict(cfg: Config) -> dict[str, Any]:
    """Plain nested dict of a config (tuples as lists), for YAML files and checkpoints."""

    def plain(value: Any) -> Any:
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    raw = plain(dataclasses.asdict(cfg))
    raw["data"] = {key: value for key, value in raw["data"].items() if key not in cfg.data.unused}
    raw["model"] = {key: value for key, value in raw["model"].items() if value is not None}  # no other family
    return raw


def save_config(cfg: Config, path: Path) -> None:
    """Write the resolved config as YAML (atomically: a crash leaves the old file or the new one)."""
    atomic_write_text(path, yaml.safe_dump(to_dict(cfg), sort_keys=False))
