"""Attention as alignments: the encoder-decoder attention of every layer and head that a model pays producing
given outputs, in one teacher-forced pass, in float32 on every device (bf16 would move argmax ties, and word
links with them)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from nmt.data.batching import IntSequence, collate
from nmt.device.choice import full_precision
from nmt.models.base import Seq2Seq


@torch.inference_mode()
def teacher_forced_attention(
    model: Seq2Seq,
    sources: Sequence[IntSequence],
    outputs: Sequence[IntSequence],
    full_context_layer: int | None = None,
    prefix: Sequence[int] = (),
) -> list[Tensor]:
    """The encoder-decoder attention of every layer and head that `model` pays producing each output (target
    ids without bos/eos, read after the forced `prefix`) from its source (ids without eos), in one
    teacher-forced pass: per pair (layers, heads, len(output) + 1, len(source) + 1), the rows its tokens and
    eos (not the prefix's), the columns the source and its eos. Decoder layer `full_context_layer`, when
    given, attends as guided alignment with full context trained it: each target position seeing the whole
    target (a second pass up to that layer). Not for an Ensemble (search only: use the attention search
    collects). Computed in float32, whatever autocast is active around it."""
    targets = [[*prefix, *tokens] for tokens in outputs]
    batch = collate(sources, targets, range(len(outputs))).to(model.device)
    with full_precision(model.device):
        found = model(
            batch.src,
            batch.src_mask,
            batch.tgt_in,
            return_attention=True,
            align_layer=full_context_layer,
            full_context=full_context_layer is not None,
            with_logits=False,
        )
    attention = found.attention
    assert attention is not None
    if full_context_layer is not None and found.alignment is not None:
        attention[:, full_context_layer] = found.alignment
    attention = attention.float().cpu()  # (pairs, layers, heads, prefix + longest + 1, longest source + 1)
    first = len(prefix)
    return [
        attention[i, :, :, first : first + len(tokens) + 1, : len(src) + 1]
        for i, (src, tokens) in enumerate(zip(sources, outputs, strict=True))
    ]
