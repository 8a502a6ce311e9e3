"""The training objective: label-smoothed cross-entropy over the target tokens that are not padding, and with
guided alignment a cross-entropy that pulls one attention towards given links."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from nmt.data.special_tokens import EOS, PAD


def sequence_loss(logits: Tensor, targets: Tensor, label_smoothing: float) -> Tensor:
    """Summed label-smoothed cross-entropy over non-pad target tokens. logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        targets.flatten(),
        ignore_index=PAD,
        label_smoothing=label_smoothing,
        reduction="sum",
    )


def alignment_loss(attention: Tensor, links: Tensor, heads: int, shift: bool = False) -> Tensor:
    """Guided alignment (Garg et al. 2019): the summed cross-entropy between each linked target subword's
    label distribution (its links, normalised) and the attention the mean of the first `heads` heads paid at
    the step that predicts it, or with `shift` at the next step, which reads it; target subwords without a
    link add nothing. attention (B, H, T, S), links (B, T, S) bool (row T - 1, eos, has none)."""
    probs = attention[:, :heads].float().mean(dim=1)  # (batch, tgt_len, src_len)
    labels = links.float()
    if shift:  # subword t's links label row t + 1; row 0 (reading bos) has none
        labels = F.pad(labels[:, :-1], (0, 0, 1, 0))
    labels = labels / labels.sum(dim=-1, keepdim=True).clamp_min(1.0)  # rows of unlinked subwords stay 0
    return -(labels * probs.clamp_min(1e-9).log()).sum()  # clamped: padding columns hold weight 0


def with_null_links(links: Tensor, src: Tensor, tgt_out: Tensor) -> Tensor:
    """`links` with every target subword that has none (not padding, not `</s>`) linked to the source's
    `</s>`: the null slot of `train.alignment.null_slot`. links (B, T, S) bool, src (B, S), tgt_out (B, T)."""
    unlinked = (tgt_out != PAD) & (tgt_out != EOS) & ~links.any(dim=-1)  # (batch, tgt_len)
    return links | (unlinked.unsqueeze(-1) & (src == EOS).unsqueeze(1))
