"""Our Transformer's weights under transformers' Marian (post-norm) and Pegasus (pre-norm) names, one
mapping applied both ways: `hf_state_dict` writes a model for `nmt export --to huggingface`, `our_state_dict`
reads one for `nmt import` (nmt/importing/marian.py).

`places` lists where each weight goes, once: a transformers name, the name of ours it is (or is a block of:
our self-attention fuses q, k and v in one `qkv_proj`, rows q, k, v) and how the hidden dimensions move.
Marian rebuilds its sinusoidal positions on loading with sin in the first half of the dimensions and cos in
the second, where ours interleave them, so for Marian the residual stream's dimensions are permuted into that
layout (`halves_order`), which changes no output: the columns of the embeddings, of the output projection
and of every linear layer that reads the stream (q/k/v, fc1), the rows and biases of every one that writes
it (out_proj, fc2), and every layer norm's weight and bias. Reading a Marian model undoes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from nmt.models.config import ModelConfig
from nmt.models.transformer import sinusoidal_positions

Move = Literal["columns", "rows", "none"]  # what the stream's permutation moves of a tensor


@dataclass(frozen=True)
class Place:
    """transformers' `hf` is (block `part` of `parts` of the rows of) our `ours`, with the hidden dimensions
    moved as `move` says; `row`: transformers holds our vector as a (1, n) row (final_logits_bias)."""

    hf: str
    ours: str
    move: Move
    part: int = 0
    parts: int = 1
    row: bool = False


def halves_order(d_model: int) -> Tensor:
    """The permutation of hidden dimensions that turns our position layout (sin on even dimensions, cos on odd
    ones) into transformers' Marian layout (sin in the first half, cos in the second): [0, 2, …, 1, 3, …]."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


SRC, TGT = "src_embed.embedding.weight", "tgt_embed.embedding.weight"


def places(model: ModelConfig, joint: bool = True) -> list[Place]:
    """Where every weight of a Transformer of `model`'s settings goes (`joint`: one vocabulary for both
    sides); tied weights have one place for each transformers name (all name one matrix of ours: the source
    embedding where the embeddings are shared)."""
    found: list[Place] = []

    def reads(ours: str, *names: str) -> None:
        """Linear layers applied to the stream, as many as `names`, fused in one of ours (rows: q, k, v)."""
        for part, name in enumerate(names):
            found.append(Place(f"{name}.weight", f"{ours}.weight", "columns", part, len(names)))
            found.append(Place(f"{name}.bias", f"{ours}.bias", "none", part, len(names)))

    def writes(name: str, ours: str) -> None:
        """A linear layer whose output is added to the stream, or a layer norm of the stream."""
        found.extend(Place(f"{name}.{kind}", f"{ours}.{kind}", "rows") for kind in ("weight", "bias"))

    for side, layers in (("encoder", model.encoder_layers), ("decoder", model.decoder_layers)):
        self_norm = "attn_block" if side == "encoder" else "self_block"
        for i in range(layers):
            name, ours = f"model.{side}.layers.{i}", f"{side}_layers.{i}"
            reads(f"{ours}.self_attn.qkv_proj", *(f"{name}.self_attn.{x}_proj" for x in "qkv"))
            writes(f"{name}.self_attn.out_proj", f"{ours}.self_attn.out_proj")
            writes(f"{name}.self_attn_layer_norm", f"{ours}.{self_norm}.norm")
            if side == "decoder":
                reads(f"{ours}.cross_attn.query_proj", f"{name}.encoder_attn.q_proj")
                reads(f"{ours}.cross_attn.key_value_proj", *(f"{name}.encoder_attn.{x}_proj" for x in "kv"))
                writes(f"{name}.encoder_attn.out_proj", f"{ours}.cross_attn.out_proj")
                writes(f"{name}.encoder_attn_layer_norm", f"{ours}.cross_block.norm")
            reads(f"{ours}.feed_forward.0", f"{name}.fc1")
            writes(f"{name}.fc2", f"{ours}.feed_forward.3")
            writes(f"{name}.final_layer_norm", f"{ours}.ff_block.norm")
        if model.transformer_settings.norm == "pre":
            writes(f"model.{side}.layer_norm", f"{side}_norm")
    src, tgt = SRC, SRC if model.shares_embeddings(joint) else TGT  # one matrix where shared
    found.append(Place("model.encoder.embed_tokens.weight", src, "columns"))
    found.append(Place("model.decoder.embed_tokens.weight", tgt, "columns"))
    if model.transformer_settings.norm == "pre" or model.shares_embeddings(joint_vocab=True):
        found.append(
            Place("model.shared.weight", src, "columns")
        )  # Marian has it when sharing; Pegasus always
    found.append(Place("lm_head.weight", tgt if model.tie_embeddings else "output.weight", "columns"))
    if model.transformer_settings.output_bias:
        found.append(Place("final_logits_bias", "output_bias", "none", row=True))
    return found


def hf_state_dict(
    state: Mapping[str, Tensor], model: ModelConfig, tgt_vocab_size: int, joint: bool = True
) -> dict[str, Tensor]:
    """Our weights `state` (a Transformer of `model`'s settings, a target vocabulary of `tgt_vocab_size`;
    `joint`: one vocabulary for both sides) under transformers' names, positions and a zero final_logits_bias
    included where ours has none; a weight of ours left over raises ValueError."""
    arch = model.transformer_settings
    order = hidden_order(model)
    left = set(state) - ({TGT} if model.shares_embeddings(joint) else set())  # TGT is SRC then
    hf: dict[str, Tensor] = {}
    for place in places(model, joint):
        tensor = state[place.ours].chunk(place.parts)[place.part]
        tensor = moved(tensor, place.move, order)
        hf[place.hf] = tensor.unsqueeze(0) if place.row else tensor
        left.discard(place.ours)
    if not arch.output_bias:
        hf["final_logits_bias"] = torch.zeros(1, tgt_vocab_size)
    positions = sinusoidal_positions(arch.max_positions, arch.d_model)[
        :, order
    ]  # rebuilt by Marian, not Pegasus
    for side in ("encoder", "decoder"):
        hf[f"model.{side}.embed_positions.weight"] = positions
    if left:
        raise ValueError(f"transformers' models have no place for the weights {sorted(left)}")
    return {name: tensor.contiguous() for name, tensor in hf.items()}


def our_state_dict(hf: dict[str, Tensor], model: ModelConfig, joint: bool) -> dict[str, Tensor]:
    """A Marian model's weights `hf` under our names (a Transformer of `model`'s settings; `joint`: one
    vocabulary for both sides), the stream's permutation undone. Each weight placed leaves `hf`, so that it
    is freed once moved (the import holds about one copy of the weights, not three); what has no place (the
    positions) stays. Of tied names one is enough (save_pretrained keeps one), and those given must hold one
    matrix (else ValueError naming two), each as wide as the model (else ValueError naming it); a weight none
    of whose names is given raises KeyError naming one."""
    inverse = torch.argsort(hidden_order(model))
    wanted: dict[str, list[Place]] = {}
    for place in places(model, joint):
        wanted.setdefault(place.ours, []).append(place)
    ours = {}
    for name, group in wanted.items():
        found: dict[int, tuple[str, Tensor]] = {}  # part → its first transformers name, the tensor
        for place in (place for place in group if place.hf in hf):
            tensor = hf.pop(place.hf)
            check_width(place.hf, tensor.squeeze(0) if place.row else tensor, place.move, len(inverse))
            tensor = moved(tensor.squeeze(0) if place.row else tensor, place.move, inverse)
            first, kept = found.setdefault(place.part, (place.hf, tensor))
            if kept is not tensor and not (kept.shape == tensor.shape and torch.equal(kept, tensor)):
                raise ValueError(f"{place.hf} differs from {first}, which the config ties it to")
        missing = [place.hf for place in group if place.part not in found]
        if missing:
            raise KeyError(missing[0])
        parts = [found.pop(i)[1] for i in range(group[0].parts)]
        ours[name] = torch.cat(parts) if len(parts) > 1 else parts[0]
    if model.shares_embeddings(joint):
        ours[TGT] = ours[SRC]
    return ours


def hidden_order(model: ModelConfig) -> Tensor:
    """Where each hidden dimension of ours goes in transformers' model: Marian's halves, Pegasus' as ours."""
    d_model = model.transformer_settings.d_model
    return torch.arange(d_model) if model.transformer_settings.norm == "pre" else halves_order(d_model)


def check_width(name: str, tensor: Tensor, move: Move, d_model: int) -> None:
    """A ValueError naming the weight `name` where the hidden dimensions its `move` names are not d_model."""
    dim = {"columns": 1, "rows": 0}.get(move)
    if dim is not None and tensor.size(dim) != d_model:
        raise ValueError(f"{name} has {tensor.size(dim)} hidden dimensions where d_model is {d_model}")


def moved(tensor: Tensor, move: Move, order: Tensor) -> Tensor:
    """`tensor` with the hidden dimensions its `move` names put in `order` (a new tensor; "none": itself)."""
    if move == "columns":
        return tensor.index_select(1, order)  # a quarter of the time of tensor[:, order]
    if move == "rows":
        return tensor.index_select(0, order)
    return tensor
