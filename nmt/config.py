"""Experiment configuration: YAML → frozen dataclasses, strict about unknown keys and wrong types."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, is_dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from nmt.errors import ConfigError
from nmt.files import atomic_write_text

T = TypeVar("T")

MAX_SIZE = 2**31 - 1  # sizes and counts: beyond this torch and sentencepiece overflow or cannot allocate
MAX_BEAM = 256  # beam search keeps beam × vocabulary scores per sentence
MAX_PARAMETERS = 2**33  # 32 GiB of float32 weights, before gradients and optimizer state
MAX_YAML_DEPTH = 32  # nesting of a config document (ours is 3 deep)


def check_range(name: str, value: float, low: float | None = None, high: float | None = None,
                low_open: bool = False, high_open: bool = False) -> None:  # fmt: skip
    """Raise ConfigError unless `value` is finite and within [low, high] (a bound left out is open-ended;
    `low_open`/`high_open` exclude the bound itself)."""
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if (isinstance(value, float) and not math.isfinite(value)) or too_low or too_high:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        bounds = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise ConfigError(
            f"{name}={value!r} must be {'a finite number ' * isinstance(value, float)}in {bounds}"
        )


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text lives and how it is cleaned.

    `dir` holds `train.L`, `valid.L` (or `val.L`/`dev.L`) and `test.L` (or `test2016.L`). Explicit
    `train`/`valid`/`test` entries override it: a path prefix (`corpus/train` → `corpus/train.de`) or a
    `.tsv` file with the source in the first column and the target in the second.
    """

    src_lang: str = "de"
    tgt_lang: str = "en"
    dir: str | None = None
    train: str | None = None
    valid: str | None = None
    test: str | None = None
    max_len: int = 128  # training pairs longer than this (in subwords, either side) are dropped
    skip_bad_lines: bool = False  # skip lines that are not valid UTF-8 (with a count) instead of failing

    def __post_init__(self) -> None:
        if self.max_len < 1:
            raise ConfigError(f"data.max_len={self.max_len} must be at least 1")


@dataclass(frozen=True)
class TokenizerConfig:
    """sentencepiece settings; the model is trained on the training split."""

    vocab_size: int = 8000
    model_type: Literal["bpe", "unigram", "char", "word"] = "bpe"
    joint: bool = True  # one vocabulary for both languages (needed to tie all embeddings)
    character_coverage: float = 1.0
    max_sentences: int = 2_000_000  # sentences sampled to train the tokenizer
    auto_shrink: bool = True  # reduce vocab_size (with a warning) when the corpus is too small for it

    def __post_init__(self) -> None:
        if self.vocab_size <= 4:
            raise ConfigError(f"tokenizer.vocab_size={self.vocab_size} must exceed the 4 special tokens")
        if 0 < self.max_sentences <= 100:  # sentencepiece rejects 1..100 with an internal error
            raise ConfigError(f"tokenizer.max_sentences={self.max_sentences} must be 0 (all) or over 100")
        check_range("tokenizer.vocab_size", self.vocab_size, high=MAX_SIZE)
        check_range("tokenizer.max_sentences", self.max_sentences, 0, 2**31 - 1)
        check_range("tokenizer.character_coverage", self.character_coverage, 0.0, 1.0, low_open=True)


@dataclass(frozen=True)
class ModelConfig:
    """Architecture. Transformer fields are ignored by the RNN models and vice versa."""

    type: Literal["transformer", "rnn-bahdanau", "rnn-luong"] = "transformer"
    d_model: int = 512  # Transformer width; embedding size of the RNN models
    heads: int = 8
    ff_dim: int = 2048
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float = 0.0
    norm: Literal["pre", "post"] = "pre"
    tie_embeddings: bool = True
    max_positions: int = 1024
    rnn_cell: Literal["gru", "lstm"] = "gru"
    hidden_size: int = 512  # RNN hidden size (per direction in the encoder)
    bridge: Literal["learned", "zero", "last"] = "learned"
    luong_score: Literal["dot", "general", "concat"] = "general"
    input_feeding: bool = True
    scale_scores: bool = False  # Luong dot/general scores divided by sqrt(d)

    def __post_init__(self) -> None:
        for name in ("d_model", "heads", "ff_dim", "encoder_layers", "decoder_layers", "hidden_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name}={getattr(self, name)} must be at least 1")
        if self.type == "transformer" and self.d_model % self.heads:
            raise ConfigError(f"model.d_model={self.d_model} must be divisible by model.heads={self.heads}")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"model.{name}={getattr(self, name)} must be in [0, 1)")
        check_range("model.max_positions", self.max_positions, 1, MAX_SIZE)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, schedule, stopping and checkpointing."""

    seed: int = 1234
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # source+target tokens (with padding) per batch, before accumulation; `auto` fits it to GPU memory
    batch_tokens: int | Literal["auto"] = 8192
    accumulate: int = 1
    distributed_batch: Literal["split", "scale"] = "split"  # processes share each update, or each adds one
    pad_to_multiple: int = 8  # pad batch lengths to a multiple of this (tensor cores, fewer compiled shapes)
    lr: float = 7.0e-4
    warmup_steps: int = 4000
    schedule: Literal["inverse_sqrt", "constant"] = "inverse_sqrt"
    betas: tuple[float, float] = (0.9, 0.98)
    weight_decay: float = 0.0
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    max_steps: int = 0  # 0 = no limit
    max_epochs: int = 0
    max_time: float = 0.0  # seconds of training; 0 = no limit
    eval_every: int = 1000  # steps between validations
    eval_max_sentences: int = 0  # validate BLEU on at most this many sentences; 0 = all
    patience: int = 0  # stop after this many validations without a better BLEU; 0 = never
    target_bleu: float = 0.0  # stop once validation BLEU reaches this; 0 = never
    log_every: int = 50  # updates per training record (metrics.jsonl; a log line when not on a terminal)
    tensorboard: bool = False  # also write TensorBoard event files (needs the tensorboard package)
    tensorboard_dir: str | None = None  # where they go; default RUN_DIR/tensorboard
    keep_checkpoints: int = 0  # also keep the weights of the last N validations as checkpoints/step<N>.pt
    average_checkpoints: int = 0  # after training, average the last N kept checkpoints into averaged.pt
    final_report: bool = True  # after training: beam-search valid/test scores, curves, heatmaps, report.json
    amp: bool = True  # bf16 autocast on CUDA
    compile: bool = False  # torch.compile the model on CUDA
    compile_mode: Literal["default", "reduce-overhead", "max-autotune"] = "default"  # torch.compile's mode
    cuda_graphs: bool = False  # replay the training step from CUDA graphs (CUDA, one process)
    static_shapes: bool | Literal["auto"] = (
        "auto"  # pad batches to planned shapes; auto: with cuda_graphs/compile
    )
    max_shapes: int = 32  # static batch shapes planned, and the most CUDA graphs captured for training
    max_bad_steps: int = 20  # abort after this many updates in a row skipped (non-finite loss, out of memory)

    def __post_init__(self) -> None:
        at_least_one = (
            *(["batch_tokens"] if self.batch_tokens != "auto" else []),
            "accumulate",
            "pad_to_multiple",
            "eval_every",
            "log_every",
            "max_bad_steps",
            "max_shapes",
        )
        for name in at_least_one:
            if getattr(self, name) < 1:
                raise ConfigError(f"train.{name}={getattr(self, name)} must be at least 1")
        for name in ("max_steps", "max_epochs", "max_time"):
            if getattr(self, name) < 0:
                raise ConfigError(f"train.{name}={getattr(self, name)} must be 0 (no limit) or positive")
        if self.average_checkpoints > self.keep_checkpoints:
            raise ConfigError(
                f"train.average_checkpoints={self.average_checkpoints} needs train.keep_checkpoints >= it"
            )
        if self.lr <= 0:
            raise ConfigError(f"train.lr={self.lr} must be positive")
        if self.max_shapes > 1024:
            raise ConfigError(f"train.max_shapes={self.max_shapes} must be at most 1024")
        if self.compile and self.cuda_graphs:
            raise ConfigError("train.compile and train.cuda_graphs are alternatives; set one of them")
        self._check_ranges()

    def _check_ranges(self) -> None:
        """Bounds of the fields that the checks above leave open (a value outside them fails later)."""
        check_range("train.seed", self.seed, 0, 2**32 - 1)  # what numpy and CUDA accept
        for i, beta in enumerate(self.betas):
            check_range(f"train.betas[{i}]", beta, 0.0, 1.0, high_open=True)
        check_range("train.label_smoothing", self.label_smoothing, 0.0, 1.0, high_open=True)
        check_range("train.target_bleu", self.target_bleu, 0.0, 100.0)
        if self.batch_tokens != "auto":
            check_range("train.batch_tokens", self.batch_tokens, 1, MAX_SIZE)
        counts = ("warmup_steps", "eval_max_sentences", "patience", "keep_checkpoints", "average_checkpoints",
                  "max_steps", "max_epochs", "accumulate", "pad_to_multiple", "eval_every", "log_every",
                  "max_bad_steps")  # fmt: skip
        for name in counts:
            check_range(f"train.{name}", getattr(self, name), 0, MAX_SIZE)
        for name in ("weight_decay", "clip_norm", "max_time"):
            check_range(f"train.{name}", getattr(self, name), 0.0)


@dataclass(frozen=True)
class SearchConfig:
    """Decoding for validation, `nmt translate` and `nmt evaluate`."""

    beam_size: int = 5
    length_penalty: float = 1.0  # GNMT alpha: scores divided by ((5 + len) / 6) ** alpha
    max_len_a: float = 1.5  # output length limit: a * source length + b
    max_len_b: int = 10
    batch_size: int = 256  # sentences per decoding batch
    cuda_graphs: bool = False  # replay each decoding step from a CUDA graph (CUDA only)
    nbest: int = 1  # hypotheses beam search returns per sentence, best first

    def __post_init__(self) -> None:
        for name in ("beam_size", "batch_size", "nbest"):
            if getattr(self, name) < 1:
                raise ConfigError(f"search.{name}={getattr(self, name)} must be at least 1")
        check_range("search.beam_size", self.beam_size, 1, MAX_BEAM)
        check_range("search.batch_size", self.batch_size, 1, MAX_SIZE)
        check_range("search.length_penalty", self.length_penalty, 0.0, 10.0)
        check_range("search.max_len_a", self.max_len_a, 0.0, 1000.0)
        check_range("search.max_len_b", self.max_len_b, 0, 100_000)
        if self.nbest > self.beam_size:
            raise ConfigError(
                f"search.nbest={self.nbest} exceeds search.beam_size={self.beam_size}; beam search finds at "
                f"most beam_size hypotheses: raise the beam size or lower nbest"
            )


@dataclass(frozen=True)
class Config:
    """A whole experiment."""

    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    search: SearchConfig = field(default_factory=SearchConfig)

    def __post_init__(self) -> None:
        multiple = self.train.pad_to_multiple
        longest = -(-(self.data.max_len + 1) // multiple) * multiple  # a sentence + bos/eos, padded
        if self.model.max_positions < longest:
            raise ConfigError(
                f"model.max_positions={self.model.max_positions} is too small for data.max_len="
                f"{self.data.max_len}: training needs {longest} positions; raise it or lower data.max_len"
            )


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
        raise ConfigError(f"{name}={value!r} is not a {hint.__name__}{tip}")
    return value


def from_dict(cls: type[T], raw: Mapping[str, Any], prefix: str = "") -> T:
    """Build dataclass `cls` from a nested mapping; unknown keys and wrong types raise ConfigError."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"section '{prefix.rstrip('.') or 'top level'}' must be a mapping, got {raw!r}")
    hints, values = typing.get_type_hints(cls), {}
    for key, value in raw.items():
        name, hint = f"{prefix}{key}", hints.get(key)
        if hint is None:
            guess = difflib.get_close_matches(str(key), hints, n=1)
            tip = f"did you mean '{prefix}{guess[0]}'? " if guess else ""
            raise ConfigError(f"unknown key '{name}'; {tip}valid keys: {', '.join(sorted(hints))}")
        if is_dataclass(hint):
            values[key] = from_dict(hint, value or {}, f"{name}.")
        else:
            values[key] = _check_value(name, hint, value)
    try:
        return cls(**values)
    except TypeError as err:
        raise ConfigError(f"section '{prefix.rstrip('.')}': {err}") from err


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


def load_config(path: Path | None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (or the defaults when `path` is None) and apply dotted overrides."""
    raw: dict[str, Any] = {}
    if path is not None:
        if Path(path).is_dir():
            raise ConfigError(
                f"config {path} is a directory; pass a YAML file, e.g. configs/tiny-transformer.yaml"
            )
        if not Path(path).is_file():
            raise ConfigError(f"config file {path} does not exist")
        try:
            raw = parse_yaml(Path(path).read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path} is not valid YAML: {yaml_problem(err)}") from err
        except (UnicodeDecodeError, OSError) as err:
            raise ConfigError(f"cannot read {path}: {str(err).splitlines()[0]}") from err
        if not isinstance(raw, dict):
            raise ConfigError(f"{path} must hold a mapping of sections (data:, model:, …), got {raw!r}")
    for override in overrides or []:
        apply_override(raw, override)
    cfg = from_dict(Config, raw)
    check_model_size(cfg)
    return cfg


def check_model_size(cfg: Config) -> None:
    """Refuse a model whose weights could not be allocated (counted on the meta device: nothing allocated)."""
    import torch

    from nmt.models import build_model

    vocab = cfg.tokenizer.vocab_size
    try:
        with torch.device("meta"):
            model = build_model(cfg.model, vocab, vocab, cfg.tokenizer.joint)
        count = sum(p.numel() for p in model.parameters())
    except (RuntimeError, ValueError, OverflowError, TypeError) as err:  # sizes past what torch can index
        raise ConfigError(f"the model cannot be built: {(str(err).splitlines() or [''])[0][:160]}") from err
    if count > MAX_PARAMETERS:
        raise ConfigError(
            f"the model asks for {count:,} parameters ({count * 4 / 2**30:,.0f} GiB of float32 weights, "
            f"{count * 16 / 2**30:,.0f} GiB to train), over the limit of {MAX_PARAMETERS:,}; "
            f"lower model.d_model, model.ff_dim, model.hidden_size, the layers or tokenizer.vocab_size"
        )


def to_dict(cfg: Config) -> dict[str, Any]:
    """Plain nested dict of a config (tuples as lists), for YAML files and checkpoints."""

    def plain(value: Any) -> Any:
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(cfg))


def save_config(cfg: Config, path: Path) -> None:
    """Write the resolved config as YAML (atomically: a crash leaves the old file or the new one)."""
    atomic_write_text(path, yaml.safe_dump(to_dict(cfg), sort_keys=False))


def with_absolute_paths(cfg: Config) -> Config:
    """`cfg` with its data and TensorBoard paths made absolute (relative ones are taken from the working
    directory), so that a run directory works from anywhere."""

    def absolute(path: str | None) -> str | None:
        return None if path is None else os.path.abspath(os.path.expanduser(path))

    data = {name: absolute(getattr(cfg.data, name)) for name in ("dir", "train", "valid", "test")}
    return replace(cfg, data=data, train={"tensorboard_dir": absolute(cfg.train.tensorboard_dir)})


def replace(cfg: Config, **sections: Mapping[str, Any]) -> Config:
    """A copy of `cfg` with some fields of some sections changed: replace(cfg, train={"max_steps": 5})."""
    changed = {name: dataclasses.replace(getattr(cfg, name), **fields) for name, fields in sections.items()}
    return dataclasses.replace(cfg, **changed)
