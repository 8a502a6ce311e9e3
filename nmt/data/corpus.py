"""Parallel text on disk → cleaned, line-aligned (source, target) sentences, read in chunks.

Nothing here holds a whole corpus: `count_lines` checks a split with a pass over its bytes (UTF-8, TSV tabs,
equal line counts) before anything is trained on it, and `pair_chunks` streams its cleaned pairs a chunk at a
time. Only `read_files` collects a (small) split in lists: the validation and test sets.
"""

from __future__ import annotations

import contextlib
import html
import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from nmt.errors import UserError

log = logging.getLogger(__name__)

SPLIT_NAMES = {"train": ("train",), "valid": ("valid", "val", "dev"), "test": ("test", "test2016")}


def data_layout(lang: str) -> str:
    """The names a corpus directory's files of language `lang` may have, in words, e.g. 'train.de, valid.de
    (or val.de, dev.de), test.de (or test2016.de)'."""
    splits = [[f"{stem}.{lang}" for stem in stems] for stems in SPLIT_NAMES.values()]
    return ", ".join(first + (f" (or {', '.join(others)})" if others else "") for first, *others in splits)


@dataclass(frozen=True)
class ParallelText:
    """Aligned sentences: `src[i]` translates to `tgt[i]`."""

    src: list[str]
    tgt: list[str]

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class SplitFiles:
    """Where one split lives: a source/target file pair, or one TSV file (source, target columns)."""

    src: Path
    tgt: Path | None  # None: `src` is a TSV file holding both sides


SKIP_HINT = "set data.skip_bad_lines=true to drop such lines"
CHUNK_LINES = 65536  # lines read (and cleaned, encoded) at a time
_BLOCK = 1 << 24  # bytes read at a time when checking a file
_BOM = "\ufeff".encode()


def normalize(line: str, unescape: bool = False) -> str:
    """Strip the line and collapse every run of whitespace (tabs, NBSP, CR …) into one space; with
    `unescape`, its HTML entities (`&amp;`, `&#39;`) first read as the characters they stand for (once: a
    corpus' `&amp;amp;` stays `&amp;`)."""
    return " ".join((html.unescape(line) if unescape else line).split())


def decode_lines(
    lines: list[bytes],
    name: str,
    first: int,
    skip_bad_lines: bool = False,
    skip_hint: str = SKIP_HINT,
    unescape: bool = False,
) -> tuple[list[str], list[int]]:
    """Normalized text of raw lines numbered from `first` in `name` (a file, or standard input), their HTML
    entities read as characters where `unescape` (a corpus' lines, as data.unescape_entities says), and the
    numbers of the lines that are not valid UTF-8.

    Such a line raises UserError naming the file and line (and how to skip such lines), unless
    `skip_bad_lines` makes it empty (dropped with its partner: the alignment holds).
    """
    try:
        return [normalize(line.decode("utf-8"), unescape) for line in lines], []
    except UnicodeDecodeError:
        pass
    text, bad = [], []
    for number, line in enumerate(lines, start=first):
        try:
            text.append(normalize(line.decode("utf-8"), unescape))
        except UnicodeDecodeError as err:
            if not skip_bad_lines:
                raise UserError(
                    f"{name} line {number} is not valid UTF-8 (byte {err.start}); fix it or {skip_hint}"
                ) from err
            text.append("")
            bad.append(number)
    return text, bad


def line_chunks(handle: BinaryIO, size: int) -> Iterator[list[bytes]]:
    """The lines of a binary stream, `size` at a time, newlines kept and a leading byte order mark removed.

    Lines end at b"\\n" only (never at CR or Unicode line separators); a last line without one counts.
    """
    for number, chunk in enumerate(iter(lambda: list(itertools.islice(handle, size)), [])):
        if number == 0:
            chunk[0] = chunk[0].removeprefix(_BOM)
        yield chunk


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[BinaryIO]:
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from err
    with handle:
        yield handle


def count_lines(files: SplitFiles, skip_bad_lines: bool = False) -> int:
    """Lines of a split, checked without holding them: raises UserError for a line that is not valid UTF-8
    (unless `skip_bad_lines`), a TSV line without a tab, or source and target files of different lengths."""
    lines = _scan(files.src, skip_bad_lines)
    if files.tgt is None:
        _check_tabs(files.src)
        return lines
    tgt_lines = _scan(files.tgt, skip_bad_lines)
    if lines != tgt_lines:
        raise UserError(
            f"{files.src} has {lines} lines but {files.tgt} has {tgt_lines}; "
            f"the files of a split must be line-aligned"
        )
    return lines


def file_lines(path: Path, skip_bad_lines: bool = False) -> int:
    """Lines of one text file, checked as `count_lines` checks a split's files."""
    return _scan(path, skip_bad_lines)


def _scan(path: Path, skip_bad_lines: bool) -> int:
    """Lines of a file, read in blocks; each block of whole lines is checked to be UTF-8."""
    lines, tail = 0, b""
    with _opened(path) as handle:
        while block := handle.read(_BLOCK):
            block = tail + block
            cut = block.rfind(b"\n") + 1
            block, tail = block[:cut], block[cut:]
            if not skip_bad_lines:
                _check_utf8(block, path, lines)
            lines += block.count(b"\n")
    if tail and not skip_bad_lines:
        _check_utf8(tail, path, lines)
    return lines + (1 if tail else 0)


def _check_utf8(block: bytes, path: Path, lines_before: int) -> None:
    try:
        block.decode("utf-8")
    except UnicodeDecodeError:
        decode_lines(block.split(b"\n"), str(path), lines_before + 1)  # raises, naming the line


def _check_tabs(path: Path) -> None:
    """Every line of a TSV corpus that is not blank (or skipped as invalid UTF-8) needs a tab."""
    with _opened(path) as handle:
        for number, line in enumerate(itertools.chain.from_iterable(line_chunks(handle, CHUNK_LINES)), 1):
            if b"\t" in line:
                continue
            try:
                blank = not line.decode("utf-8").strip()
            except UnicodeDecodeError:  # skipped (data.skip_bad_lines): the scan raised otherwise
                continue
            if not blank:
                raise UserError(
                    f"{path} line {number} has no tab; a TSV corpus needs source<TAB>target per line"
                )


@dataclass(frozen=True)
class Pairs:
    """One chunk of a split: its cleaned pairs with both sides non-empty, and what was dropped."""

    src: list[str]
    tgt: list[str]
    lines: int  # lines read
    bad: int  # pairs dropped for a line that is not valid UTF-8 (only with skip_bad_lines)
    numbers: list[int]  # the line of the split (from 0) each pair comes from


def pair_chunks(
    files: SplitFiles, skip_bad_lines: bool = False, size: int = CHUNK_LINES, unescape: bool = True
) -> Iterator[Pairs]:
    """The cleaned pairs of a split, `size` lines at a time (see `count_lines` for the checks), HTML entities
    read as characters unless `unescape` is false."""
    first = 1
    for raw_src, raw_tgt in raw_pair_chunks(files, size):
        tgt_name = str(files.tgt or files.src)
        src, bad_src = decode_lines(raw_src, str(files.src), first, skip_bad_lines, unescape=unescape)
        tgt, bad_tgt = decode_lines(raw_tgt, tgt_name, first, skip_bad_lines, unescape=unescape)
        bad = len(set(bad_src) | set(bad_tgt))
        numbers = list(range(first - 1, first - 1 + len(raw_src)))
        first += len(raw_src)
        if "" in src or "" in tgt:  # a quick scan first: most chunks keep every pair
            kept = [i for i, (s, t) in enumerate(zip(src, tgt, strict=True)) if s and t]
            src, tgt, numbers = [src[i] for i in kept], [tgt[i] for i in kept], [numbers[i] for i in kept]
        yield Pairs(src, tgt, len(raw_src), bad, numbers)


def raw_pair_chunks(files: SplitFiles, size: int = CHUNK_LINES) -> Iterator[tuple[list[bytes], list[bytes]]]:
    """The raw source and target lines of a split, `size` lines at a time (a TSV line split at its tabs)."""
    with _opened(files.src) as src:
        if files.tgt is None:
            for chunk in line_chunks(src, size):
                columns = [line.split(b"\t", 2) for line in chunk]
                yield [c[0] for c in columns], [c[1] if len(c) > 1 else b"" for c in columns]
            return
        with _opened(files.tgt) as tgt:
            yield from zip(line_chunks(src, size), line_chunks(tgt, size), strict=True)


@dataclass
class Tally:
    """Counts over a split's chunks, reported once it has been read."""

    lines: int = 0
    kept: int = 0
    bad: int = 0

    def add(self, pairs: Pairs) -> None:
        self.lines += pairs.lines
        self.kept += len(pairs.src)
        self.bad += pairs.bad

    def report(self, split: str, files: SplitFiles) -> None:
        """Warn about skipped and dropped lines; a split without any pair is a UserError."""
        if self.bad:
            log.warning("%s: skipped %d lines that are not valid UTF-8", split, self.bad)
        if not self.kept:
            raise no_pairs_error(files, self.lines)
        if self.kept < self.lines:
            log.warning(
                "%s: dropped %d of %d pairs with an empty side", split, self.lines - self.kept, self.lines
            )


def no_pairs_error(files: SplitFiles, lines: int) -> UserError:
    """The error for a split whose `lines` lines read hold no pair with both sides."""
    names = str(files.src) if files.tgt is None else f"{files.src} / {files.tgt}"
    return UserError(f"{names} holds no sentence pairs (of {lines} lines, none with both sides)")


def read_files(
    files: SplitFiles, split: str, skip_bad_lines: bool = False, unescape: bool = True
) -> ParallelText:
    """Read, check and clean a (small) file pair or TSV file into lists (HTML entities read as characters
    unless `unescape` is false); pairs with an empty side are dropped and counted."""
    count_lines(files, skip_bad_lines)
    text, tally = ParallelText([], []), Tally()
    for pairs in pair_chunks(files, skip_bad_lines, unescape=unescape):
        text.src.extend(pairs.src)
        text.tgt.extend(pairs.tgt)
        tally.add(pairs)
    tally.report(split, files)
    return text
