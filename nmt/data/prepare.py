"""Corpus → trained (or reloaded) tokenizers → encoded, length-filtered id arrays, ready for batching."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from nmt.config import Config
from nmt.data.batching import EncodedCorpus
from nmt.data.corpus import ParallelText, read_split
from nmt.data.tokenizer import Tokenizers, load_tokenizers, train_tokenizers
from nmt.errors import UserError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedData:
    tokenizers: Tokenizers
    train: EncodedCorpus
    valid: ParallelText
    valid_ids: EncodedCorpus


def prepare_data(cfg: Config, run_dir: Path, reuse_tokenizers: bool) -> PreparedData:
    """Read train/valid text, train sentencepiece into `run_dir` (or reuse it), encode once, length-filter."""
    train_text = read_split(cfg.data, "train")
    valid_text = read_split(cfg.data, "valid")
    if reuse_tokenizers:
        tokenizers = load_tokenizers(run_dir, cfg.tokenizer.joint)
    else:
        tokenizers = train_tokenizers(cfg.tokenizer, train_text.src, train_text.tgt, run_dir)
    train = encode(tokenizers, train_text)
    kept = [i for i in range(len(train)) if max(len(train.src[i]), len(train.tgt[i])) <= cfg.data.max_len]
    if not kept:
        raise UserError(
            f"no training pair is within data.max_len={cfg.data.max_len} subwords; raise data.max_len"
        )
    if len(kept) < len(train):
        log.warning(
            "dropped %d of %d training pairs longer than data.max_len=%d subwords",
            len(train) - len(kept),
            len(train),
            cfg.data.max_len,
        )
    train = EncodedCorpus([train.src[i] for i in kept], [train.tgt[i] for i in kept])
    return PreparedData(tokenizers, train, valid_text, encode(tokenizers, valid_text))


def encode(tokenizers: Tokenizers, text: ParallelText) -> EncodedCorpus:
    """Subword ids of both sides of a parallel text."""
    return EncodedCorpus.from_ids(tokenizers.src.encode(text.src), tokenizers.tgt.encode(text.tgt))
