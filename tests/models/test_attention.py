"""The shared attention interface: shapes, masks, and the SDPA path agreeing with explicit weights."""

from collections.abc import Callable

import pytest
import torch

from nmt.models.attention import (
    AdditiveAttention,
    Attention,
    MultiHeadAttention,
    causal_mask,
    luong_attention,
)


@pytest.mark.parametrize(
    "make",
    [
        lambda: AdditiveAttention(8, 8, 16),
        lambda: luong_attention("dot", 8, 8),
        lambda: luong_attention("general", 8, 8),
        lambda: luong_attention("concat", 8, 8),
        lambda: MultiHeadAttention(8, 2),
    ],
)
def test_attention_contract(make: Callable[[], Attention]) -> None:
    torch.manual_seed(0)
    attention, memory = make(), torch.randn(2, 5, 8)  # (batch, src_len, d)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2]).unsqueeze(1)  # (batch, 1, src_len)
    context, weights = attention(torch.randn(2, 4, 8), *attention.prepare(memory), mask, need_weights=True)
    heads = weights.size(1)
    assert context.shape == (2, 4, 8) and weights.shape == (2, heads, 4, 5)
    torch.testing.assert_close(weights.sum(dim=-1), torch.ones(2, heads, 4))
    assert weights[1, :, :, 3:].eq(0).all()  # padding gets no weight


def test_multihead_fast_path_equals_explicit_weights() -> None:
    torch.manual_seed(0)
    attention = MultiHeadAttention(16, 4).eval()
    memory, query = torch.randn(3, 7, 16), torch.randn(3, 5, 16)
    mask = torch.ones(3, 1, 7, dtype=torch.bool)
    mask[0, :, 4:] = False
    keys, values = attention.prepare(memory)
    fast, no_weights = attention(query, keys, values, mask)
    slow, weights = attention(query, keys, values, mask, need_weights=True)
    assert no_weights is None and weights is not None
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)


def test_padding_changes_nothing() -> None:
    """Values behind padded positions cannot leak into the context."""
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2).eval()
    memory = torch.randn(1, 6, 8)
    mask = torch.tensor([[[True, True, True, True, False, False]]])
    query = torch.randn(1, 3, 8)
    before, _ = attention(query, *attention.prepare(memory), mask)
    memory[:, 4:] = 100.0
    after, _ = attention(query, *attention.prepare(memory), mask)
    torch.testing.assert_close(before, after)


def test_causal_self_attention_has_no_look_ahead() -> None:
    torch.manual_seed(0)
    attention = MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 6, 8)
    q = attention.project_query(x)
    out, weights = attention.attend(q, *attention.prepare(x), None, need_weights=True, causal=True)
    assert weights[0].triu(diagonal=1).eq(0).all()
    changed = x.clone()
    changed[:, 4:] = torch.randn(1, 2, 8)
    q = attention.project_query(changed)
    fast, _ = attention.attend(q, *attention.prepare(changed), None, causal=True)
    torch.testing.assert_close(fast[:, :4], out[:, :4], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(fast[:, 4:], out[:, 4:])


def test_causal_mask_aligns_to_the_last_keys() -> None:
    assert causal_mask(2, 4, torch.device("cpu")).tolist() == [
        [True, True, True, False],
        [True, True, True, True],
    ]
