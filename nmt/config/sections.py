"""The sections of a config that the data, training and search read: one frozen dataclass per YAML section,
each checking its own values. (The model's section is nmt/models/config.py; the whole config
nmt/config/schema.py.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nmt.errors import ConfigError
from nmt.limits import MAX_BEAM, MAX_SIZE, check_at_least_one, check_range


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
        check_at_least_one(self, "data.", ("max_len",))


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
        check_at_least_one(self, "train.", at_least_one)
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
        check_at_least_one(self, "search.", ("beam_size", "batch_size", "nbest"))
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
