"""The attention a training pass returns for guided alignment: one layer's, the same weights a full pass
collects, and with full target context a second pass that sees the whole target but never its padding."""

from __future__ import annotations

import pytest
import torch

from nmt.models.base import Wanted
from nmt.models.build import build_model
from nmt.models.config import ModelConfig, RNNConfig, TransformerConfig

TRANSFORMER = ModelConfig(
    encoder_layers=2,
    decoder_layers=3,
    dropout=0.0,
    transformer=TransformerConfig(d_model=16, heads=4, ff_dim=32),
)


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    src = torch.randint(4, 30, (3, 6))
    src[1, 4:] = 0
    tgt_in = torch.randint(4, 30, (3, 5))
    tgt_in[:, 0], tgt_in[2, 3:] = 2, 0  # bos; the last sentence is shorter
    return src, (src != 0).unsqueeze(1), tgt_in


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_one_layers_weights_as_the_full_pass_collects_them(layer: int) -> None:
    model = build_model(TRANSFORMER, 30, 30, True, 0).eval()
    src, mask, tgt_in = batch()
    everything = model(src, mask, tgt_in, Wanted(attention=True))
    one = model(src, mask, tgt_in, Wanted(align_layer=layer))
    assert one.attention is None and one.alignment is not None and one.alignment.shape == (3, 4, 5, 6)
    torch.testing.assert_close(one.alignment, everything.attention[:, layer])
    torch.testing.assert_close(one.logits, everything.logits)


def test_full_context_sees_the_whole_target_but_not_its_padding() -> None:
    model = build_model(TRANSFORMER, 30, 30, True, 0).eval()
    src, mask, tgt_in = batch()
    causal = model(src, mask, tgt_in, Wanted(align_layer=0)).alignment
    full = model(src, mask, tgt_in, Wanted(align_layer=0, full_context=True)).alignment
    assert causal is not None and full is not None
    torch.testing.assert_close(full[:2, :, -1], causal[:2, :, -1])  # the last position saw everything anyway
    assert not torch.allclose(full[:, :, 0], causal[:, :, 0])  # the first one now sees the rest
    full = model(src, mask, tgt_in, Wanted(align_layer=1, full_context=True)).alignment
    assert full is not None
    alone = model(src[2:], mask[2:], tgt_in[2:, :3], Wanted(align_layer=1, full_context=True)).alignment
    torch.testing.assert_close(full[2:, :, :3], alone)  # padding of the short target changes nothing


@pytest.mark.parametrize("kind", ["rnn-bahdanau", "rnn-luong"])
def test_the_rnns_give_their_one_attention(kind: str) -> None:
    cfg = ModelConfig(
        type=kind,
        encoder_layers=1,
        decoder_layers=2,
        dropout=0.0,
        rnn=RNNConfig(embedding_size=8, hidden_size=8),
    )
    model = build_model(cfg, 30, 30, True, 0).eval()
    src, mask, tgt_in = batch()
    output = model(src, mask, tgt_in, Wanted(attention=True, align_layer=0))
    assert output.alignment is not None and output.alignment.shape == (3, 1, 5, 6)
    torch.testing.assert_close(output.alignment, output.attention[:, 0])
    with pytest.raises(ValueError, match="full context"):
        model(src, mask, tgt_in, Wanted(align_layer=0, full_context=True))


@pytest.mark.parametrize("kind", ["transformer", "rnn-bahdanau", "rnn-luong"])
def test_attention_alone_skips_the_logits_and_changes_no_weight(kind: str) -> None:
    """What alignment asks for (`Wanted(logits=False)`): the same attention, no vocabulary projection."""
    if kind == "transformer":
        cfg = TRANSFORMER
    else:
        cfg = ModelConfig(type=kind, dropout=0.0, rnn=RNNConfig(embedding_size=8, hidden_size=8))
    model = build_model(cfg, 30, 30, True, 0).eval()
    src, mask, tgt_in = batch()
    full = model(src, mask, tgt_in, Wanted(attention=True, align_layer=0))
    alone = model(src, mask, tgt_in, Wanted(logits=False, attention=True, align_layer=0))
    assert full.logits is not None and alone.logits is None
    torch.testing.assert_close(alone.attention, full.attention)
    torch.testing.assert_close(alone.alignment, full.alignment)
