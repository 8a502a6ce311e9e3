"""Model construction: the one place that maps `model.type` to a class."""

from nmt.config import ModelConfig
from nmt.models.base import Seq2Seq
from nmt.models.rnn import RNNSeq2Seq
from nmt.models.transformer import TransformerSeq2Seq


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool) -> Seq2Seq:
    """A freshly initialised model of the configured type."""
    match cfg.type:
        case "transformer":
            return TransformerSeq2Seq(cfg, src_vocab, tgt_vocab, joint_vocab)
        case "rnn-bahdanau" | "rnn-luong":
            return RNNSeq2Seq(cfg, src_vocab, tgt_vocab, joint_vocab)
    raise ValueError(f"unknown model type {cfg.type!r}")
