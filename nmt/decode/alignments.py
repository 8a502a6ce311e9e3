"""Attention as alignments: the encoder-decoder attention of every layer and head that a model pays producing
given outputs, in one teacher-forced pass."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from nmt.data.batching import collate
from nmt.models.base import Seq2Seq


@torch.inference_mode()
def teacher_forced_attention(
    model: Seq2Seq, src_ids: list[int], outputs: list[list[int]], prefix: Sequence[int] = ()
) -> list[Tensor]:
    """The encoder-decoder attention of every layer and head that `model` pays producing each of `outputs`
    (target ids without bos/eos, read after the forced `prefix`) from one source, in one teacher-forced pass:
    per output (layers, heads, len(output) + 1, len(src_ids) + 1), the rows its tokens and eos (not the
    prefix's), the columns the source and its eos. Not for an Ensemble (search only: use the attention search
    collects)."""
    targets = [[*prefix, *tokens] for tokens in outputs]
    batch = collate([src_ids] * len(outputs), targets, range(len(outputs))).to(model.device)
    attention = model(batch.src, batch.src_mask, batch.tgt_in, return_attention=True).attention
    attention = attention.float().cpu()  # (outputs, layers, heads, longest + 1, src_len)
    first = len(prefix)
    return [attention[i, :, :, first : first + len(tokens) + 1] for i, tokens in enumerate(outputs)]
