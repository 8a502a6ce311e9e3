"""How well the model in training does on the validation split: greedy BLEU/chrF and per-token loss."""

from __future__ import annotations

import torch

from nmt.config.schema import Config, replace
from nmt.data.batching import iterate_batches, sorted_groups
from nmt.data.loader import prefetch
from nmt.data.prepare import PreparedData
from nmt.decode.rules import Greedy
from nmt.decode.translator import TorchTranslator, max_source_len
from nmt.device import autocast
from nmt.evaluate.scores import score
from nmt.models.base import Seq2Seq
from nmt.train.loss import sequence_loss


def validation_scores(
    model: Seq2Seq, data: PreparedData, cfg: Config, device: torch.device
) -> dict[str, float]:
    """Loss, greedy BLEU and chrF on (the first `train.eval_max_sentences` of) the validation split; the model
    is left in training mode."""
    model.eval()
    limit = min(cfg.train.eval_max_sentences or len(data.valid), len(data.valid))
    sources = [data.valid_ids.src[i] for i in range(limit)]
    translator = TorchTranslator(
        model, data.tokenizers, replace(cfg, search={"nbest": 1}).search, max_source_len(cfg)
    )
    hyps = translator.search(sources, Greedy(cfg.search.length_penalty))
    scores = score(data.tokenizers.tgt.decode([h[0].tokens for h in hyps]), data.valid.tgt[:limit])
    loss = _validation_loss(model, data, cfg, device)
    model.train()
    return {"loss": loss, "bleu": scores.bleu, "chrf": scores.chrf}


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
