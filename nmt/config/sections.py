"""The sections of a config that the data, training and search read: one frozen dataclass per YAML section,
each checking its own values. (The model's section is nmt/models/config.py; the whole config
nmt/config/schema.py.) Each field declares its default, meaning and range once, with `setting`
(nmt/limits.py): the checks and the configuration reference (docs/reference/config.md) read them."""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from nmt.config.multilingual import (
    BILINGUAL_PAIR,
    Direction,
    MultilingualConfig,
    RunDirections,
    pair_beside_multilingual,
)
from nmt.config.terminology import TerminologyConfig
from nmt.errors import ConfigError
from nmt.limits import MAX_BEAM, MAX_SIZE, check_settings, setting
from nmt.rules.registry import active, chosen_rule, overridden, owners, rule_of, settings_fields

DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]{1,3})?")  # what nmt/device/choice.py resolve_device takes


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text lives and how it is cleaned.

    `dir` holds `train.L`, `valid.L` (or `val.L`/`dev.L`) and `test.L` (or `test2016.L`). Explicit
    `train`/`valid`/`test` entries override it: a path prefix (`corpus/train` → `corpus/train.de`) or a
    `.tsv` file with the source in the first column and the target in the second.
    """

    src_lang: str = setting("de", "source language: the suffix of the source files (`train.de`)")
    tgt_lang: str = setting("en", "target language: the suffix of the target files (`train.en`)")
    dir: str | None = setting(None, "directory holding the splits (what `--data` sets)")
    train: str | None = setting(None, "training split: a path prefix (`corpus/train`) or a `.tsv` file")
    valid: str | None = setting(None, "validation split: a path prefix or a `.tsv` file")
    test: str | None = setting(None, "test split: a path prefix or a `.tsv` file")
    max_len: int = setting(
        128, "training pairs longer than this many subwords (either side) are dropped", low=1
    )
    skip_bad_lines: bool = setting(
        False, "drop lines that are not valid UTF-8 (with their partner, counted) instead of failing"
    )
    unescape_entities: bool = setting(
        True,
        "read HTML entities of every split (`&amp;`, `&#39;`, `&quot;`) as the characters they stand for, "
        "so that a model never learns to write them; false keeps the text as written",
    )
    domain: str | None = setting(
        None,
        "what the training text is and so what the model handles (e.g. `short sentence-case image "
        "captions`): the model card, exports and the server's /v1/models state it",
    )
    multilingual: MultilingualConfig | None = setting(
        None, "many directions in one model, instead of src_lang → tgt_lang (absent: one pair)"
    )
    terminology: TerminologyConfig | None = setting(
        None, "train the model to follow terms given inline in its source (absent: no annotation)"
    )

    def __post_init__(self) -> None:
        check_settings(self, "data.")
        defaults = {field.name: field.default for field in dataclasses.fields(self)}
        pair = [name for name in BILINGUAL_PAIR if getattr(self, name) != defaults[name]]
        if self.multilingual is not None and pair:
            raise pair_beside_multilingual(pair)

    @property
    def unused(self) -> tuple[str, ...]:
        """The settings that mean nothing here (a multilingual run's one pair): refused where a config names
        them, whatever their value, and left out of the config a run writes."""
        return BILINGUAL_PAIR if self.multilingual is not None else ()

    @property
    def directions(self) -> RunDirections:
        """The directions the run translates: data.multilingual's, tagged, or the one pair src_lang →
        tgt_lang without tags. The one place that tells a bilingual run's spelling from a multilingual one's:
        everything after reads these."""
        if self.multilingual is None:
            return RunDirections((Direction(self.src_lang, self.tgt_lang),))
        return self.multilingual.run_directions()


@dataclass(frozen=True)
class TokenizerConfig:
    """sentencepiece settings; the model is trained on the training split."""

    vocab_size: int = setting(
        8000, "subword pieces in the vocabulary, 4 special tokens included", low=5, high=MAX_SIZE
    )
    model_type: Literal["bpe", "unigram", "char", "word"] = setting("bpe", "sentencepiece's segmentation")
    joint: bool = setting(True, "one vocabulary for both languages (needed to tie all embeddings)")
    character_coverage: float = setting(
        1.0,
        "share of the characters the vocabulary covers (rarer ones become unknown)",
        low=0.0,
        high=1.0,
        low_open=True,
    )
    max_sentences: int = setting(
        1_000_000,
        "sentences sampled to train the tokenizer, 0 or over 100 (0: all; over 1M slows sentencepiece down)",
        low=0,
        high=MAX_SIZE,
        zero="all",
    )
    auto_shrink: bool = setting(True, "lower vocab_size (with a warning) when the corpus is too small for it")
    vocabulary: Literal["sentencepiece", "marian"] = setting(
        "sentencepiece",
        "where ids come from: the sentencepiece model's own (trained by nmt), or an imported Marian model's "
        "vocab.json over its source.spm and target.spm (written by `nmt import`, never trained)",
    )

    def __post_init__(self) -> None:
        if self.vocab_size <= 4:
            raise ConfigError(f"tokenizer.vocab_size={self.vocab_size} must exceed the 4 special tokens")
        if 0 < self.max_sentences <= 100:  # sentencepiece rejects 1..100 with an internal error
            raise ConfigError(f"tokenizer.max_sentences={self.max_sentences} must be 0 (all) or over 100")
        check_settings(self, "tokenizer.")


# The attention row that aligns each target subword: its own step's (argmax) or the next step's (shift,
# Shift-Att). Declared here, where `train.alignment` chooses one; nmt/align/attention.py reads by it.
LinkRule = Literal["argmax", "shift"]
LINK_RULES: tuple[LinkRule, ...] = typing.get_args(LinkRule)


@dataclass(frozen=True)
class AlignmentConfig:
    """Guided alignment (Garg et al. 2019, "Jointly Learning to Align and Translate with Transformer Models"):
    a cross-entropy loss pulls one decoder layer's attention towards given word links, each target subword's
    links a distribution over the source subwords; and AER on a gold set at every validation.

    Word links become subword links (every subword of a linked word pair); target subwords without a link add
    no loss, or with `null_slot` are pulled to the source's `</s>`. The supervised attention is the mean of
    the layer's first `heads` heads (the RNNs: their one attention), and validation scores the same heads."""

    links: str | None = setting(
        None,
        "word links of the training split, one Pharaoh line per line of it (source-target, from 0, as "
        "eflomal and `nmt symmetrize` write them): set, they supervise the attention",
    )
    weight: float = setting(
        0.05, "weight of the alignment loss beside the translation loss (Garg et al.'s lambda)", low=0.0
    )
    layer: int | None = setting(
        None,
        "the decoder layer supervised and scored, from 0, negative from the last; default: the penultimate "
        "(the only one of a one-layer decoder); Transformer only",
    )
    heads: int = setting(1, "supervise the mean of the layer's first N heads; Transformer only", low=1)
    full_context: bool = setting(
        False,
        "compute the supervised layer's attention in a second pass without the future mask, each target "
        "position seeing the whole target (Garg et al.); Transformer only",
    )
    shift: bool = setting(
        False,
        "supervise, for each target subword, the attention of the step that reads it (the next row: "
        "Shift-Att's, Chen et al. 2020) rather than of the step that predicts it; `nmt align` and validation "
        "read that row",
    )
    null_slot: bool = setting(
        False,
        "the source's </s> is a null slot: target subwords without a link are pulled to it (Mask-Align's "
        "leaky attention, without a new parameter), and a subword that attends it most is read as unlinked "
        "(`nmt align`, validation)",
    )
    gold_src: str | None = setting(None, "a gold set's source sentences, whitespace-tokenized, one a line")
    gold_tgt: str | None = setting(None, "its target sentences, line by line with gold_src")
    gold_links: str | None = setting(
        None, "its gold links (Pharaoh: i-j sure, ipj or i?j possible); with them validation reports AER"
    )
    gold_one_based: bool = setting(False, "gold_links count words from 1")
    gold_reverse: bool = setting(False, "gold_links name the target word first")

    def __post_init__(self) -> None:
        check_settings(self, "train.alignment.")
        gold = (self.gold_src, self.gold_tgt, self.gold_links)
        if any(gold) and not all(gold):
            raise ConfigError(
                "train.alignment.gold_src, gold_tgt and gold_links go together: set all three or none"
            )
        if self.shift and self.full_context:
            raise ConfigError(
                "train.alignment.shift and full_context both let the supervised attention see the word it "
                "aligns: set one of them"
            )
        if self.links is None and self.gold_links is None:
            raise ConfigError(
                "train.alignment needs links (to train the attention to them) or a gold set (gold_src, "
                "gold_tgt, gold_links: to score it)"
            )

    def check_model(self, decoder_layers: int, heads: int | None) -> None:
        """Refuse a layer or head the model lacks; `heads` None for an RNN, whose one attention is the one
        supervised (the Transformer-only settings must keep their defaults)."""
        if heads is None:
            for name, default in (("layer", None), ("heads", 1), ("full_context", False)):
                if getattr(self, name) != default:
                    raise ConfigError(
                        f"train.alignment.{name} applies to the Transformer; an RNN's one attention is the "
                        f"one supervised: remove it"
                    )
            return
        if self.layer is not None and not -decoder_layers <= self.layer < decoder_layers:
            raise ConfigError(
                f"train.alignment.layer={self.layer} is not a layer of the {decoder_layers}-layer decoder; "
                f"use 0 to {decoder_layers - 1}, or -1 to {-decoder_layers} counted from the last"
            )
        if self.heads > heads:
            raise ConfigError(f"train.alignment.heads={self.heads} exceeds model.transformer.heads={heads}")

    @property
    def rule(self) -> LinkRule:
        """The row that aligns each target subword (`LinkRule`)."""
        return "shift" if self.shift else "argmax"

    def decoder_layer(self, decoder_layers: int) -> int:
        """The supervised layer from 0 (RNNs: 0, their one attention)."""
        if self.layer is None:
            return penultimate_layer(decoder_layers)
        return self.layer % decoder_layers


def penultimate_layer(decoder_layers: int) -> int:
    """The decoder layer, from 0, that aligns best where nothing else is known: the penultimate (Garg et al.
    2019; the only one of a one-layer decoder). Guided alignment supervises it by default, and a run trained
    without it aligns with it (nmt/align/reading.py)."""
    return max(decoder_layers - 2, 0)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, schedule, stopping and checkpointing."""

    seed: int = setting(
        1234, "seed of every random generator (what numpy and CUDA accept)", low=0, high=2**32 - 1
    )
    device: str = setting(
        "auto", "where to train: auto (a GPU when there is one), cpu, cuda or cuda:N (the GPU numbered N)"
    )
    batch_tokens: int | Literal["auto"] = setting(
        8192,
        "source + target tokens (with padding) per batch, before accumulation; auto: fit it to GPU memory",
        low=1,
        high=MAX_SIZE,
    )
    accumulate: int = setting(1, "batches whose gradients add up to one update", low=1, high=MAX_SIZE)
    distributed_batch: Literal["split", "scale"] = setting(
        "split", "under torchrun: split each update among the processes, or scale it (each adds its own)"
    )
    pad_to_multiple: int = setting(
        8,
        "pad batch lengths to a multiple of this (tensor cores, fewer compiled shapes)",
        low=1,
        high=MAX_SIZE,
    )
    lr: float = setting(7.0e-4, "peak learning rate of AdamW", low=0.0, low_open=True)
    warmup_steps: int = setting(
        4000, "updates of linear warm-up to the peak learning rate", low=0, high=MAX_SIZE
    )
    schedule: Literal["inverse_sqrt", "constant"] = setting(
        "inverse_sqrt", "learning rate after warm-up: decays as 1/sqrt(step), or stays at lr"
    )
    betas: tuple[float, float] = setting(
        (0.9, 0.98), "AdamW's beta1 and beta2", low=0.0, high=1.0, high_open=True
    )
    weight_decay: float = setting(0.0, "AdamW's decoupled weight decay", low=0.0)
    label_smoothing: float = setting(
        0.1, "probability mass spread over the vocabulary in the loss", low=0.0, high=1.0, high_open=True
    )
    clip_norm: float = setting(
        1.0, "clip the gradients' global norm to this before each update", low=0.0, zero="no clipping"
    )
    max_steps: int = setting(0, "stop after this many updates", low=0, high=MAX_SIZE, zero="no limit")
    max_epochs: int = setting(0, "stop after this many epochs", low=0, high=MAX_SIZE, zero="no limit")
    max_time: float = setting(
        0.0,
        "stop after this many seconds of training and validation (the final report follows)",
        low=0.0,
        zero="no limit",
    )
    eval_every: int = setting(1000, "updates between validations", low=1, high=MAX_SIZE)
    eval_max_sentences: int = setting(
        0,
        "validate BLEU (greedy) on at most this many sentences, the loss on all (0: all)",
        low=0,
        high=MAX_SIZE,
    )
    patience: int = setting(
        0, "stop after this many validations without a better BLEU (0: never)", low=0, high=MAX_SIZE
    )
    target_bleu: float = setting(
        0.0, "stop once validation BLEU reaches this (0: never)", low=0.0, high=100.0
    )
    log_every: int = setting(
        50,
        "updates per training record (metrics.jsonl; a log line when not on a terminal)",
        low=1,
        high=MAX_SIZE,
    )
    tensorboard: bool = setting(False, "also write TensorBoard event files (needs the tensorboard extra)")
    tensorboard_dir: str | None = setting(None, "where they go; default RUN_DIR/tensorboard")
    keep_checkpoints: int = setting(
        0, "keep the weights of the last N validations as checkpoints/step<N>.pt", low=0, high=MAX_SIZE
    )
    average_checkpoints: int = setting(
        0,
        "after training, average the last N kept checkpoints into averaged.pt (N ≤ keep_checkpoints)",
        low=0,
        high=MAX_SIZE,
    )
    final_report: bool = setting(
        True, "after training: beam-search valid/test scores, curves, heatmaps, report.json"
    )
    amp: bool = setting(True, "bf16 autocast on CUDA")
    compile: bool = setting(False, "torch.compile the model on CUDA (an alternative to cuda_graphs)")
    compile_mode: Literal["default", "reduce-overhead", "max-autotune"] = setting(
        "default", "torch.compile's mode"
    )
    cuda_graphs: bool = setting(False, "replay the training step from CUDA graphs (CUDA, one process)")
    static_shapes: bool | Literal["auto"] = setting(
        "auto", "pad batches to a few planned shapes; auto: on with cuda_graphs or compile"
    )
    max_shapes: int = setting(
        32, "static batch shapes planned, and the most CUDA graphs captured for training", low=1, high=1024
    )
    max_bad_steps: int = setting(
        20,
        "abort after this many updates in a row skipped (non-finite loss, out of memory)",
        low=1,
        high=MAX_SIZE,
    )
    alignment: AlignmentConfig | None = setting(None, "guided alignment and validation AER (absent: neither)")

    def __post_init__(self) -> None:
        check_settings(self, "train.")
        if not DEVICE.fullmatch(self.device):
            raise ConfigError(f"train.device={self.device!r}; expected auto, cpu, cuda or cuda:N")
        if self.average_checkpoints > self.keep_checkpoints:
            raise ConfigError(
                f"train.average_checkpoints={self.average_checkpoints} needs train.keep_checkpoints >= it"
            )
        if self.compile and self.cuda_graphs:
            raise ConfigError("train.compile and train.cuda_graphs are alternatives; set one of them")


@dataclass(frozen=True)
class SearchLimits:
    """The settings of the search itself, whatever its rule; `SearchConfig` adds every rule's and
    processor's own (nmt/rules/registry.py)."""

    beam_size: int = setting(5, "hypotheses kept per sentence (1: greedy)", low=1, high=MAX_BEAM)
    length_penalty: float = setting(
        1.0,
        "alpha: finished hypotheses' summed log-probabilities are divided by a penalty of their length "
        "(tokens and eos), as length_normalization says",
        low=0.0,
        high=10.0,
    )
    length_normalization: Literal["gnmt", "power"] = setting(
        "gnmt",
        "the length penalty: gnmt, ((5 + length) / 6) ** alpha (Wu et al. 2016); power, length ** alpha (as "
        "transformers and CTranslate2 score beams: an imported model's)",
        flag=False,
    )
    max_len_a: float = setting(
        1.5, "output length limit: a × source length + b; this is a", low=0.0, high=1000.0
    )
    max_len_b: int = setting(10, "output length limit: a × source length + b; this is b", low=0, high=100_000)
    batch_tokens: int = setting(
        16384,
        "a decoding batch's budget: its sentences × (longest source in subwords + eos) × beam size (a "
        "sentence over it is searched alone; teacher forcing counts a pair's source and target, beam 1)",
        low=1,
        high=MAX_SIZE,
    )
    cuda_graphs: bool = setting(False, "replay each decoding step from a CUDA graph (CUDA only)", flag=False)
    nbest: int = setting(
        1,
        "hypotheses returned per sentence, best first (≤ beam_size; with sampling: the samples drawn)",
        low=1,
        high=MAX_BEAM,
    )

    def __post_init__(self) -> None:
        check_settings(self, "search.")
        check_search(self, config_name)


def config_name(setting: str, value: object) -> str:
    """A search setting as a config names it: `search.beam_size=5`."""
    return f"search.{setting}={value!r}"


def check_search(settings: SearchLimits, name: Callable[[str, object], str]) -> None:
    """Raise ConfigError where search settings do not go together (`name` words a setting as the user gave
    it): two rules asked for at once, n-best lists longer than the rule's hypotheses, and each part's own
    checks."""
    rule = chosen_rule(settings)
    for other in overridden(settings):
        assert other.switch is not None and rule.switch is not None  # a rule asked for overrides the other
        asked = name(other.switch, getattr(settings, other.switch))
        chosen = name(rule.switch, getattr(settings, rule.switch))
        raise ConfigError(
            f"{asked} asks for {other.title} and {chosen} for {rule.title}: a search follows one rule; "
            f"drop one of them"
        )
    for part in active(settings):
        part.check(settings, name)
    if settings.nbest > rule_of(settings).width:
        raise ConfigError(
            f"{name('nbest', settings.nbest)} exceeds {name('beam_size', settings.beam_size)}; beam search "
            f"finds at most beam_size hypotheses: raise the beam size or lower nbest"
        )


def _search_config() -> type[SearchLimits]:
    """`SearchLimits` with the settings every search rule and processor declares (nmt/rules/registry.py),
    as a frozen dataclass of its own: one section, whose keys are those of the YAML file, the command line's
    search flags and the server's request fields."""
    declared = [(f.name, typing.get_type_hints(owners(f.name)[0])[f.name], f) for f in settings_fields()]
    copies = [
        (name, hint, dataclasses.field(default=f.default, metadata=f.metadata)) for name, hint, f in declared
    ]
    doc = "Decoding for validation, `nmt translate` and `nmt evaluate`: the search and its rules' settings."
    return dataclasses.make_dataclass(
        "SearchConfig",
        copies,
        bases=(SearchLimits,),
        frozen=True,
        namespace={"__doc__": doc, "__module__": __name__},
    )


if TYPE_CHECKING:
    SearchConfig = SearchLimits  # a rule's own settings are read by name (nmt/rules/)
else:
    SearchConfig = _search_config()
