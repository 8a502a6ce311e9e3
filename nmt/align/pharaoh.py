"""Pharaoh alignment files: one line per sentence pair, each link `i-j` (source word i, target word j).

Links are read as `i-j` (sure), `ipj` or `i?j` (possible: the gold sets of Och & Ney mark uncertain links
with `p`, some tools with `?`); indices count from 0 unless the file counts from 1 (`one_based`), and a file
written target-first is read with `reverse`. Every link in memory is (source word, target word) from 0. A
malformed link, index 0 in a file read as 1-based, a line count that does not match, or an index past its
sentence is a UserError naming the file and the line (nmt/align/link_files.py checks more: files that look
misread).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt.errors import UserError

Link = tuple[int, int]  # (source word, target word), from 0
_LINK = re.compile(r"(\d+)([-p?])(\d+)")
ONE_BASED = "the 1-based reading"  # what errors name where no option asked for one
HINT = "check the direction and whether the file counts from 1"  # the advice for a link past its sentence


@dataclass(frozen=True)
class SentenceLinks:
    """The links of one sentence pair: the sure ones, and all of them (P ⊇ S, as Och & Ney define them)."""

    sure: frozenset[Link]
    possible: frozenset[Link]


def parse_links(
    line: str, where: str, one_based: bool = False, reverse: bool = False, one_based_option: str = ONE_BASED
) -> SentenceLinks:
    """The links of one line; `where` names it in errors (`gold.txt line 3`), `one_based_option` the option
    that asked for a 1-based reading (`--gold-one-based`)."""
    sure, possible = set(), set()
    for token in line.split():
        match = _LINK.fullmatch(token)
        if match is None:
            raise UserError(f"{where}: {token!r} is not a link; write i-j (sure), ipj or i?j (possible)")
        first, kind, second = int(match.group(1)), match.group(2), int(match.group(3))
        if one_based:
            if first == 0 or second == 0:
                raise UserError(
                    f"{where}: {token!r} has index 0, so the file counts from 0, not from 1; drop "
                    f"{one_based_option}"
                )
            first, second = first - 1, second - 1
        link = (second, first) if reverse else (first, second)
        possible.add(link)
        if kind == "-":
            sure.add(link)
    return SentenceLinks(frozenset(sure), frozenset(possible))


def read_links(
    path: Path, one_based: bool = False, reverse: bool = False, one_based_option: str = ONE_BASED
) -> list[SentenceLinks]:
    """Every line of a Pharaoh file (an empty line: a pair without links)."""
    return [
        parse_links(line, f"{path} line {n}", one_based, reverse, one_based_option)
        for n, line in enumerate(read_lines(path), 1)
    ]


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file, split at newlines only (a last line without one counts)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        detail = err.strerror if isinstance(err, OSError) else "it is not UTF-8 text"
        raise UserError(f"cannot read {path}: {detail}") from err
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def check_links(
    links: Sequence[SentenceLinks], path: Path, lengths: Sequence[Link], text: str, hint: str = HINT
) -> None:
    """Refuse links that do not fit the text they align: another number of lines than `lengths` (source and
    target words of each pair of `text`, the text's name in errors), or an index past its sentence (the error
    ends with `hint`)."""
    if len(links) != len(lengths):
        raise UserError(
            f"{path} has {len(links)} lines but {text} has {len(lengths)}; the links must be line-aligned "
            f"with the text"
        )
    for number, (line, (src_words, tgt_words)) in enumerate(zip(links, lengths, strict=True), 1):
        check_line(line.possible, f"{path} line {number}", src_words, tgt_words, hint)


def check_line(links: Iterable[Link], where: str, src_words: int, tgt_words: int, hint: str = HINT) -> None:
    """Refuse a link of one line (`where` names it) past a pair of `src_words` and `tgt_words` words."""
    for i, j in sorted(links):
        if i >= src_words or j >= tgt_words:
            raise UserError(
                f"{where}: link {i}-{j} (from 0) points past the sentence pair, which has {src_words} source "
                f"and {tgt_words} target words; {hint}"
            )


def sentence_lengths(src: Path, tgt: Path) -> list[Link]:
    """The words of each sentence pair of two line-aligned files of whitespace-tokenized text, (source,
    target); another number of lines is a UserError."""
    src_lines, tgt_lines = read_lines(src), read_lines(tgt)
    if len(src_lines) != len(tgt_lines):
        raise UserError(f"{src} has {len(src_lines)} lines but {tgt} has {len(tgt_lines)}; they must align")
    return [(len(s.split()), len(t.split())) for s, t in zip(src_lines, tgt_lines, strict=True)]


def format_links(links: Iterable[Link]) -> str:
    """One Pharaoh line: `i-j` for every link, sorted by source then target word."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def pharaoh_text(lines: Iterable[Iterable[Link]]) -> str:
    """Pharaoh lines, one per sentence pair: 0-based, source-target, sorted."""
    return "".join(format_links(line) + "\n" for line in lines)
