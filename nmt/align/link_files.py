"""Pharaoh files named on the command line (`nmt score-alignments`, `nmt symmetrize`), read as their options
say and refused, in one line naming the option to change, where they look misread. A misread file scores or
symmetrizes without an error, only wrongly (fast_align's En–Fr links against the 1-based gold read as 0-based:
AER 48.1 instead of 10.5), so each file is checked before it is used:

- **Counting from 1.** A file read from 0 that never uses word 0 of either side, in `MIN_LINES` lines with
  links or more, or whose links fit their sentences only one lower, counts from 1 (a 0-based alignment links
  the first words of some pair). A file read from 1 that holds index 0 counts from 0.
- **Past its sentence.** With the text (`--src`/`--tgt`) every index is checked against its sentence, and
  a file that fits only with its two sides swapped names the target word first. Without it nothing can be
  checked, and the log says so.
- **The other way round.** Two files of one corpus (a hypothesis and its gold, or two directions) that share
  `AGREEMENT` times more links with one of them read the other way round than as read: one names the target
  word first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt.align.pharaoh import Link, SentenceLinks, check_links, read_links, sentence_lengths
from nmt.errors import UserError

log = logging.getLogger(__name__)

MIN_LINES = 5  # lines with links of a file that never uses word 0 before it counts as 1-based
AGREEMENT = 2.0  # how many times more links two files share with one read the other way round
MIN_SHARED = 10  # links they must share so before that counts


@dataclass(frozen=True)
class LinkFile:
    """A Pharaoh file and how to read it: counting from 1, naming the target word first, and the options that
    say so (named in errors)."""

    path: Path
    one_based: bool
    reverse: bool
    one_based_option: str
    reverse_option: str

    def read(self, lengths: Sequence[Link] | None, text: str) -> list[SentenceLinks]:
        """Its links, (source word, target word) from 0, checked (see the module) against the words of each
        sentence pair of `text` (`lengths`: (source, target); None when not given)."""
        links = read_links(self.path, self.one_based, self.reverse, self.one_based_option)
        if not self.one_based and _looks_one_based(links, lengths):
            raise UserError(
                f"{self.path} never links word 0 of either side, so it counts from 1: add "
                f"{self.one_based_option}"
            )
        if lengths is None:
            return links
        if len(links) == len(lengths) and not _fits(links, lengths) and _fits(_swapped(links), lengths):
            raise UserError(f"{self.path} fits {text} only with its two sides swapped: {self.other_way()}")
        hint = f"check the direction ({self.reverse_option}) and the counting ({self.one_based_option})"
        check_links(links, self.path, lengths, text, hint)
        return links

    def other_way(self) -> str:
        """How to read it the other way round: add or drop its reverse option."""
        return f"drop {self.reverse_option}" if self.reverse else f"add {self.reverse_option}"


def text_lengths(src: Path | None, tgt: Path | None) -> tuple[list[Link] | None, str]:
    """The words of each sentence pair of `--src` and `--tgt` (None without them), and their name in
    errors."""
    if (src is None) != (tgt is None):
        raise UserError("--src and --tgt come together: give the text of both sides, or neither")
    if src is None or tgt is None:
        return None, ""
    return sentence_lengths(src, tgt), f"{src} and {tgt}"


def read_pair(
    first: LinkFile, second: LinkFile, lengths: Sequence[Link] | None, text: str, advice: str
) -> tuple[list[SentenceLinks], list[SentenceLinks]]:
    """The links of two files of one corpus, each read and checked as `LinkFile.read` does, refused unless
    they hold as many lines and agree on which word comes first (`check_agreement`, with `advice`)."""
    first_links, second_links = first.read(lengths, text), second.read(lengths, text)
    if len(first_links) != len(second_links):
        raise UserError(
            f"{first.path} has {len(first_links)} lines but {second.path} has {len(second_links)}; both "
            f"must align the same sentence pairs, line by line"
        )
    check_agreement(first_links, second_links, advice)
    say_if_unchecked(lengths)
    return first_links, second_links


def say_if_unchecked(lengths: Sequence[Link] | None) -> None:
    """Log, once the files are used, that their indices were not checked against any text."""
    if lengths is None:
        log.info("link indices not checked against their sentences: give --src and --tgt to check them")


def check_agreement(first: Sequence[SentenceLinks], second: Sequence[SentenceLinks], advice: str) -> None:
    """Refuse two files of one corpus, line by line, that share `AGREEMENT` times more links with one read the
    other way round than as read (and `MIN_SHARED` at least): the error says how many and ends with
    `advice`."""
    as_read = sum(len(a.possible & b.possible) for a, b in zip(first, second, strict=True))
    swapped = sum(len(set(_swap(a.possible)) & b.possible) for a, b in zip(first, second, strict=True))
    if swapped >= MIN_SHARED and swapped >= AGREEMENT * as_read:
        raise UserError(
            f"the two files share {swapped} links with one read the other way round but {as_read} as read: "
            f"{advice}"
        )


def _looks_one_based(links: Sequence[SentenceLinks], lengths: Sequence[Link] | None) -> bool:
    """Whether links read from 0 never use word 0 and either fill `MIN_LINES` lines or fit their sentences
    only one lower."""
    if any(0 in link for line in links for link in line.possible):
        return False
    if sum(bool(line.possible) for line in links) >= MIN_LINES:
        return True
    if lengths is None or len(links) != len(lengths) or _fits(links, lengths):
        return False
    lowered = [frozenset((i - 1, j - 1) for i, j in line.possible) for line in links]
    return _fits([SentenceLinks(frozenset(), line) for line in lowered], lengths)


def _fits(links: Sequence[SentenceLinks], lengths: Sequence[Link]) -> bool:
    """Whether every link is within its sentence pair of (source, target) words."""
    return all(
        i < src and j < tgt for line, (src, tgt) in zip(links, lengths, strict=True) for i, j in line.possible
    )


def _swapped(links: Sequence[SentenceLinks]) -> list[SentenceLinks]:
    return [SentenceLinks(frozenset(_swap(line.sure)), frozenset(_swap(line.possible))) for line in links]


def _swap(links: Iterable[Link]) -> Iterable[Link]:
    return ((j, i) for i, j in links)
