"""Model construction: the one place that maps `model.type` to a class, and the size check that `nmt train`
and `nmt benchmark` make before any data work."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from nmt.errors import ConfigError
from nmt.limits import MAX_PARAMETERS
from nmt.models.base import Seq2Seq
from nmt.models.config import ModelConfig
from nmt.models.rnn import RNNSeq2Seq
from nmt.models.transformer import TransformerSeq2Seq


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int, joint_vocab: bool, pad: int) -> Seq2Seq:
    """A freshly initialised model of the configured type for vocabularies of the given sizes, whose padding
    id is `pad` (its embedding row stays zero)."""
    match cfg.type:
        case "transformer":
            return TransformerSeq2Seq(cfg, src_vocab, tgt_vocab, joint_vocab, pad)
        case "rnn-bahdanau" | "rnn-luong":
            return RNNSeq2Seq(cfg, src_vocab, tgt_vocab, joint_vocab, pad)
    raise ValueError(f"unknown model type {cfg.type!r}")


class _NoInitOnMeta(TorchFunctionMode):
    """Makes torch.nn.init's functions (which every module's `reset_parameters` and `make_embeddings` call,
    and which announce themselves through `__torch_function__`) leave a meta tensor as it is; every other
    call, and every init of a real tensor, goes on as usual."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__module__", None) == "torch.nn.init":
            tensor = args[0] if args else kwargs["tensor"]
            if tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


@contextmanager
def shapes_only() -> Iterator[None]:
    """Modules built inside have their tensors on the meta device (shapes, no memory) and draw no initial
    weights: to count parameters, or to build a model whose weights are assigned next (`load_state_dict(...,
    assign=True)`). Initialising meta tensors does nothing useful and costs seconds: meta `normal_` runs
    torch's Python reference, whose first call imports torch._dynamo. Models built elsewhere (training on a
    real device) are initialised as ever, the same seed giving the same weights."""
    with torch.device("meta"), _NoInitOnMeta():
        yield


def check_model_size(cfg: ModelConfig, vocab_size: int, joint_vocab: bool) -> None:
    """Refuse a model whose weights could not be allocated (counted on the meta device: nothing allocated),
    for vocabularies of at most `vocab_size` pieces."""
    try:
        with shapes_only():
            model = build_model(cfg, vocab_size, vocab_size, joint_vocab, pad=0)  # the count ignores the pad
        count = sum(p.numel() for p in model.parameters())
    except (RuntimeError, ValueError, OverflowError, TypeError) as err:  # sizes past what torch can index
        raise ConfigError(f"the model cannot be built: {(str(err).splitlines() or [''])[0][:160]}") from err
    if count > MAX_PARAMETERS:
        raise ConfigError(
            f"the model asks for {count:,} parameters ({count * 4 / 2**30:,.0f} GiB of float32 weights, "
            f"{count * 16 / 2**30:,.0f} GiB to train), over the limit of {MAX_PARAMETERS:,}; "
            f"lower the sizes in model.{cfg.family}, the layers or tokenizer.vocab_size"
        )
