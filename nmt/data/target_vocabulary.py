"""Each target language's vocabulary in a multilingual run: the subword ids seen on the target side of the
training pairs into that language, and those every language shares, whatever was seen: the special ids
(padding, unknown, bos, eos) and every piece made only of punctuation, symbols and digits (Unicode
categories P*, S* and Nd), the word-boundary mark `▁` aside, the bare `▁` among them. Written into the run
directory when a multilingual run is trained (`target_vocabulary.json`, language → sorted ids); search
forbids the others when translating into the language (nmt/rules/target_vocabulary.py)."""

from __future__ import annotations

import itertools
import json
import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nmt.atomic_files import atomic_write_text
from nmt.data.special_tokens import EOS

if TYPE_CHECKING:
    from nmt.data.prepare import PreparedData
    from nmt.data.tokenizer import Tokenizer

FILE = "target_vocabulary.json"
WORD_START = "▁"


def shared_piece(piece: str) -> bool:
    """Whether a piece is one every language may write: punctuation, symbols and digits, or the bare `▁`."""
    text = piece.replace(WORD_START, "")
    return all(unicodedata.category(char)[0] in "PS" or unicodedata.category(char) == "Nd" for char in text)


def shared_ids(tokenizer: Tokenizer) -> set[int]:
    """The ids every language shares: the specials and the pieces `shared_piece` accepts (not the tags:
    control symbols, which search forbids anyway)."""
    pieces = tokenizer.pieces(list(range(EOS + 1, len(tokenizer))))
    shared = {i for i, piece in enumerate(pieces, start=EOS + 1) if shared_piece(piece)}
    return {i for i in shared if not tokenizer.is_control(i)} | set(range(EOS + 1))


def target_vocabularies(data: PreparedData) -> dict[str, list[int]]:
    """Each target language's ids: those of the training targets of every direction into it (each
    direction's rows follow those of the ones before), with the shared ones."""
    seen: dict[str, set[int]] = {}
    targets, plan = data.train.tgt, data.directions
    starts = itertools.accumulate(plan.train_pairs, initial=0)
    for direction, (start, end) in zip(plan.directions, itertools.pairwise(starts), strict=True):
        tokens = targets.tokens[targets.offsets[start] : targets.offsets[end]]
        seen.setdefault(direction.tgt, set()).update(np.unique(tokens).tolist())
    shared = shared_ids(data.tokenizers.tgt)
    return {lang: sorted(ids | shared) for lang, ids in sorted(seen.items())}


def save_target_vocabularies(data: PreparedData, run_dir: Path) -> None:
    atomic_write_text(run_dir / FILE, json.dumps(target_vocabularies(data)))


def load_target_vocabularies(run_dir: Path) -> dict[str, list[int]]:
    """The run's target vocabularies; empty where it has none (a bilingual run, or one trained by an earlier
    nmt)."""
    path = run_dir / FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
