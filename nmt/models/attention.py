"""One attention interface for every model: `context, weights = attention(query, keys, values, mask)`.

Keys and values are prepared once per source batch with `prepare(memory)` and passed back on every call, so a
decoder step never re-projects the encoder states. Weights always come as (batch, heads, tgt_len, src_len);
the single-head RNN attentions have heads = 1. Masks are bool with True = attend, shaped (batch, 1, src_len)
for padding or (batch, tgt_len, src_len) in general.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class Attention(nn.Module):
    """The interface: `prepare` once per source batch, then call with queries as often as needed."""

    def prepare(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values from the encoder states (batch, src_len, d), computed once per batch."""
        return memory, memory

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        """Context (batch, tgt_len, d_value) and, when asked, weights (batch, heads, tgt_len, src_len)."""
        raise NotImplementedError


class SingleHeadAttention(Attention):
    """Scores → masked softmax → weighted sum of the values; weights are always computed (heads = 1)."""

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        """Unnormalised scores (batch, tgt_len, src_len)."""
        raise NotImplementedError

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, need_weights: bool = True
    ) -> tuple[Tensor, Tensor | None]:
        scores = self.score(query, keys)  # (batch, tgt_len, src_len)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        return weights @ values, weights.unsqueeze(1)


class AdditiveAttention(SingleHeadAttention):
    """Bahdanau et al. 2015, "Neural Machine Translation by Jointly Learning to Align and Translate":
    score(s, h_j) = vᵀ tanh(W_s s + W_h h_j). Luong et al. 2015's `concat` score is the same function.

    W_h h_j is computed once per sentence in `prepare`.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)  # W_s
        self.key_proj = nn.Linear(key_dim, hidden_dim)  # W_h (with the bias of the sum)
        self.energy = nn.Linear(hidden_dim, 1, bias=False)  # v

    def prepare(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        return self.key_proj(memory), memory  # (batch, src_len, hidden), (batch, src_len, key_dim)

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        summed = self.query_proj(query).unsqueeze(2) + keys.unsqueeze(1)  # (batch, tgt, src, hidden)
        hidden = torch.tanh(summed)
        return self.energy(hidden).squeeze(-1)  # (batch, tgt_len, src_len)


class MultiplicativeAttention(SingleHeadAttention):
    """Luong et al. 2015, "Effective Approaches to Attention-based Neural Machine Translation":
    `dot` score h_tᵀ h̄_s, or `general` score h_tᵀ W_a h̄_s (W_a h̄_s computed once in `prepare`).

    With `scale`, scores are divided by sqrt(query_dim) (not in the paper; off by default).
    """

    def __init__(self, query_dim: int, key_dim: int, general: bool, scale: bool = False) -> None:
        super().__init__()
        if not general and query_dim != key_dim:
            raise ValueError(f"dot attention needs equal query and key sizes, got {query_dim} and {key_dim}")
        self.key_proj = nn.Linear(key_dim, query_dim, bias=False) if general else None  # W_a
        self.scale = query_dim**-0.5 if scale else 1.0

    def prepare(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        keys = memory if self.key_proj is None else self.key_proj(memory)  # (batch, src_len, query_dim)
        return keys, memory

    def score(self, query: Tensor, keys: Tensor) -> Tensor:
        return (query @ keys.transpose(1, 2)) * self.scale  # (batch, tgt_len, src_len)


def luong_attention(score: str, query_dim: int, key_dim: int, scale: bool = False) -> Attention:
    """The Luong et al. 2015 score named `score`: 'dot', 'general' or 'concat'."""
    if score == "concat":
        return AdditiveAttention(query_dim, key_dim, query_dim)
    return MultiplicativeAttention(query_dim, key_dim, general=score == "general", scale=scale)


class MultiHeadAttention(Attention):
    """Vaswani et al. 2017 multi-head scaled dot-product attention, here between a query sequence and a memory
    (cross-attention): queries from `query_proj`, keys and values from one `key_value_proj` matmul.

    Keys and values are prepared as (batch, heads, src_len, d_head). Without `need_weights` the call goes
    through `F.scaled_dot_product_attention` (flash / memory-efficient kernels on GPU); with it, the weights
    are computed explicitly and returned per head.
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.heads, self.d_head, self.dropout = heads, d_model // heads, dropout
        self.make_projections(d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def make_projections(self, d_model: int) -> None:
        """The input projections (called once, from __init__)."""
        self.query_proj = nn.Linear(d_model, d_model)
        self.key_value_proj = nn.Linear(d_model, 2 * d_model)

    def split_heads(self, x: Tensor) -> Tensor:
        batch, length, _ = x.shape
        split = x.view(batch, length, self.heads, self.d_head)  # (batch, length, heads, d_head)
        return split.transpose(1, 2)  # (batch, heads, length, d_head)

    def project_query(self, query: Tensor) -> Tensor:
        """Queries (batch, tgt_len, d_model) → (batch, heads, tgt_len, d_head)."""
        return self.split_heads(self.query_proj(query))

    def prepare(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        keys, values = self.key_value_proj(memory).chunk(2, dim=-1)  # (batch, src_len, d_model) each
        return self.split_heads(keys), self.split_heads(values)

    def forward(
        self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        return self.attend(self.project_query(query), keys, values, mask, need_weights)

    def attend(
        self,
        q: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None,
        need_weights: bool = False,
        causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """`forward` with the queries already projected and split into heads, q (batch, heads, tgt_len,
        d_head): the output (batch, tgt_len, d_model) and, when asked, the weights. `causal` adds the
        no-look-ahead mask of self-attention over a whole target prefix."""
        batch, _, tgt_len, _ = q.shape
        mask = None if mask is None else mask.unsqueeze(1)  # (batch, 1, tgt_len or 1, src_len)
        dropout = self.dropout if self.training else 0.0
        weights = None
        if need_weights:  # the scale on the queries: fewer elements, and exact for a d_head of 4**n
            scores = (q * self.d_head**-0.5) @ keys.transpose(-2, -1)  # (batch, heads, tgt_len, src_len)
            if causal:
                scores = scores.masked_fill(~causal_mask(tgt_len, keys.size(-2), q.device), float("-inf"))
            if mask is not None:
                scores = torch.where(mask, scores, float("-inf"))
            weights = scores.softmax(dim=-1)
            context = F.dropout(weights, dropout, self.training) @ values
        else:
            context = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, dropout_p=dropout, is_causal=causal
            )
        context = context.transpose(1, 2).reshape(batch, tgt_len, -1)  # (batch, tgt_len, d_model)
        return self.out_proj(context), weights


class SelfAttention(MultiHeadAttention):
    """Multi-head attention of a sequence over itself: queries, keys and values come from one `qkv_proj`
    matmul (one kernel instead of two). `prepare` and `project_query` use the matching slices of its weights,
    so the shared interface still holds; `project` gives all three at once.

    Checkpoints of the earlier layout (separate `query_proj` and `key_value_proj`) load unchanged: their
    weights are concatenated into `qkv_proj` on loading (`fuse_qkv_weights`).
    """

    def make_projections(self, d_model: int) -> None:
        self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.register_load_state_dict_pre_hook(fuse_qkv_weights)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of x (batch, length, d_model), each (batch, heads, length, d_head)."""
        batch, length, _ = x.shape
        qkv = self.qkv_proj(x).view(batch, length, 3, self.heads, self.d_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (batch, heads, length, d_head) each
        return q, k, v

    def project_query(self, query: Tensor) -> Tensor:
        d_model = self.heads * self.d_head
        weight, bias = self.qkv_proj.weight[:d_model], self.qkv_proj.bias[:d_model]
        return self.split_heads(F.linear(query, weight, bias))

    def prepare(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        d_model = self.heads * self.d_head
        weight, bias = self.qkv_proj.weight[d_model:], self.qkv_proj.bias[d_model:]
        keys, values = F.linear(memory, weight, bias).chunk(2, dim=-1)  # (batch, src_len, d_model) each
        return self.split_heads(keys), self.split_heads(values)


def fuse_qkv_weights(module: nn.Module, state_dict: dict, prefix: str, *_: object) -> None:
    """Load-time migration: `query_proj` and `key_value_proj` weights of a checkpoint written before the
    fused projection become `qkv_proj` (rows: queries, keys, values), in place in `state_dict`."""
    for kind in ("weight", "bias"):
        query, key_value = f"{prefix}query_proj.{kind}", f"{prefix}key_value_proj.{kind}"
        if query in state_dict and key_value in state_dict:
            state_dict[f"{prefix}qkv_proj.{kind}"] = torch.cat(
                [state_dict.pop(query), state_dict.pop(key_value)]
            )


def causal_mask(tgt_len: int, src_len: int, device: torch.device) -> Tensor:
    """(tgt_len, src_len) bool, True where query i may see key j (j <= i + src_len - tgt_len)."""
    return torch.ones(tgt_len, src_len, dtype=torch.bool, device=device).tril(src_len - tgt_len)
