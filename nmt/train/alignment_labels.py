"""Guided alignment's labels: the word links of the training split (a Pharaoh file, one line per line of the
split, source-target, from 0: what eflomal and `nmt symmetrize` write) as subword positions of each encoded
training pair, kept in the data cache beside the encoded split.

A link between source word i and target word j becomes a link between every subword of i and every subword of
j (the words as sentencepiece segmented the line: a piece with its spacer starts a word). The encoded split
records the line each pair came from, so the labels follow the pairs that encoding kept (empty sides and
pairs over `data.max_len` are dropped with their links) through every shuffle, batch and padding after it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from pathlib import Path
from typing import Any

import numpy as np

from nmt.align.pharaoh import check_line, read_links
from nmt.align.subwords import subword_links, word_starts, words_of
from nmt.config.sections import DataConfig
from nmt.data.arrays import ArrayWriter, DamagedArrays, EncodedCorpus, flatten, open_token_array, token_dtype
from nmt.data.cache import Entry, cached, file_identity
from nmt.data.corpus import count_lines
from nmt.data.splits import language_split
from nmt.data.tokenizer import Tokenizers
from nmt.errors import UserError

log = logging.getLogger(__name__)

SCHEME = "every subword pair of a linked word pair"  # part of the key: another mapping is another entry
_CHUNK = 65536  # pairs mapped and written at a time


def with_training_links(
    corpus: EncodedCorpus, tokenizers: Tokenizers, data: DataConfig, links: Path, root: Path
) -> EncodedCorpus:
    """`corpus` (the encoded training split, which knows each pair's line) with the subword links of each pair
    from the Pharaoh file `links`, built into the cache under `root` or read from it."""
    if corpus.lines is None:
        raise ValueError("the corpus does not record the line of each pair")
    inputs = {
        "links": file_identity(links),
        "pairs": _digest(corpus),
        "tokenizers": [tokenizers.src.fingerprint, tokenizers.tgt.fingerprint],
        "scheme": SCHEME,
    }

    def fill(directory: Path) -> dict[str, Any]:
        return _write_links(corpus, tokenizers, data, links, directory)

    def use(directory: Path, manifest: dict[str, Any]) -> EncodedCorpus:
        array = open_token_array(directory, "links", manifest.get("arrays", {}).get("links", {}))
        if len(array) != len(corpus):
            raise DamagedArrays(f"links of {len(array)} pairs for {len(corpus)} training pairs")
        log.info(
            "alignment labels: %d subword links for %d training pairs", len(array.tokens) // 2, len(array)
        )
        return dataclasses.replace(corpus, links=array)

    return cached(Entry(root, "links", inputs), fill, use)


def _digest(corpus: EncodedCorpus) -> str:
    """sha256 of everything about the pairs that the labels depend on: their ids and their lines."""
    digest = hashlib.sha256()
    for array in (corpus.src.tokens, corpus.src.offsets, corpus.tgt.tokens, corpus.tgt.offsets, corpus.lines):
        digest.update(np.ascontiguousarray(array).data)
    return digest.hexdigest()


def _write_links(
    corpus: EncodedCorpus, tokenizers: Tokenizers, data: DataConfig, path: Path, directory: Path
) -> dict[str, Any]:
    """Map every kept pair's word links to subword positions and write them as the `links` token array."""
    assert corpus.lines is not None
    files = language_split(data, "train").pair_files(data.directions.directions[0])
    lines = count_lines(files, data.skip_bad_lines)
    found = read_links(path)
    if len(found) != lines:
        names = str(files.src) if files.tgt is None else f"{files.src} and {files.tgt}"
        raise UserError(
            f"{path} has {len(found)} lines but the training split ({names}) has {lines}; the links must be "
            f"line-aligned with it (train.alignment.links)"
        )
    src_starts, tgt_starts = word_starts(tokenizers.src), word_starts(tokenizers.tgt)
    longest = int(max(corpus.src.lengths().max(initial=0), corpus.tgt.lengths().max(initial=0)))
    writer = ArrayWriter(directory, "links", token_dtype(longest))
    try:
        for start in range(0, len(corpus), _CHUNK):
            chunk = []
            for k in range(start, min(start + _CHUNK, len(corpus))):
                line = int(corpus.lines[k])
                src_words = words_of(corpus.src[k], src_starts)
                tgt_words = words_of(corpus.tgt[k], tgt_starts)
                links = found[line].possible
                check_line(links, f"{path} line {line + 1}", _count(src_words), _count(tgt_words))
                chunk.append([p for pair in subword_links(sorted(links), src_words, tgt_words) for p in pair])
            writer.append(*flatten(chunk, writer.dtype))
    except BaseException:
        writer.close()
        raise
    return {"arrays": {"links": writer.finish()}}


def _count(words: np.ndarray) -> int:
    return int(words[-1]) + 1 if len(words) else 0
