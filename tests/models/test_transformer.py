"""Transformer shapes, masks and incremental decoding."""

import pytest
import torch
from torch import nn

from nmt.data.special_tokens import PAD
from nmt.errors import ConfigError
from nmt.models.attention import SelfAttention
from nmt.models.base import Wanted
from nmt.models.build import build_model, shapes_only
from nmt.models.config import ModelConfig, TransformerConfig
from nmt.models.transformer import TransformerSeq2Seq, sinusoidal_positions


def tiny(norm: str = "pre", tie: bool = True) -> TransformerSeq2Seq:
    torch.manual_seed(0)
    arch = TransformerConfig(d_model=16, heads=4, ff_dim=32, norm=norm)
    cfg = ModelConfig(encoder_layers=2, decoder_layers=2, dropout=0.0, tie_embeddings=tie, transformer=arch)
    return TransformerSeq2Seq(cfg, 30, 30, joint_vocab=True, pad=PAD).eval()


def source() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])
    return src, (src != 0).unsqueeze(1)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_shapes_and_cross_attention_ignores_padding(norm: str) -> None:
    model = tiny(norm)
    src, mask = source()
    tgt_in = torch.tensor([[2, 11, 12], [2, 13, 0]])
    output = model(src, mask, tgt_in, Wanted(attention=True))
    assert output.logits.shape == (2, 3, 30)
    assert output.attention.shape == (2, 2, 4, 3, 5)  # (batch, layers, heads, tgt_len, src_len)
    assert output.attention[1, ..., 3:].eq(0).all()
    torch.testing.assert_close(output.attention.sum(-1), torch.ones(2, 2, 4, 3))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_cached_incremental_decoding_equals_full_recomputation(norm: str) -> None:
    model = tiny(norm)
    src, mask = source()
    tgt_in = torch.tensor([[2, 11, 12, 13], [2, 14, 15, 16]])
    memory = model.encode(src, mask)
    full = model.decode(tgt_in, memory).logits.log_softmax(-1)
    state = model.init_state(memory, tgt_in.size(1))
    for t in range(tgt_in.size(1)):
        step = model.decode_step(tgt_in[:, t], memory, state)
        state = step.state
        torch.testing.assert_close(step.log_probs, full[:, t], atol=1e-5, rtol=1e-5)
    assert state["self_k0"].shape == (2, 4, 8, 4)  # (sentences, heads, slots: 4 rounded up to 8, d_head)


def test_decoder_has_no_look_ahead() -> None:
    model = tiny()
    src, mask = source()
    a = model(src, mask, torch.tensor([[2, 11, 12, 13]] * 2)).logits
    b = model(src, mask, torch.tensor([[2, 11, 20, 21]] * 2)).logits
    torch.testing.assert_close(a[:, :2], b[:, :2])
    assert not torch.allclose(a[:, 2:], b[:, 2:])


def test_tied_embeddings_share_one_matrix() -> None:
    tied, untied = tiny(tie=True), tiny(tie=False)
    assert tied.src_embed.embedding is tied.tgt_embed.embedding and tied.output is None
    assert untied.output is not None
    assert sum(p.numel() for p in untied.parameters()) > sum(p.numel() for p in tied.parameters())


def test_sinusoidal_positions() -> None:
    table = sinusoidal_positions(4, 6)
    assert table[0, 0::2].eq(0).all() and table[0, 1::2].eq(1).all()
    torch.testing.assert_close(table[3, 0], torch.sin(torch.tensor(3.0)))


def test_build_model_picks_the_type() -> None:
    arch = TransformerConfig(d_model=16, heads=2, ff_dim=16)
    model = build_model(ModelConfig(type="transformer", transformer=arch), 20, 20, True, PAD)
    assert isinstance(model, TransformerSeq2Seq)


def old_layout(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A state dict as written before self-attention fused its projections: `query_proj` and
    `key_value_proj` instead of `qkv_proj`."""
    old = {}
    for name, tensor in state.items():
        if ".qkv_proj." in name:
            query, key_value = tensor.split([tensor.size(0) // 3, 2 * tensor.size(0) // 3])
            old[name.replace("qkv_proj", "query_proj")] = query
            old[name.replace("qkv_proj", "key_value_proj")] = key_value
        else:
            old[name] = tensor
    return old


def test_checkpoints_with_separate_projections_still_load() -> None:
    model, fresh = tiny(), tiny()
    with torch.no_grad():
        for param in fresh.parameters():
            param.normal_()
    old = old_layout(model.state_dict())
    assert any(".query_proj." in n for n in old) and not any(".qkv_proj." in n for n in old)
    fresh.load_state_dict(old)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, fresh.state_dict()[name]), name
    src, mask = source()
    tgt_in = torch.tensor([[2, 11, 12], [2, 13, 0]])
    torch.testing.assert_close(fresh.eval()(src, mask, tgt_in).logits, model(src, mask, tgt_in).logits)


def test_fused_self_attention_keeps_the_attention_interface() -> None:
    """`project` (one matmul) gives what `project_query` and `prepare` give separately."""
    torch.manual_seed(0)
    attention, x = SelfAttention(16, 4).eval(), torch.randn(2, 5, 16)
    q, k, v = attention.project(x)
    keys, values = attention.prepare(x)
    torch.testing.assert_close(q, attention.project_query(x))
    torch.testing.assert_close(k, keys)
    torch.testing.assert_close(v, values)
    torch.testing.assert_close(attention.attend(q, k, v, None)[0], attention(x, keys, values, None)[0])


@pytest.mark.parametrize("pre_norm", [True, False])
def test_a_sublayer_without_residual_keeps_only_what_its_function_gives(pre_norm: bool) -> None:
    from nmt.models.transformer import Sublayer

    x = torch.randn(2, 3, 8)
    zero = lambda h: torch.zeros_like(h)  # noqa: E731
    with_residual, without = Sublayer(8, 0.0, pre_norm), Sublayer(8, 0.0, pre_norm, residual=False)
    expected = x if pre_norm else with_residual.norm(x)
    torch.testing.assert_close(with_residual(x, zero), expected)
    assert without(x, zero).abs().max() == 0  # nothing of x passes around the function


def test_the_residual_free_layer_is_the_one_named_and_must_exist() -> None:
    arch = TransformerConfig(d_model=16, heads=4, ff_dim=32, residual_free_layer=1)
    cfg = ModelConfig(encoder_layers=3, decoder_layers=1, transformer=arch)
    model = TransformerSeq2Seq(cfg, 30, 30, joint_vocab=True, pad=PAD)
    assert [layer.attn_block.residual for layer in model.encoder_layers] == [True, False, True]
    assert all(layer.ff_block.residual for layer in model.encoder_layers)
    with pytest.raises(ConfigError, match=r"residual_free_layer=3 is no encoder layer"):
        ModelConfig(encoder_layers=3, transformer=TransformerConfig(residual_free_layer=3))


def test_the_same_seed_draws_the_same_initial_weights_as_nn_modules_do() -> None:
    """A model built for training draws its weights as nn's modules draw them, in the order it builds them:
    the embedding (nn.Embedding's own draw, then Normal(0, d^-1/2) with a zero pad row), then the first
    encoder layer's fused q/k/v projection (nn.Linear's); a build with `shapes_only` before it (an import's,
    a size check's) draws nothing, so the seed gives the same weights after it."""
    arch = TransformerConfig(d_model=16, heads=4, ff_dim=32)
    cfg = ModelConfig(encoder_layers=2, decoder_layers=2, transformer=arch)
    torch.manual_seed(7)
    with shapes_only():
        shapes = TransformerSeq2Seq(cfg, 30, 30, joint_vocab=True, pad=PAD)
    model = TransformerSeq2Seq(cfg, 30, 30, joint_vocab=True, pad=PAD)
    torch.manual_seed(7)
    embedding = nn.Embedding(30, 16, padding_idx=PAD)
    nn.init.normal_(embedding.weight, std=16**-0.5)
    with torch.no_grad():
        embedding.weight[PAD].zero_()
    qkv = nn.Linear(16, 48)
    assert torch.equal(model.src_embed.embedding.weight, embedding.weight)
    assert torch.equal(model.encoder_layers[0].self_attn.qkv_proj.weight, qkv.weight)
    assert torch.equal(model.encoder_layers[0].self_attn.qkv_proj.bias, qkv.bias)
    assert all(tensor.is_meta for tensor in shapes.state_dict().values())
    assert shapes.state_dict().keys() == model.state_dict().keys()
