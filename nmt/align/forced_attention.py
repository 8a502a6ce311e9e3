"""Teacher forcing: the encoder-decoder attention of every layer and head that a model pays producing given
outputs, in float32 on every device (bf16 would move argmax ties, and word links with them): of given
sentence pairs (`nmt align`: `forced_pairs`), of a translation's hypotheses (heatmaps:
`hypotheses_attention`), and the hypotheses' alignments a reading takes from it (`hypotheses_alignments`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from nmt.align.attention import attended_subwords, layer_attention
from nmt.align.reading import Reading
from nmt.data.batching import IntSequence, collate, search_groups
from nmt.data.language_tags import LanguageTags
from nmt.device.choice import full_precision
from nmt.errors import UserError
from nmt.models.base import Seq2Seq, Wanted
from nmt.models.ensemble import Ensemble


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
        wanted = Wanted(
            logits=False,
            attention=True,
            align_layer=full_context_layer,
            full_context=full_context_layer is not None,
        )
        found = model(batch.src, batch.src_mask, batch.tgt_in, wanted)
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


def hypotheses_attention(
    model: Seq2Seq,
    sources: Sequence[IntSequence],
    outputs: Sequence[Sequence[IntSequence]],
    batch_tokens: int,
    prefix: Sequence[int] = (),
    full_context_layer: int | None = None,
) -> list[list[Tensor]]:
    """The attention paid producing each output of each source (its hypotheses' tokens) as
    `teacher_forced_attention` returns it, teacher-forced after the forced `prefix`, in passes over outputs
    in their order within `batch_tokens` (nmt/data/batching.py `search_cost`: a pair counts its source and
    its prefixed output)."""
    srcs = [src for src, found in zip(sources, outputs, strict=True) for _ in found]
    flat = [tokens for found in outputs for tokens in found]
    lengths = [len(src) + len(prefix) + len(tokens) for src, tokens in zip(srcs, flat, strict=True)]
    paid = iter(
        weights
        for group in search_groups(lengths, batch_tokens, 1, by_length=False)
        for weights in teacher_forced_attention(
            model, [srcs[i] for i in group], [flat[i] for i in group], full_context_layer, prefix
        )
    )
    return [[next(paid) for _ in found] for found in outputs]


def hypotheses_alignments(
    model: Seq2Seq,
    sources: Sequence[IntSequence],
    outputs: Sequence[Sequence[IntSequence]],
    batch_tokens: int,
    reading: Reading,
    prefix: Sequence[int] = (),
    unaligned: Sequence[int] = (),
    full_context_layer: int | None = None,
) -> list[list[list[int | None]]]:
    """The alignment of each output of each source under `reading`, from the attention it paid
    (`hypotheses_attention`, the same arguments): the source position each token attended most, no token
    aligned to eos or an `unaligned` id (a language tag), none to anything where the null slot holds it."""
    paid = hypotheses_attention(model, sources, outputs, batch_tokens, prefix, full_context_layer)
    aligned = []
    for source, each in zip(sources, paid, strict=True):
        skipped = np.isin(source, unaligned)  # (len(source),)
        rows = [layer_attention(weights.numpy(), reading.layer, reading.heads) for weights in each]
        aligned.append([attended_subwords(r, reading.rule, reading.null, skipped) for r in rows])
    return aligned


def forced_pairs(
    model: Seq2Seq,
    sources: Sequence[IntSequence],
    targets: Sequence[IntSequence],
    batch_tokens: int,
    tags: LanguageTags,
    target_language: str,
    full_context_layer: int | None = None,
    progress: Callable[[int], object] | None = None,
) -> list[Tensor]:
    """The attention of every layer and head `model` pays producing each target (ids without bos/eos) from its
    source, teacher-forced in batches of pairs of similar length within `batch_tokens` (nmt/data/batching.py
    `search_cost`: a pair counts its source and target; `progress` told the size of each): per pair (layers,
    heads, len(target) + 1, len(source) + 1), rows and columns ending with eos; `full_context_layer` as
    `teacher_forced_attention` takes it. In float32 on every device. A multilingual model's language tag (of
    `target_language`) is added where it was trained (the first source token, or the first target token after
    bos) and its row or column left out: the attention is the words'. Not for an ensemble, which has no
    teacher-forced pass."""
    if isinstance(model, Ensemble):
        raise UserError("an ensemble has no teacher-forced pass; give one run")
    tagged_sources, tagged_targets, prefix, column = sources, targets, [], 0
    if tags.tagged:
        prefix = tags.forced_prefix(target_language)
        tagged_sources = [tags.source([int(i) for i in s], target_language) for s in sources]
        tagged_targets = [[*prefix, *t] for t in targets]
        column = 0 if prefix else 1  # an encoder tag: its column (a decoder tag: the first row)
    found: list[Tensor] = []
    order: list[int] = []
    lengths = [len(s) + len(t) for s, t in zip(tagged_sources, tagged_targets, strict=True)]
    for group in search_groups(lengths, batch_tokens, 1):
        src, tgt = [tagged_sources[i] for i in group], [tagged_targets[i] for i in group]
        found += teacher_forced_attention(model, src, tgt, full_context_layer)
        order += group
        if progress is not None:
            progress(len(group))
    at = {i: k for k, i in enumerate(order)}
    return [found[at[i]][:, :, len(prefix) :, column:] for i in range(len(sources))]
