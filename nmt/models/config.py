"""The model section of a config: the settings every model type shares, and the section of the type's family
(`TransformerConfig` for nmt/models/transformer.py, `RNNConfig` for nmt/models/rnn.py). Defined beside the
models, as nanoGPT keeps `GPTConfig` beside `GPT`, and importing nothing of them: the config reader needs no
torch, and the models import their settings from here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from nmt.errors import ConfigError
from nmt.limits import MAX_SIZE, check_at_least_one, check_dropout, check_range


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

    def attention_name(self, layer: int, head: int | Literal["mean", "all"] = "mean") -> str:
        """How figures name the encoder-decoder attention they draw: the mechanism and, for the Transformer,
        the decoder layer and head (from 0; 'mean': the mean of the heads, 'all': a grid of them), e.g.
        'Bahdanau attention (additive)', 'Luong attention (general score)', 'Transformer, decoder layer 2
        (last), mean of 4 heads'."""
        match self.type:
            case "rnn-bahdanau":
                return "Bahdanau attention (additive)"
            case "rnn-luong":
                return f"Luong attention ({self.rnn.luong_score} score)"
        heads = self.transformer.heads
        which = {"mean": f"mean of {heads} heads", "all": f"{heads} heads"}.get(str(head), f"head {head}")
        last = " (last)" if layer == self.decoder_layers - 1 else ""
        return f"Transformer, decoder layer {layer}{last}, {which}"

    @property
    def position_limit(self) -> int | None:
        """The most positions a sequence may take (bos/eos included); None for the RNNs: they have none."""
        return None if self.transformer is None else self.transformer.max_positions


def _first_setting(section: object, prefix: str) -> str:
    """The dotted name of the first field of `section` that differs from its default; else `prefix`."""
    changed = [f.name for f in dataclasses.fields(section) if getattr(section, f.name) != f.default]
    return f"{prefix}.{changed[0]}" if changed else prefix
