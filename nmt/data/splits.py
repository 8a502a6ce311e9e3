"""Where a run's split lives and what it holds, for every run alike: a line-aligned file per language
(`train.de`, `train.en`, …), one TSV file of a run's one pair (source, target columns) or one JSON Lines file
(`{"en": …, "de": …}` a line); checked, and read as the cleaned sentence pairs of each direction, a chunk at a
time (nmt/data/corpus.py reads the lines)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config.multilingual import Direction, RunDirections
from nmt.config.sections import DataConfig
from nmt.data.cache import file_identity
from nmt.data.corpus import (
    CHUNK_LINES,
    SPLIT_NAMES,
    Pairs,
    ParallelText,
    SplitFiles,
    Tally,
    count_lines,
    decode_lines,
    file_lines,
    line_chunks,
    normalize,
    pair_chunks,
    raw_pair_chunks,
)
from nmt.errors import UserError

JSONL_EXAMPLE = '{"en": "A dog.", "de": "Ein Hund."}'


@dataclass(frozen=True)
class SplitCounts:
    """What checking a split found: the lines (JSON Lines: the records) holding each language and each
    direction's two languages."""

    languages: dict[str, int]
    directions: dict[Direction, int]


@dataclass(frozen=True)
class LanguageSplit:
    """One split of a run's corpus: a line-aligned file per language (`files`), one TSV file of the run's one
    pair (`tsv`), or one JSON Lines file (`jsonl`)."""

    name: str  # train, valid or test
    files: dict[str, Path] = field(default_factory=dict)
    jsonl: Path | None = None
    tsv: Path | None = None
    unescape: bool = True  # its sentences' HTML entities read as characters (data.unescape_entities)

    def paths(self) -> list[Path]:
        """The split's files."""
        whole = self.jsonl or self.tsv
        return [whole] if whole else list(self.files.values())

    def identity(self) -> list[dict[str, Any]]:
        """What the cache recognises the split's files by (whatever order the directions list them in)."""
        whole = self.jsonl or self.tsv
        paths = [whole] if whole else [self.files[lang] for lang in sorted(self.files)]
        return [file_identity(path) for path in paths]

    def pair_files(self, direction: Direction) -> SplitFiles:
        """The files of `direction`'s pairs, as errors name them (a TSV or JSON Lines file stands alone)."""
        whole = self.jsonl or self.tsv
        if whole:
            return SplitFiles(whole, None)
        return SplitFiles(self.files[direction.src], self.files[direction.tgt])

    def count(self, directions: tuple[Direction, ...], skip_bad_lines: bool) -> SplitCounts:
        """Check the split and count its lines: UserError for files of unequal lengths, a line that is not
        valid UTF-8 (unless `skip_bad_lines`), a TSV line without a tab, a JSON Lines line that is not an
        object of sentences, a direction without a line holding both its languages."""
        if self.jsonl:
            return _count_jsonl(self.jsonl, directions, skip_bad_lines)
        if self.tsv:
            (direction,) = directions
            rows = count_lines(SplitFiles(self.tsv, None), skip_bad_lines)
            return SplitCounts({direction.src: rows, direction.tgt: rows}, {direction: rows})
        lines = {lang: file_lines(path, skip_bad_lines) for lang, path in self.files.items()}
        first, *others = lines
        for lang in others:
            if lines[lang] != lines[first]:
                raise UserError(
                    f"{self.files[first]} has {lines[first]} lines but {self.files[lang]} has {lines[lang]}: "
                    f"the files of a split must be line-aligned across its languages (or use a .jsonl file)"
                )
        return SplitCounts(lines, {direction: lines[first] for direction in directions})

    def pairs(self, direction: Direction, skip_bad_lines: bool) -> Iterator[Pairs]:
        """The cleaned pairs of `direction`, a chunk at a time; `Pairs.lines` counts the lines (records)
        holding both languages."""
        if self.jsonl:
            return _jsonl_pairs(self.jsonl, direction, skip_bad_lines, self.unescape)
        return pair_chunks(self.pair_files(direction), skip_bad_lines, unescape=self.unescape)

    def sentences(self, lang: str, rows: np.ndarray, partners: set[str]) -> list[str]:
        """The cleaned sentences of `lang` at `rows` (sorted) among the lines that hold it, those that are
        not empty and (in line-aligned files) pair with a non-empty sentence of one of `partners` (the
        languages it is translated from or into); a line that is not valid UTF-8 counts as empty."""
        if self.jsonl:  # counting found a pair of every direction
            return _jsonl_sentences(self.jsonl, lang, rows, self.unescape)
        if self.tsv:
            columns = list(self.files)  # the languages of the TSV file's columns
            return _tsv_sentences(self.tsv, columns.index(lang), rows, self.unescape)
        partner_files = [self.files[p] for p in sorted(partners)]
        return _file_sentences(self.files[lang], partner_files, rows, self.unescape)


def language_split(cfg: DataConfig, split: str, directions: RunDirections | None = None) -> LanguageSplit:
    """Locate the files of `split` ('train', 'valid' or 'test') of the run `cfg` describes (of `directions`
    instead of its own, when given), to be read as `cfg` says (data.unescape_entities), or raise UserError
    naming what is missing and the setting that names it."""
    located = _located(cfg, split, directions or cfg.directions)
    return dataclasses.replace(located, unescape=cfg.unescape_entities)


def _located(cfg: DataConfig, split: str, directions: RunDirections) -> LanguageSplit:
    explicit = getattr(cfg, split)
    if explicit:
        path = Path(explicit)
        if path.suffix == ".jsonl":
            if not path.is_file():
                raise UserError(f"data.{split}: JSON Lines file {path} does not exist")
            return LanguageSplit(split, jsonl=path)
        if path.suffix == ".tsv":
            return _tsv(split, path, directions)
        return _language_files(split, path.parent, path.name, directions, f"data.{split}={explicit}")
    languages = _languages(directions)
    if cfg.dir is None:
        raise UserError(
            f"no {split} data: pass --data DIR (holding {split}.{languages[0]}) or set data.{split}"
        )
    directory = Path(cfg.dir)
    if directory.is_file():
        raise UserError(f"--data {directory} is a file; pass the directory holding {split}.{languages[0]}")
    if not directory.is_dir():
        raise UserError(
            f"data directory {directory} does not exist; check --data or run `nmt download` first"
        )
    for stem in SPLIT_NAMES[split]:
        if any((directory / f"{stem}.{lang}").exists() for lang in languages):
            return _language_files(split, directory, stem, directions, f"--data {directory}")
    found = sorted(p.name for p in directory.iterdir())[:12]
    if directions.tagged:
        names = " or ".join(f"{stem}.L" for stem in SPLIT_NAMES[split])
        expected = f"{names} for each language L of {', '.join(languages)}"
    else:
        names = " or ".join(f"{stem}.{languages[0]}" for stem in SPLIT_NAMES[split])
        expected = f"{names} (and .{languages[1]})"
    raise UserError(
        f"no {split} files in {directory}: expected {expected}; found {found}; check {_option(directions)}"
    )


def _languages(directions: RunDirections) -> list[str]:
    """The run's languages in the order its directions name them (a bilingual run: source, target)."""
    return list(dict.fromkeys(lang for d in directions.pairs for lang in (d.src, d.tgt)))


def _option(directions: RunDirections, lang: str | None = None) -> str:
    """What names the run's languages (or `lang`): data.multilingual.directions, else the pair's flags."""
    if directions.tagged:
        return "data.multilingual.directions"
    if lang is None:
        return "--src-lang/--tgt-lang"
    return "--src-lang" if lang == directions.pairs[0].src else "--tgt-lang"


def _tsv(split: str, path: Path, directions: RunDirections) -> LanguageSplit:
    if len(directions.pairs) > 1:
        raise UserError(
            f"data.{split}={path}: a run of several directions reads a file per language (a path prefix) or "
            f"a .jsonl file, not a .tsv file of one pair"
        )
    if not path.is_file():
        raise UserError(f"data.{split}: TSV file {path} does not exist")
    (direction,) = directions.pairs
    return LanguageSplit(split, files=dict.fromkeys((direction.src, direction.tgt), path), tsv=path)


def _language_files(
    split: str, directory: Path, stem: str, directions: RunDirections, origin: str
) -> LanguageSplit:
    files = {lang: directory / f"{stem}.{lang}" for lang in _languages(directions)}
    missing = [lang for lang, path in files.items() if not path.is_file()]
    if missing:
        paths = ", ".join(str(files[lang]) for lang in missing)
        options = " and ".join(dict.fromkeys(_option(directions, lang) for lang in missing))
        verb = "does" if len(missing) == 1 else "do"
        raise UserError(f"{paths} {verb} not exist ({origin}); check the path and {options}")
    return LanguageSplit(split, files=files)


def read_directions(
    cfg: DataConfig, split: str, directions: RunDirections | None = None
) -> dict[Direction, ParallelText]:
    """Read, check and clean a (small) split: each direction's pairs (the run's, or `directions`), in memory
    (pairs with an empty side dropped and counted in the log)."""
    directions = directions or cfg.directions
    located = language_split(cfg, split, directions)
    located.count(directions.pairs, cfg.skip_bad_lines)
    texts = {}
    for direction in directions.pairs:
        text, tally = ParallelText([], []), Tally()
        for pairs in located.pairs(direction, cfg.skip_bad_lines):
            text.src.extend(pairs.src)
            text.tgt.extend(pairs.tgt)
            tally.add(pairs)
        tally.report(directions.label(split, direction), located.pair_files(direction))
        texts[direction] = text
    return texts


def read_direction(cfg: DataConfig, direction: Direction, split: str) -> ParallelText:
    """One direction's pairs of a (small) split, whether the run was trained on it or not: any two of the
    languages of its files."""
    one = dataclasses.replace(cfg.directions, pairs=(direction,), weights={})
    return read_directions(cfg, split, one)[direction]


def jsonl_records(
    path: Path, skip_bad_lines: bool, unescape: bool = True
) -> Iterator[tuple[list[dict[str, str] | None], int]]:
    """The lines of a JSON Lines file a chunk at a time: each line as a mapping of language codes to cleaned
    sentences (their HTML entities read as characters where `unescape`; None for a blank line, or one
    skipped as invalid UTF-8), and how many were skipped so."""
    first = 1
    with open(path, "rb") as handle:
        for chunk in line_chunks(handle, CHUNK_LINES):
            text, bad = decode_lines(chunk, str(path), first, skip_bad_lines)
            records = [_record(line, path, number, unescape) for number, line in enumerate(text, start=first)]
            yield records, len(bad)
            first += len(chunk)


def _record(line: str, path: Path, number: int, unescape: bool) -> dict[str, str] | None:
    if not line:
        return None
    try:
        record = json.loads(line)
    except ValueError as err:
        problem = f"not JSON ({str(err).split(':')[0]})"
    else:
        if isinstance(record, dict) and all(isinstance(value, str) for value in record.values()):
            return {lang: normalize(sentence, unescape) for lang, sentence in record.items()}
        problem = "not an object of sentences"
    raise UserError(
        f"{path} line {number} is {problem}; a JSON Lines corpus holds one object of language codes and "
        f"sentences per line, e.g. {JSONL_EXAMPLE}"
    )


def _count_jsonl(path: Path, directions: tuple[Direction, ...], skip_bad_lines: bool) -> SplitCounts:
    languages = {lang: 0 for d in directions for lang in (d.src, d.tgt)}
    pairs = dict.fromkeys(directions, 0)
    for records, _ in jsonl_records(path, skip_bad_lines):
        for record in records:
            for lang in languages.keys() & (record or {}).keys():
                languages[lang] += 1
            for direction in directions:
                pairs[direction] += record is not None and direction.src in record and direction.tgt in record
    for direction, count in pairs.items():
        if not count:
            raise UserError(
                f"{path}: no line holds both {direction.src} and {direction.tgt} (direction "
                f"{direction.name}); a JSON Lines corpus holds e.g. {JSONL_EXAMPLE}"
            )
    return SplitCounts(languages, pairs)


def _jsonl_pairs(path: Path, direction: Direction, skip_bad_lines: bool, unescape: bool) -> Iterator[Pairs]:
    src, tgt, first = direction.src, direction.tgt, 0
    for records, bad in jsonl_records(path, skip_bad_lines, unescape):
        both = [(i, r) for i, r in enumerate(records, start=first) if r is not None and src in r and tgt in r]
        kept = [(i, r) for i, r in both if r[src] and r[tgt]]
        numbers = [i for i, _ in kept]  # the line of the file (from 0) of each pair
        yield Pairs([r[src] for _, r in kept], [r[tgt] for _, r in kept], len(both) + bad, bad, numbers)
        first += len(records)


def _file_sentences(path: Path, partners: list[Path], rows: np.ndarray, unescape: bool) -> list[str]:
    found, first = [], 0
    with contextlib.ExitStack() as files:
        handles = [files.enter_context(open(p, "rb")) for p in (path, *partners)]
        for own, *others in zip(*(line_chunks(h, CHUNK_LINES) for h in handles), strict=False):
            lo, hi = np.searchsorted(rows, [first, first + len(own)])
            picked = [row - first for row in rows[lo:hi].tolist()]
            found += _paired(
                [own[r] for r in picked], [[other[r] for r in picked] for other in others], unescape
            )
            first += len(own)
    return found


def _tsv_sentences(path: Path, column: int, rows: np.ndarray, unescape: bool) -> list[str]:
    found, first = [], 0
    for chunk in raw_pair_chunks(SplitFiles(path, None)):
        lo, hi = np.searchsorted(rows, [first, first + len(chunk[0])])
        picked = rows[lo:hi].tolist()
        own, other = chunk[column], chunk[1 - column]
        found += _paired([own[r - first] for r in picked], [[other[r - first] for r in picked]], unescape)
        first += len(chunk[0])
    return found


def _paired(own: list[bytes], partners: list[list[bytes]], unescape: bool) -> list[str]:
    """The cleaned non-empty sentences of `own` whose line holds text in one of `partners` too."""
    text, _ = decode_lines(own, "", 1, skip_bad_lines=True, unescape=unescape)
    others = [decode_lines(lines, "", 1, skip_bad_lines=True)[0] for lines in partners]
    return [sentence for i, sentence in enumerate(text) if sentence and any(o[i] for o in others)]


def _jsonl_sentences(path: Path, lang: str, rows: np.ndarray, unescape: bool) -> list[str]:
    wanted, found, seen = set(rows.tolist()), [], 0
    for records, _ in jsonl_records(path, skip_bad_lines=True, unescape=unescape):
        for record in records:
            if record is not None and lang in record:
                if seen in wanted and record[lang]:
                    found.append(record[lang])
                seen += 1
    return found
