"""Which attention a run aligns with, and how it becomes links: a `Reading`.

One choice serves every reader of a run's attention — `nmt align`, validation AER, the word alignments of
translations (`translate --alignments`, HTML tags put back, `nmt serve`) on both engines: the attention that
guided alignment supervised where the run was trained with it (`train.alignment`: its decoder layer, the
mean of its heads, its rule and null slot), else the penultimate decoder layer's mean of heads (an RNN's one
attention), read by argmax. That default was measured (benchmarks/alignment_reading.py, docs/alignment.md):
on the gold pairs and on tags placed through translations, the penultimate layer of the 2-layer Transformer
aligns better than its last one, and Shift-Att's row, read from runs not trained with it, worse than argmax
for every model family. Where the reading is the attention search pays (an RNN's; a one-layer decoder's), a
translation's links come with search at no extra cost; else one teacher-forced pass reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from nmt.config.schema import Config
from nmt.config.sections import Rule, penultimate_layer
from nmt.errors import UserError

Heads = tuple[int, ...] | Literal["mean"] | None  # asked: these heads' mean, all heads', or the run's default


@dataclass(frozen=True)
class Reading:
    """Which attention aligns and how it becomes links: decoder `layer` (from 0, negative from the last), the
    mean of `heads` (None: all of them), `rule` and, when set, `threshold`; with `null` a subword that attends
    the source's `</s>` most stays unlinked (see nmt/align/attention.py)."""

    layer: int
    heads: tuple[int, ...] | None
    rule: Rule = "argmax"
    threshold: float | None = None
    null: bool = False


SEARCH_READING = Reading(-1, None)  # the attention search pays: the last decoder layer's mean of heads


def attention_layout(cfg: Config) -> tuple[int, int]:
    """The decoder layers and heads of a model's encoder-decoder attention (an RNN: 1 and 1)."""
    if cfg.model.transformer is None:
        return 1, 1
    return cfg.model.decoder_layers, cfg.model.transformer.heads


def default_reading(
    cfg: Config, layer: int | None = None, heads: Heads = None, name: str = "the run"
) -> Reading:
    """The attention a run aligns with: `layer` and `heads` as given ('mean': all heads), else those guided
    alignment supervised (when the run was trained with `train.alignment.links`; read by the rule it trained,
    `train.alignment.shift`, and with its null slot when `null_slot` trained one), else the penultimate
    layer's mean of heads by argmax (`penultimate_layer`; what `nmt translate --alignments` reads too). A
    layer or head the model lacks is a UserError naming the run (`name`)."""
    layers, head_count = attention_layout(cfg)
    guided = cfg.train.alignment if cfg.train.alignment and cfg.train.alignment.links else None
    transformer = cfg.model.transformer is not None
    if layer is None:
        layer = guided.decoder_layer(layers) if guided and transformer else penultimate_layer(layers)
    if heads is None:
        heads = tuple(range(guided.heads)) if guided and transformer else "mean"
    if not -layers <= layer < layers:
        raise UserError(
            f"--layer {layer}: {name} has {layers} decoder layer(s) with attention; use 0 to {layers - 1} "
            f"(or -1 for the last)"
        )
    rule, null = (guided.rule, guided.null_slot) if guided else ("argmax", False)
    if heads == "mean":
        return Reading(layer, None, rule, null=null)
    wrong = [head for head in heads if not 0 <= head < head_count]
    if wrong:
        raise UserError(
            f"--head {wrong[0]}: {name} has {head_count} head(s) a layer; use 0 to {head_count - 1}"
        )
    return Reading(layer, heads, rule, null=null)


def translation_reading(cfg: Config) -> Reading | None:
    """The reading a run's translations align with (`default_reading`) where it is not the one search pays
    (None): a guided run's supervised attention, rule and null slot, or another run's penultimate layer,
    unless they are just what search pays (an RNN's attention, a one-layer decoder's)."""
    reading = default_reading(cfg)
    layers, heads = attention_layout(cfg)
    searched = reading.layer % layers == layers - 1 and reading.heads in (None, tuple(range(heads)))
    plain = reading.rule == "argmax" and not reading.null and full_context_layer(cfg) is None
    return None if searched and plain else reading


def full_context_layer(cfg: Config) -> int | None:
    """The decoder layer that guided alignment trained with full target context, if the run was
    (`train.alignment.full_context`)."""
    guided = cfg.train.alignment
    if guided is None or guided.links is None or not guided.full_context or cfg.model.transformer is None:
        return None
    return guided.decoder_layer(cfg.model.decoder_layers)
