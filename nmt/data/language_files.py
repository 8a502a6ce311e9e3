"""The text of a multilingual run on disk: one split as a line-aligned file per language (`train.en`,
`train.de`, …) or as one JSON Lines file (`{"en": …, "de": …}` a line), checked, and read as the cleaned
sentence pairs of each direction, a chunk at a time (nmt/data/corpus.py reads a bilingual split)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nmt.config.multilingual import Direction, MultilingualConfig
from nmt.config.sections import DataConfig
from nmt.data.cache import file_identity
from nmt.data.corpus import (
    CHUNK_LINES,
    SPLIT_NAMES,
    Pairs,
    ParallelText,
    SplitFiles,
    Tally,
    decode_lines,
    file_lines,
    line_chunks,
    pair_chunks,
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
    """One split of a multilingual corpus: a line-aligned file per language (`files`), or one JSON Lines file
    (`jsonl`)."""

    name: str  # train, valid or test
    files: dict[str, Path] = field(default_factory=dict)
    jsonl: Path | None = None

    def identity(self) -> list[dict[str, Any]]:
        """What the cache recognises the split's files by."""
        paths = [self.jsonl] if self.jsonl else [self.files[lang] for lang in sorted(self.files)]
        return [file_identity(path) for path in paths]

    def pair_files(self, direction: Direction) -> SplitFiles:
        """The files of `direction`'s pairs, as errors name them (a JSON Lines file stands alone)."""
        if self.jsonl:
            return SplitFiles(self.jsonl, None)
        return SplitFiles(self.files[direction.src], self.files[direction.tgt])

    def count(self, directions: tuple[Direction, ...], skip_bad_lines: bool) -> SplitCounts:
        """Check the split and count its lines: UserError for files of unequal lengths, a line that is not
        valid UTF-8 (unless `skip_bad_lines`) or not a JSON object of sentences, a direction without a
        line holding both its languages."""
        if self.jsonl:
            return _count_jsonl(self.jsonl, directions, skip_bad_lines)
        lines = {lang: file_lines(path, skip_bad_lines) for lang, path in self.files.items()}
        first, *others = sorted(lines)
        for lang in others:
            if lines[lang] != lines[first]:
                raise UserError(
                    f"{self.files[first]} has {lines[first]} lines but {self.files[lang]} has {lines[lang]}: "
                    f"a multilingual corpus's files must be line-aligned across its languages (or use a "
                    f".jsonl file)"
                )
        return SplitCounts(lines, {direction: lines[first] for direction in directions})

    def pairs(self, direction: Direction, skip_bad_lines: bool) -> Iterator[Pairs]:
        """The cleaned pairs of `direction`, a chunk at a time; `Pairs.lines` counts the lines (records)
        holding both languages."""
        if self.jsonl:
            return _jsonl_pairs(self.jsonl, direction, skip_bad_lines)
        return pair_chunks(self.pair_files(direction), skip_bad_lines)


def language_split(cfg: DataConfig, split: str) -> LanguageSplit:
    """Locate the files of `split` ('train', 'valid' or 'test') of a multilingual run, or raise UserError: a
    language without its file, a `.tsv` file."""
    ml = multilingual(cfg)
    explicit = getattr(cfg, split)
    if explicit:
        path = Path(explicit)
        if path.suffix == ".jsonl":
            if not path.is_file():
                raise UserError(f"data.{split}: JSON Lines file {path} does not exist")
            return LanguageSplit(split, jsonl=path)
        if path.suffix == ".tsv":
            raise UserError(
                f"data.{split}={explicit}: a multilingual run reads a file per language (a path prefix) or a "
                f".jsonl file, not a .tsv file of one pair"
            )
        return _language_files(split, path.parent, path.name, ml, f"data.{split}={explicit}")
    if cfg.dir is None:
        raise UserError(
            f"no {split} data: pass --data DIR (holding {split}.L for each language) or set data.{split}"
        )
    directory = Path(cfg.dir)
    if not directory.is_dir():
        raise UserError(f"data directory {directory} does not exist or is not a directory; check --data")
    for stem in SPLIT_NAMES[split]:
        if any((directory / f"{stem}.{lang}").exists() for lang in ml.languages):
            return _language_files(split, directory, stem, ml, f"--data {directory}")
    names = " or ".join(f"{stem}.L" for stem in SPLIT_NAMES[split])
    raise UserError(
        f"no {split} files in {directory}: expected {names} for each language L of {', '.join(ml.languages)}"
    )


def multilingual(cfg: DataConfig) -> MultilingualConfig:
    """The `data.multilingual` section of a multilingual run's config."""
    if cfg.multilingual is None:
        raise ValueError("not a multilingual config: no data.multilingual section")
    return cfg.multilingual


def _language_files(
    split: str, directory: Path, stem: str, ml: MultilingualConfig, origin: str
) -> LanguageSplit:
    files = {lang: directory / f"{stem}.{lang}" for lang in ml.languages}
    missing = [lang for lang, path in files.items() if not path.is_file()]
    if missing:
        have = sorted(set(ml.languages) - set(missing))
        found = f" (found {', '.join(f'{stem}.{lang}' for lang in have)})" if have else ""
        raise UserError(
            f"no {split} file for language {', '.join(missing)}: expected "
            f"{', '.join(str(files[lang]) for lang in missing)} ({origin}){found}; check "
            f"data.multilingual.directions"
        )
    return LanguageSplit(split, files=files)


def read_directions(cfg: DataConfig, split: str) -> dict[Direction, ParallelText]:
    """Read, check and clean a (small) split of a multilingual run: each direction's pairs, in memory."""
    ml = multilingual(cfg)
    located = language_split(cfg, split)
    located.count(ml.pairs, cfg.skip_bad_lines)
    texts = {}
    for direction in ml.pairs:
        text, tally = ParallelText([], []), Tally()
        for pairs in located.pairs(direction, cfg.skip_bad_lines):
            text.src.extend(pairs.src)
            text.tgt.extend(pairs.tgt)
            tally.add(pairs)
        tally.report(f"{split} {direction.name}", located.pair_files(direction))
        texts[direction] = text
    return texts


def read_direction(cfg: DataConfig, direction: Direction, split: str) -> ParallelText:
    """One direction's pairs of a (small) split of a multilingual run, whether the run was trained on it or
    not: any two of the languages of its files."""
    one = dataclasses.replace(multilingual(cfg), directions=(direction.name,), weights=None)
    return read_directions(dataclasses.replace(cfg, multilingual=one), split)[direction]


def jsonl_records(path: Path, skip_bad_lines: bool) -> Iterator[tuple[list[dict[str, str] | None], int]]:
    """The lines of a JSON Lines file a chunk at a time: each line as a mapping of language codes to cleaned
    sentences (None for a blank line, or one skipped as invalid UTF-8), and how many were skipped so."""
    first = 1
    with open(path, "rb") as handle:
        for chunk in line_chunks(handle, CHUNK_LINES):
            text, bad = decode_lines(chunk, str(path), first, skip_bad_lines)
            yield [_record(line, path, number) for number, line in enumerate(text, start=first)], len(bad)
            first += len(chunk)


def _record(line: str, path: Path, number: int) -> dict[str, str] | None:
    if not line:
        return None
    try:
        record = json.loads(line)
    except ValueError as err:
        problem = f"not JSON ({str(err).split(':')[0]})"
    else:
        if isinstance(record, dict) and all(isinstance(value, str) for value in record.values()):
            return {lang: " ".join(sentence.split()) for lang, sentence in record.items()}
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


def _jsonl_pairs(path: Path, direction: Direction, skip_bad_lines: bool) -> Iterator[Pairs]:
    src, tgt, first = direction.src, direction.tgt, 0
    for records, bad in jsonl_records(path, skip_bad_lines):
        both = [(i, r) for i, r in enumerate(records, start=first) if r is not None and src in r and tgt in r]
        kept = [(i, r) for i, r in both if r[src] and r[tgt]]
        numbers = [i for i, _ in kept]  # the line of the file (from 0) of each pair
        yield Pairs([r[src] for _, r in kept], [r[tgt] for _, r in kept], len(both) + bad, bad, numbers)
        first += len(records)
