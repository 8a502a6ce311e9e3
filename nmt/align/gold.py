"""A gold alignment set: whitespace-tokenized sentence pairs (a source and a target file, line by line) and
their human links (a Pharaoh file with sure and possible links), every word encoded on its own."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nmt.align.pharaoh import SentenceLinks, check_links, read_lines, read_links
from nmt.data.tokenizer import Tokenizers
from nmt.data.words import WordPieces, encode_words
from nmt.errors import UserError


@dataclass(frozen=True)
class GoldSet:
    """Pairs of sentences, their subwords word by word, and their gold links."""

    src: list[WordPieces]
    tgt: list[WordPieces]
    links: list[SentenceLinks]

    def __len__(self) -> int:
        return len(self.links)


def read_gold(
    src: Path, tgt: Path, links: Path, tokenizers: Tokenizers, one_based: bool = False, reverse: bool = False
) -> GoldSet:
    """Read a gold set; the links must fit the text (as many lines, no index past a sentence)."""
    src_lines, tgt_lines = read_lines(src), read_lines(tgt)
    if len(src_lines) != len(tgt_lines):
        raise UserError(f"{src} has {len(src_lines)} lines but {tgt} has {len(tgt_lines)}; they must align")
    gold = read_links(links, one_based, reverse, "train.alignment.gold_one_based")
    lengths = [(len(s.split()), len(t.split())) for s, t in zip(src_lines, tgt_lines, strict=True)]
    check_links(gold, links, lengths, str(src))
    return GoldSet(encode_words(tokenizers.src, src_lines), encode_words(tokenizers.tgt, tgt_lines), gold)
