"""Int8 weights for decoding on a CPU (`nmt translate --int8`): every linear layer of a trained model, and its
output projection (the target embedding, where tied), becomes an `Int8Linear`, whose weights are int8 per
output row and whose inputs are quantized on the fly, batch by batch (dynamic quantization, on PyTorch's
fbgemm kernels; PyTorch 2.13 marks them deprecated, and a PyTorch without them is told so in one line). The
recurrent cells of the RNNs stay in float32. A copy of the model is changed; the run's own model and
checkpoints are left alone. The translations may differ a little from float32's: the benchmarks report BLEU
beside the speed (docs/benchmarks.md).
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn

from nmt.errors import UserError
from nmt.models.base import Seq2Seq
from nmt.models.ensemble import Ensemble


class Int8Linear(nn.Module):
    """y = x Wᵀ + b with W in int8 (a scale per output row, symmetric) and x quantized per call; the float
    `weight` and `bias` and the sizes stay readable (as nn.Linear's are) for code that reads them."""

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__()
        weight = weight.detach().float()  # (out_features, in_features)
        self.out_features, self.in_features = weight.shape
        scales = (weight.abs().amax(dim=1).clamp(min=1e-8) / 127).double()  # (out_features,)
        zeros = torch.zeros(weight.size(0), dtype=torch.long)
        with warnings.catch_warnings():  # torch 2.13 deprecates quantized dtypes (int8_model checks the ops)
            warnings.simplefilter("ignore", UserWarning)
            int8 = torch.quantize_per_channel(weight, scales, zeros, 0, torch.qint8)
        self.register_buffer("weight", weight, persistent=False)
        self.register_buffer("bias", None if bias is None else bias.detach().float(), persistent=False)
        self.packed = torch.ops.quantized.linear_prepack(int8, self.bias)

    def forward(self, x: Tensor) -> Tensor:
        """(…, in_features) → (…, out_features), in float32."""
        return torch.ops.quantized.linear_dynamic(x.float(), self.packed, True)  # 7-bit inputs: no overflow


def int8_model(model: Seq2Seq) -> Seq2Seq:
    """A copy of `model` (on the CPU, in eval mode) with every nn.Linear and its output projection in int8."""
    if model.device.type != "cpu":
        raise UserError("--int8 decodes on a CPU; leave out --int8 on a GPU, or add --device cpu")
    if not hasattr(torch.ops.quantized, "linear_dynamic"):
        raise UserError("this PyTorch build has no int8 kernels (torch.ops.quantized); leave out --int8")
    quantized = copy.deepcopy(model).eval()
    for module in list(quantized.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear):
                setattr(module, name, Int8Linear(child.weight, child.bias))
    for seq2seq in [m for m in quantized.modules() if isinstance(m, Seq2Seq) and not isinstance(m, Ensemble)]:
        if seq2seq.output is None:  # tied: the projection is the target embedding's weight
            seq2seq.output = Int8Linear(seq2seq.target_embedding().weight, None)
    return quantized
