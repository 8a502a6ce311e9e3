"""How well the model in training does on the validation split: greedy BLEU/chrF (of each direction, and
their means, for a multilingual run) and per-token loss; and, with a gold alignment set, the AER of the
attention that guided alignment supervises (teacher-forced)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nmt.align.attention import word_links
from nmt.align.gold import GoldSet, read_gold
from nmt.align.pharaoh import Link
from nmt.align.score import AlignmentScores, score_alignments
from nmt.config.schema import Config
from nmt.config.sections import AlignmentConfig
from nmt.data.batching import collate, iterate_batches, search_groups
from nmt.data.loader import prefetch
from nmt.data.prepare import PreparedData
from nmt.data.tokenizer import Tokenizers
from nmt.decode.translator import TorchTranslator
from nmt.device.choice import autocast, full_precision
from nmt.errors import ConfigError
from nmt.evaluate.directions import run_scores
from nmt.models.base import Seq2Seq, Wanted
from nmt.train.loss import sequence_loss

log = logging.getLogger(__name__)


def validation_scores(
    model: Seq2Seq,
    data: PreparedData,
    cfg: Config,
    device: torch.device,
    gold: GoldSet | None = None,
    align_layer: int | None = None,
) -> dict[str, Any]:
    """Loss, greedy BLEU and chrF on (the first `train.eval_max_sentences` of) the validation split, and the
    AER of decoder layer `align_layer` on the `gold` alignment set when given; the model is left in training
    mode. A multilingual run's BLEU and chrF are the means over its directions (the first
    `eval_max_sentences` of each), whose own scores and off-target rates are under `directions`."""
    model.eval()
    found = {"loss": _validation_loss(model, data, cfg, device)} | _scores(model, data, cfg)
    if gold is not None and align_layer is not None:
        aligned = alignment_scores(model, gold, cfg, device, align_layer)
        found |= {"aer": aligned.aer, "align_precision": aligned.precision, "align_recall": aligned.recall}
    model.train()
    return found


def _scores(model: Seq2Seq, data: PreparedData, cfg: Config) -> dict[str, Any]:
    """Each direction's greedy scores on its first `eval_max_sentences` validation pairs (and a multilingual
    run's means: `run_scores`)."""
    limit, directions = cfg.train.eval_max_sentences, data.directions
    rows = [r[:limit] if limit else r for r in directions.valid_rows()]
    translator = TorchTranslator.of(model, cfg, data.tokenizers)
    outputs = {  # the sources hold their encoder tags; toward() forces a decoder tag, bans every tag
        d: _greedy_outputs(translator.toward(d.tgt, d.src), data, r)
        for d, r in zip(directions.directions, rows, strict=True)
    }
    references = {d: [data.valid.tgt[i] for i in r] for d, r in zip(directions.directions, rows, strict=True)}
    return run_scores(outputs, references, directions.run, full=False)


def _greedy_outputs(translator: TorchTranslator, data: PreparedData, rows: range) -> list[str]:
    """The greedy translations of the (encoded) validation sources at `rows`, without a target-language
    vocabulary (its directions are trained ones; the final report uses it)."""
    sources = [data.valid_ids.src[i] for i in rows]
    hyps = translator.search(sources, beam_size=1, nbest=1, target_vocabulary=False)
    return data.tokenizers.tgt.decode([h[0].tokens for h in hyps])


def read_gold_set(
    align: AlignmentConfig, tokenizers: Tokenizers, position_limit: int | None
) -> GoldSet | None:
    """The gold set `train.alignment` names (None without one), checked against the model's positions."""
    if align.gold_src is None or align.gold_tgt is None or align.gold_links is None:
        return None
    paths = Path(align.gold_src), Path(align.gold_tgt), Path(align.gold_links)
    gold = read_gold(*paths, tokenizers, align.gold_one_based, align.gold_reverse)
    for number, (src, tgt) in enumerate(zip(gold.src, gold.tgt, strict=True), 1):
        longest = max(len(src.ids), len(tgt.ids)) + 1
        if position_limit is not None and longest > position_limit:
            raise ConfigError(
                f"{align.gold_src} line {number} takes {longest} positions, more than "
                f"model.transformer.max_positions={position_limit}; shorten the gold set or raise it"
            )
    return gold


@torch.inference_mode()
def alignment_scores(
    model: Seq2Seq, gold: GoldSet, cfg: Config, device: torch.device, layer: int
) -> AlignmentScores:
    """AER, precision and recall of the attention of decoder layer `layer` (the mean of the first
    `train.alignment.heads` heads) on the gold set, teacher-forced on its target sentences: each target
    subword's most attended source subword (in the row `train.alignment.shift` trained; none when that is
    `</s>` and `null_slot` trained it so), merged into word links (nmt/align/attention.py); in float32, as
    `nmt align` computes them."""
    align = cfg.train.alignment
    assert align is not None
    found: list[set[Link]] = [set() for _ in range(len(gold))]
    lengths = [len(s.ids) + len(t.ids) for s, t in zip(gold.src, gold.tgt, strict=True)]
    for group in search_groups(lengths, cfg.search.batch_tokens, 1):
        src, tgt = [gold.src[i] for i in group], [gold.tgt[i] for i in group]
        batch = collate([s.ids for s in src], [t.ids for t in tgt], group).to(device)
        with full_precision(device):
            wanted = Wanted(align_layer=layer, full_context=align.full_context)
            output = model(batch.src, batch.src_mask, batch.tgt_in, wanted)
        assert output.alignment is not None
        weights = output.alignment[:, : align.heads].float().mean(dim=1).cpu().numpy()  # (batch, tgt, src)
        for row, (i, s, t) in enumerate(zip(group, src, tgt, strict=True)):
            matrix = weights[row, : len(t.ids) + 1, : len(s.ids) + 1]
            found[i] = word_links(matrix, s.words, t.words, align.rule, null=align.null_slot)
    return score_alignments(found, gold.links)


@torch.inference_mode()
def _validation_loss(model: Seq2Seq, data: PreparedData, cfg: Config, device: torch.device) -> float:
    """Per-token cross-entropy (without label smoothing) on the validation split, but for the pairs longer
    than the model's positions: those cannot be teacher-forced (BLEU translates them, cut)."""
    corpus, total, tokens = data.valid_ids, 0.0, 0
    src_len, tgt_len = corpus.lengths()  # eos/bos included
    limit = cfg.model.position_limit
    fits = np.maximum(src_len, tgt_len) <= (limit if limit is not None else np.inf)  # (pairs,)
    fitting: list[int] = np.flatnonzero(fits).tolist()
    if len(fitting) < len(src_len):
        log.warning(
            "the validation loss leaves out %d of %d pairs longer than model.transformer.max_positions=%d",
            len(src_len) - len(fitting),
            len(src_len),
            limit,
        )
    lengths = (src_len + tgt_len)[fitting].tolist()
    groups = [[fitting[i] for i in group] for group in search_groups(lengths, cfg.search.batch_tokens, 1)]
    for batch in prefetch(iterate_batches(corpus, groups), device):
        with autocast(device, cfg.train.amp):
            logits = model(batch.src, batch.src_mask, batch.tgt_in).logits
        total += sequence_loss(logits, batch.tgt_out, 0.0).item()
        tokens += int(batch.target_tokens())
    return total / max(tokens, 1)
