"""Experiment configuration as frozen dataclasses, one per YAML section, each checking its own values.

Reading and writing them (YAML files, `--set` overrides, the dicts checkpoints hold, older layouts) is
nmt/config_file.py.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, is_dataclass
from typing import Any, Literal, TypeVar

from nmt.errors import ConfigError

T = TypeVar("T")

MAX_SIZE = 2**31 - 1  # sizes and counts: beyond this torch and sentencepiece overflow or cannot allocate
MAX_BEAM = 256  # beam search keeps beam × vocabulary scores per sentence
MAX_PARAMETERS = 2**33  # 32 GiB of float32 weights, before gradients and optimizer state


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
    # sentences sampled to train the tokenizer (0: all); sentencepiece itself warns that more than 1M slow
    # its training down
    max_sentences: int = 1_000_000
    auto_shrink: bool = True  # reduce vocab_size (with a warning) when the corpus is too small for it

    def __post_init__(self) -> None:
        if self.vocab_size <= 4:
            raise ConfigError(f"tokenizer.vocab_size={self.vocab_size} must exceed the 4 special tokens")
        if 0 < self.max_sentences <= 100:  # sentencepiece rejects 1..100 with an internal error
            raise ConfigError(f"tokenizer.max_sentences={self.max_sentences} must be 0 (all) or over 100")
        check_range("tokenizer.vocab_size", self.vocab_size, high=MAX_SIZE)
        check_range("tokenizer.max_sentences", self.max_sentences, 0, 2**31 - 1)
        check_range("tokenizer.character_coverage", self.character_coverage, 0.0, 1.0, low_open=True)


def check_at_least_one(section: object, prefix: str, names: tuple[str, ...]) -> None:
    """Raise ConfigError naming the first of the fields `names` of `section` below 1."""
    for name in names:
        if getattr(section, name) < 1:
            raise ConfigError(f"{prefix}{name}={getattr(section, name)} must be at least 1")


def check_dropout(section: object, prefix: str, names: tuple[str, ...]) -> None:
    """Raise ConfigError naming the first of the probabilities `names` of `section` outside [0, 1)."""
    for name in names:
        if not 0.0 <= getattr(section, name) < 1.0:
            raise ConfigError(f"{prefix}{name}={getattr(section, name)} must be in [0, 1)")


@dataclass(frozen=True)
class TransformerConfig:
    """The Transformer's settings (`model.transformer`)."""

    d_model: int = 512  # width of the embeddings and of every layer
    heads: int = 8
    ff_dim: int = 2048
    attention_dropout: float = 0.0
    norm: Literal["pre", "post"] = "pre"
    max_positions: int = 1024  # longest sequence (subwords + bos/eos) the position table holds

    def check(self) -> None:
        """Raise ConfigError for a value out of range (run by ModelConfig for the section of its type, so that
        a section of the other type is reported as such first)."""
        check_at_least_one(self, "model.transformer.", ("d_model", "heads", "ff_dim"))
        if self.d_model % self.heads:
            raise ConfigError(
                f"model.transformer.d_model={self.d_model} must be divisible by "
                f"model.transformer.heads={self.heads}"
            )
        check_dropout(self, "model.transformer.", ("attention_dropout",))
        check_range("model.transformer.max_positions", self.max_positions, 1, MAX_SIZE)


@dataclass(frozen=True)
class RNNConfig:
    """The settings of the RNN models (`model.rnn`); the Luong ones do not apply to rnn-bahdanau."""

    cell: Literal["gru", "lstm"] = "gru"
    embedding_size: int = 512
    hidden_size: int = 512  # per direction in the encoder
    bridge: Literal["learned", "zero", "last"] = "learned"
    luong_score: Literal["dot", "general", "concat"] = "general"
    input_feeding: bool = True
    scale_scores: bool = False  # Luong dot/general scores divided by sqrt(d)

    def check(self) -> None:
        """Raise ConfigError for a value out of range (run by ModelConfig, as TransformerConfig.check is)."""
        check_at_least_one(self, "model.rnn.", ("embedding_size", "hidden_size"))


FAMILIES = {"transformer": "transformer", "rnn-bahdanau": "rnn", "rnn-luong": "rnn"}  # model.type → section
SECTIONS = {"transformer": TransformerConfig, "rnn": RNNConfig}
FAMILY_NAMES = {"transformer": "a Transformer", "rnn": "an RNN"}


@dataclass(frozen=True)
class ModelConfig:
    """Architecture: the settings all model types share, and the section of the type's family
    (`transformer` or `rnn`; the other one is None)."""

    type: Literal["transformer", "rnn-bahdanau", "rnn-luong"] = "transformer"
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    tie_embeddings: bool = True
    transformer: TransformerConfig | None = None  # defaults when model.type is transformer
    rnn: RNNConfig | None = None  # defaults when model.type is rnn-bahdanau or rnn-luong

    def __post_init__(self) -> None:
        check_at_least_one(self, "model.", ("encoder_layers", "decoder_layers"))
        check_dropout(self, "model.", ("dropout",))
        family, (other,) = self.family, SECTIONS.keys() - {self.family}
        if getattr(self, other) is not None:
            raise ConfigError(
                f"{_first_setting(getattr(self, other), f'model.{other}')} is {FAMILY_NAMES[other]} setting "
                f"but model.type is {self.type}; remove it (--set model.{other}= drops the section) or "
                f"change model.type"
            )
        if getattr(self, family) is None:  # frozen: set the default section the way __init__ would
            object.__setattr__(self, family, SECTIONS[family]())
        getattr(self, family).check()

    @property
    def family(self) -> str:
        """The section of this model type: 'transformer' or 'rnn'."""
        return FAMILIES[self.type]

    @property
    def position_limit(self) -> int | None:
        """The most positions a sequence may take (bos/eos included); None for the RNNs: they have none."""
        return None if self.transformer is None else self.transformer.max_positions


def _first_setting(section: object, prefix: str) -> str:
    """The dotted name of the first field of `section` that differs from its default; else `prefix`."""
    changed = [f.name for f in dataclasses.fields(section) if getattr(section, f.name) != f.default]
    return f"{prefix}.{changed[0]}" if changed else prefix


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
        multiple, limit = self.train.pad_to_multiple, self.model.position_limit
        longest = -(-(self.data.max_len + 1) // multiple) * multiple  # a sentence + bos/eos, padded
        if limit is not None and limit < longest:
            raise ConfigError(
                f"model.transformer.max_positions={limit} is too small for data.max_len={self.data.max_len}: "
                f"training needs {longest} positions; raise it or lower data.max_len"
            )


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
            f"lower the sizes in model.{cfg.model.family}, the layers or tokenizer.vocab_size"
        )


def with_absolute_paths(cfg: Config) -> Config:
    """`cfg` with its data and TensorBoard paths made absolute (relative ones are taken from the working
    directory), so that a run directory works from anywhere."""

    def absolute(path: str | None) -> str | None:
        return None if path is None else os.path.abspath(os.path.expanduser(path))

    data = {name: absolute(getattr(cfg.data, name)) for name in ("dir", "train", "valid", "test")}
    return replace(cfg, data=data, train={"tensorboard_dir": absolute(cfg.train.tensorboard_dir)})


def section_class(hint: Any) -> Any:
    """The dataclass that a field's type hint names (`X` or `X | None`), or None for a plain value."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        named = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        hint = named[0] if len(named) == 1 else None
    return hint if is_dataclass(hint) else None


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
