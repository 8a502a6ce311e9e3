"""Glossaries: which source terms must be translated how, read from a UTF-8 TSV file and found in sentences.

A glossary file holds one entry a line, `SOURCE<TAB>TARGET`, with an optional third column `match-case`:

    Fahrrad	bicycle
    Deutsche Bahn	Deutsche Bahn	match-case
    %1$s	%1$s

Terms may be several words; a target equal to its source means "do not translate". Blank lines are skipped.
A term is found on words: runs of letters and digits, and each other visible character on its own, each
normalised as the tokenizer normalises text (sentencepiece's NFKC: `Ｂｅｒｌｉｎ` is `Berlin`) and compared
case-insensitively unless its entry says `match-case`; the spacing between words is not compared. Where found
terms overlap the longest wins (then the first); every occurrence of a term is found, however often it
appears. A multilingual run reads `NAME.SRC-TGT.tsv` beside `NAME.tsv` for the direction SRC → TGT, when
there is one (`for_direction`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nmt.data.special_tokens import UNK
from nmt.data.tokenizer import Tokenizer
from nmt.errors import UserError

MATCH_CASE = "match-case"  # the third column that makes an entry case-sensitive
WORD = re.compile(r"\w+|[^\w\s]")  # a word: letters and digits, or one other visible character
FORMAT = f"SOURCE<TAB>TARGET, or SOURCE<TAB>TARGET<TAB>{MATCH_CASE}"

Normalize = Callable[[str], str]  # a word as the tokenizer normalises it


@dataclass(frozen=True)
class Term:
    """One glossary entry: a source term, its translation, whether its case must match, and its line."""

    source: str
    target: str
    match_case: bool = False
    line: int = 0


@dataclass(frozen=True)
class TermMatch:
    """A term found in a text: characters `start`:`end` of it are the term's source."""

    start: int
    end: int
    term: Term


def read_glossary(path: Path) -> list[Term]:
    """The entries of the glossary file `path`; a UserError naming the file (and line) for a file that cannot
    be read or is not UTF-8, and for a line that is not an entry."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise UserError(f"cannot read the glossary {path}: {err.strerror}") from err
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise UserError(
            f"the glossary {path} is not UTF-8 (byte {data[err.start]:#04x} on line {line}); save it as UTF-8"
        ) from err
    return parse_glossary(text.split("\n"), str(path))


def parse_glossary(lines: Sequence[str], name: str) -> list[Term]:
    """The entries of a glossary's `lines` (`name` names it in errors), blank lines skipped."""
    terms, seen = [], dict[tuple[str, bool], Term]()
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        term = _entry(line, f"{name} line {number}")
        term = Term(term.source, term.target, term.match_case, number)
        key = (term.source if term.match_case else term.source.casefold(), term.match_case)
        if key in seen and seen[key].target != term.target:
            raise UserError(
                f"{name} line {number}: {term.source!r} is already translated as {seen[key].target!r} on "
                f"line {seen[key].line}; keep one translation per term"
            )
        if key not in seen:
            seen[key] = term
            terms.append(term)
    return terms


def _entry(line: str, where: str) -> Term:
    """The entry of one non-blank line; `where` names it in errors."""
    columns = line.split("\t")
    if len(columns) < 2:
        raise UserError(f"{where}: no tab between the source and target terms; write {FORMAT}")
    if len(columns) > 3:
        raise UserError(f"{where}: {len(columns)} tab-separated columns; write {FORMAT}")
    source, target = " ".join(columns[0].split()), " ".join(columns[1].split())
    flag = columns[2].strip() if len(columns) == 3 else ""
    if not source:
        raise UserError(f"{where}: the source term is empty; write {FORMAT}")
    if not target:
        raise UserError(f"{where}: the target term is empty (a term kept as it is repeats its source)")
    if flag not in ("", MATCH_CASE):
        raise UserError(f"{where}: third column {flag!r}; it may only say {MATCH_CASE} (or be left out)")
    return Term(source, target, flag == MATCH_CASE)


def unwritable(terms: Sequence[Term], tokenizer: Tokenizer) -> Term | None:
    """The first of `terms` whose target `tokenizer`'s vocabulary cannot write (a character it lacks)."""
    for term, ids in zip(terms, tokenizer.encode([term.target for term in terms]), strict=True):
        if UNK in ids:
            return term
    return None


def nfkc(word: str) -> str:
    """A word as a sentencepiece model trained by nmt normalises it: what finds terms where no tokenizer is at
    hand (the sources of a system's hypotheses file)."""
    return unicodedata.normalize("NFKC", word)


def for_direction(path: Path, src: str, tgt: str) -> Path:
    """The glossary of direction `src` → `tgt`: `NAME.SRC-TGT.tsv` beside `path` (`NAME.tsv`) when it exists,
    else `path` itself (a bilingual run, whose languages may be unknown, passes "" and reads `path`)."""
    if not src or not tgt:
        return path
    own = path.with_name(f"{path.stem}.{src}-{tgt}{path.suffix}")
    return own if own.is_file() else path


class TermFinder:
    """Finds a glossary's terms in texts, on words normalised by `normalize` (the tokenizer's normalisation
    of one word; see the module)."""

    def __init__(self, terms: Sequence[Term], normalize: Normalize) -> None:
        self.normalize = normalize
        self._keys: dict[str, str] = {}  # a word → its normalised form, as computed so far
        self.entries: dict[tuple[str, ...], list[Term]] = {}  # key of a term's words → its terms
        for term in terms:
            words = tuple(self._key(word.group(), term.match_case) for word in WORD.finditer(term.source))
            self.entries.setdefault(words, []).append(term)
        self.longest = max((len(words) for words in self.entries), default=0)

    def _key(self, word: str, match_case: bool) -> str:
        if word not in self._keys:
            self._keys[word] = self.normalize(word)
        normalized = self._keys[word]
        return normalized if match_case else normalized.casefold()

    def words(self, text: str, match_case: bool) -> list[str]:
        """The words of `text` as terms are compared: normalised, and case-folded unless `match_case`."""
        return [self._key(word.group(), match_case) for word in WORD.finditer(text)]

    def find(self, text: str) -> list[TermMatch]:
        """The terms found in `text`, in order, none overlapping: of overlapping candidates the one of most
        words wins, then the one that starts first, then one whose case must match."""
        if not self.entries:
            return []
        words = list(WORD.finditer(text))
        exact = [self._key(word.group(), True) for word in words]
        folded = [key.casefold() for key in exact]
        found = []  # (words, first word, term)
        for first in range(len(words)):
            for size in range(1, min(self.longest, len(words) - first) + 1):
                end = first + size
                for term in self.entries.get(tuple(folded[first:end]), []):
                    if not term.match_case:
                        found.append((size, first, term))
                for term in self.entries.get(tuple(exact[first:end]), []):
                    if term.match_case:
                        found.append((size, first, term))
        taken = [False] * len(words)
        chosen = []
        for size, first, term in sorted(found, key=lambda f: (-f[0], f[1], not f[2].match_case)):
            if not any(taken[first : first + size]):
                taken[first : first + size] = [True] * size
                chosen.append(TermMatch(words[first].start(), words[first + size - 1].end(), term))
        return sorted(chosen, key=lambda match: match.start)
