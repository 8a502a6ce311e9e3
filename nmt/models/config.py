"""The model section of a config: the settings every model type shares, and the section of the type's family
(`TransformerConfig` for nmt/models/transformer.py, `RNNConfig` for nmt/models/rnn.py). Defined beside the
models, as nanoGPT keeps `GPTConfig` beside `GPT`, and importing nothing of them: the config reader needs no
torch, and the models import their settings from here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from nmt.errors import ConfigError
from nmt.limits import MAX_SIZE, check_settings, setting

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


@dataclass(frozen=True)
class TransformerConfig:
    """The Transformer's settings (`model.transformer`)."""

    d_model: int = setting(512, "width of the embeddings and of every layer (a multiple of heads)", low=1)
    heads: int = setting(8, "attention heads per layer; each attends in d_model / heads dimensions", low=1)
    ff_dim: int = setting(2048, "inner width of each layer's feed-forward network", low=1)
    attention_dropout: float = setting(0.0, "dropout on the attention weights", low=0, high=1, high_open=True)
    norm: Literal["pre", "post"] = setting(
        "pre", "layer norm before each sublayer (pre: stabler) or after it (post: the original paper's)"
    )
    max_positions: int = setting(
        1024,
        "longest sequence (subwords + bos/eos) the position table holds; at least data.max_len + 1, "
        "rounded up to train.pad_to_multiple",
        low=1,
        high=MAX_SIZE,
    )
    activation: Literal["relu", "gelu", "swish"] = setting(
        "relu",
        "the feed-forward networks' activation: relu, gelu (the exact, erf one) or swish (x·sigmoid(x))",
    )
    scale_embeddings: bool = setting(True, "multiply the embeddings by sqrt(d_model) before adding positions")
    output_bias: bool = setting(False, "a learned bias on the vocabulary logits (Marian's final logits bias)")
    decoder_start: Literal["bos", "pad"] = setting(
        "bos",
        "what the decoder reads first: bos, or pad's embedding (Marian's models, whose vocabularies have no "
        "bos: their imported runs)",
    )
    residual_free_layer: int | None = setting(
        None,
        "the encoder layer (from 0) whose self-attention has no residual connection (Liu et al. 2021, for "
        "zero-shot translation); none by default; runs with one cannot be exported",
    )

    def check(self) -> None:
        """Raise ConfigError for a value out of range (run by ModelConfig for the section of its type, so that
        a section of the other type is reported as such first)."""
        check_settings(self, "model.transformer.")
        if self.d_model % self.heads:
            raise ConfigError(
                f"model.transformer.d_model={self.d_model} must be divisible by "
                f"model.transformer.heads={self.heads}"
            )


@dataclass(frozen=True)
class RNNConfig:
    """The settings of the RNN models (`model.rnn`); the Luong ones do not apply to rnn-bahdanau."""

    cell: Literal["gru", "lstm"] = setting("gru", "the recurrent cell")
    embedding_size: int = setting(512, "width of the word embeddings", low=1)
    hidden_size: int = setting(512, "width of the recurrent state (per direction in the encoder)", low=1)
    bridge: Literal["learned", "zero", "last"] = setting(
        "learned",
        "the decoder's first state: learned from the encoder's final states, zeros, or those "
        "states layer by layer (last: needs decoder_layers ≤ encoder_layers)",
    )
    luong_score: Literal["dot", "general", "concat"] = setting(
        "general",
        "Luong only: how a decoder state h scores a source state s (dot: hᵀs, general: hᵀWs, "
        "concat: vᵀtanh(W₁h + W₂s))",
    )
    input_feeding: bool = setting(
        True, "Luong only: feed the previous attentional state into the next decoder step"
    )
    scale_scores: bool = setting(False, "Luong only: divide dot/general scores by sqrt(d)")

    def check(self) -> None:
        """Raise ConfigError for a value out of range (run by ModelConfig, as TransformerConfig.check is)."""
        check_settings(self, "model.rnn.")


FAMILIES = {"transformer": "transformer", "rnn-bahdanau": "rnn", "rnn-luong": "rnn"}  # model.type → section
SECTIONS = {"transformer": TransformerConfig, "rnn": RNNConfig}
FAMILY_NAMES = {"transformer": "a Transformer", "rnn": "an RNN"}


@dataclass(frozen=True)
class ModelConfig:
    """Architecture: the settings all model types share, and the section of the type's family
    (`transformer` or `rnn`; the other family's section stays empty)."""

    type: Literal["transformer", "rnn-bahdanau", "rnn-luong"] = setting(
        "transformer", "the architecture: a Transformer, or an RNN with Bahdanau's or Luong's attention"
    )
    encoder_layers: int = setting(3, "layers of the encoder", low=1)
    decoder_layers: int = setting(3, "layers of the decoder", low=1)
    dropout: float = setting(
        0.1, "dropout probability on embeddings and between layers", low=0, high=1, high_open=True
    )
    tie_embeddings: bool = setting(
        True, "share the target embedding with the output projection (and the source one when joint)"
    )
    share_embeddings: bool | None = setting(
        None,
        "one matrix for the source and target embeddings (a joint vocabulary); default: as tie_embeddings",
    )
    transformer: TransformerConfig | None = setting(None, "the Transformer's section (defaults when absent)")
    rnn: RNNConfig | None = setting(None, "the RNNs' section (defaults when absent)")

    def __post_init__(self) -> None:
        check_settings(self, "model.")
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
        layer = None if self.transformer is None else self.transformer.residual_free_layer
        if layer is not None and not 0 <= layer < self.encoder_layers:
            raise ConfigError(
                f"model.transformer.residual_free_layer={layer} is no encoder layer: the encoder has "
                f"model.encoder_layers={self.encoder_layers}, numbered from 0"
            )

    def shares_embeddings(self, joint_vocab: bool) -> bool:
        """Whether the source and target embeddings are one matrix, for a joint vocabulary or not (the config
        refuses share_embeddings without one)."""
        shared = self.tie_embeddings if self.share_embeddings is None else self.share_embeddings
        return shared and joint_vocab

    @property
    def transformer_settings(self) -> TransformerConfig:
        """The `transformer` section, which `__post_init__` sets for a Transformer; an error for an RNN."""
        if self.transformer is None:
            raise ValueError(f"model.type={self.type} has no model.transformer section")
        return self.transformer

    @property
    def rnn_settings(self) -> RNNConfig:
        """The `rnn` section, which `__post_init__` sets for an RNN; an error for a Transformer."""
        if self.rnn is None:
            raise ValueError(f"model.type={self.type} has no model.rnn section")
        return self.rnn

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
                return f"Luong attention ({self.rnn_settings.luong_score} score)"
        heads = self.transformer_settings.heads
        which = {"mean": f"mean of {heads} heads", "all": f"{heads} heads"}.get(str(head), f"head {head}")
        last = " (last)" if layer == self.decoder_layers - 1 else ""
        return f"Transformer, decoder layer {layer}{last}, {which}"

    @property
    def position_limit(self) -> int | None:
        """The most positions a sequence may take (bos/eos included); None for the RNNs: they have none."""
        return None if self.transformer is None else self.transformer.max_positions


def _first_setting(section: DataclassInstance, prefix: str) -> str:
    """The dotted name of the first field of `section` that differs from its default; else `prefix`."""
    changed = [f.name for f in dataclasses.fields(section) if getattr(section, f.name) != f.default]
    return f"{prefix}.{changed[0]}" if changed else prefix
