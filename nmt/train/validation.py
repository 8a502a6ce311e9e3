"""How well the model in training does on the validation split: greedy BLEU/chrF (of each direction, and
their means, for a multilingual run) and per-token loss."""

from __future__ import annotations

import itertools
from typing import Any

import torch

from nmt.config.schema import Config, replace
from nmt.config.sections import SearchConfig
from nmt.data.batching import iterate_batches, sorted_groups
from nmt.data.directions import DirectionData
from nmt.data.loader import prefetch
from nmt.data.prepare import PreparedData
from nmt.decode.translate import max_source_len, translate_ids
from nmt.device import autocast
from nmt.evaluate.directions import direction_scores
from nmt.evaluate.scores import score
from nmt.models.base import Seq2Seq
from nmt.train.loss import sequence_loss


def validation_scores(
    model: Seq2Seq, data: PreparedData, cfg: Config, device: torch.device
) -> dict[str, Any]:
    """Loss, greedy BLEU and chrF on (the first `train.eval_max_sentences` of) the validation split; the model
    is left in training mode. A multilingual run's BLEU and chrF are the means over its directions (the first
    `eval_max_sentences` of each), whose own scores and off-target rates are under `directions`."""
    model.eval()
    greedy = replace(cfg, search={"beam_size": 1, "nbest": 1}).search
    if data.directions is None:
        limit = min(cfg.train.eval_max_sentences or len(data.valid), len(data.valid))
        outputs = _greedy_outputs(model, data, [range(limit)], greedy, cfg)[0]
        scores = score(outputs, data.valid.tgt[:limit])
        found: dict[str, Any] = {"bleu": scores.bleu, "chrf": scores.chrf}
    else:
        found = _direction_scores(model, data, data.directions, greedy, cfg)
    loss = _validation_loss(model, data, cfg, device)
    model.train()
    return {"loss": loss} | found


def _direction_scores(
    model: Seq2Seq, data: PreparedData, directions: DirectionData, search: SearchConfig, cfg: Config
) -> dict[str, Any]:
    """Each direction's scores on its first `eval_max_sentences` validation pairs, and their means."""
    limit = cfg.train.eval_max_sentences
    rows = [r[:limit] if limit else r for r in directions.valid_rows()]
    outputs = dict(zip(directions.directions, _greedy_outputs(model, data, rows, search, cfg), strict=True))
    references = {d: [data.valid.tgt[i] for i in r] for d, r in zip(directions.directions, rows, strict=True)}
    return direction_scores(outputs, references, directions.languages)


def _greedy_outputs(
    model: Seq2Seq, data: PreparedData, rows: list[range], search: SearchConfig, cfg: Config
) -> list[list[str]]:
    """The greedy translations of the validation sources at each group of `rows`, searched together."""
    sources = [data.valid_ids.src[i] for r in rows for i in r]
    hyps = translate_ids(model, sources, search, max_source_len(cfg))
    texts = data.tokenizers.tgt.decode([h[0].tokens for h in hyps])
    ends = list(itertools.accumulate(len(r) for r in rows))
    return [texts[end - len(r) : end] for r, end in zip(rows, ends, strict=True)]


@torch.inference_mode()
def _validation_loss(model: Seq2Seq, data: PreparedData, cfg: Config, device: torch.device) -> float:
    """Per-token cross-entropy (without label smoothing) on the whole validation split."""
    corpus, total, tokens = data.valid_ids, 0.0, 0
    src_len, tgt_len = corpus.lengths()
    groups = sorted_groups((src_len + tgt_len).tolist(), cfg.search.batch_size)
    for batch in prefetch(iterate_batches(corpus, groups), device):
        with autocast(device, cfg.train.amp):
            logits = model(batch.src, batch.src_mask, batch.tgt_in).logits
        total += sequence_loss(logits, batch.tgt_out, 0.0).item()
        tokens += int(batch.target_tokens())
    return total / max(tokens, 1)
