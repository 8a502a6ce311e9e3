"""The training objective: label-smoothed cross-entropy over the target tokens that are not padding."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from nmt.data.special_tokens import PAD


def sequence_loss(logits: Tensor, targets: Tensor, label_smoothing: float) -> Tensor:
    """Summed label-smoothed cross-entropy over non-pad target tokens. logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(
        logits.flatten(0, 1).float(),
        targets.flatten(),
        ignore_index=PAD,
        label_smoothing=label_smoothing,
        reduction="sum",
    )
