"""Translating with a glossary, in one of two modes that `glossary_mode` chooses and `glossary_translator`
builds (the one entry point for a command):

- annotated: each source text gets the glossary's terms written in between the markers a run was trained with
  (`data.terminology`; nmt/data/terminology.py), then translates as any other text, so the torch engine and a
  CTranslate2 export alike read the terms (`Annotating`);
- constrained: the torch engine's lexically constrained beam search (nmt/rules/constrained.py) makes each
  output hold the target terms of the source terms found in its text, with any run (`Constraining`); each
  hypothesis names the terms it lacks (`unmet_terms`), where the length limit ended its search first.

auto is annotated for a run trained with annotation, else constrained. An empty glossary changes nothing.

    glossary_translator(translator, run_dir, Path("terms.tsv"), "constrained").translate(["Ich fahre Rad."])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from nmt.config.yaml_file import load_saved_config
from nmt.data.glossary import Term, TermFinder, for_direction, read_glossary, unwritable
from nmt.data.special_tokens import UNK
from nmt.data.terminology import TermWriter, with_glossary_terms
from nmt.data.tokenizer import Tokenizer, tokenizer_paths
from nmt.decode.decoded import DecodedLine
from nmt.decode.exported import META, is_export
from nmt.decode.languages import Translates
from nmt.decode.translator import Progress, Translator
from nmt.errors import UserError
from nmt.rules.constrained import TargetTerm

Mode = Literal["annotated", "constrained"]
Inner = TypeVar("Inner", bound=Translates)
MODES = ("auto", "constrained", "annotated")
NOT_TRAINED = (
    "--glossary-mode annotated: {path} was not trained with terminology annotation (data.terminology); use "
    "--glossary-mode constrained (or auto), which needs no such training"
)
NOT_CONSTRAINED = (
    "--glossary-mode constrained: {path} is a CTranslate2 export, which has no constrained search; translate "
    "with the run directory (or export a run trained with data.terminology)"
)


UNWRITABLE = "the run's vocabulary cannot write the target term {target!r} (it holds characters it lacks)"


def check_writable(terms: Sequence[Term], tokenizer: Tokenizer, path: Path | str) -> None:
    """A UserError naming the line of `path` (the glossary `terms` come from) whose target term `tokenizer`
    cannot write, if one is."""
    bad = unwritable(terms, tokenizer)
    if bad is not None:
        raise UserError(f"{path} line {bad.line}: {UNWRITABLE.format(target=bad.target)}")


class _Wrapping(Generic[Inner]):
    """A translator around `inner`, translating between its languages within its source limit."""

    def __init__(self, inner: Inner) -> None:
        self.inner = inner

    @property
    def source(self) -> str:
        return self.inner.source

    @property
    def target(self) -> str:
        return self.inner.target

    @property
    def max_source_len(self) -> int:
        return self.inner.max_source_len


class Annotating(_Wrapping[Translates]):
    """A translator (`inner`) whose source texts first get the terms `finder` finds written in, between
    `markers` (term start, translation start, term end)."""

    def __init__(self, inner: Translates, finder: TermFinder, markers: tuple[str, str, str]) -> None:
        super().__init__(inner)
        self.finder, self.markers = finder, markers

    @property
    def writer(self) -> TermWriter:
        """What writes its terms into a line (an HTML page's, keeping each term inside its tags)."""
        return TermWriter(self.finder, self.markers)

    def annotated(self, texts: Sequence[str]) -> list[str]:
        """The texts with their terms written in (a text without a term: itself)."""
        return [with_glossary_terms(text, self.finder, self.markers) for text in texts]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return self.inner.encode(self.annotated(texts))

    def translate(self, texts: Sequence[str], progress: Progress | None = None) -> list[str]:
        return self.inner.translate(self.annotated(texts), progress)

    def translated(
        self, texts: Sequence[str], alignments: bool = False, **settings: Any
    ) -> list[DecodedLine]:
        if alignments:
            raise UserError(
                "word alignments would count the glossary's terms written into the source: drop --glossary "
                "or --alignments"
            )
        return self.inner.translated(self.annotated(texts), **settings)


@dataclass(frozen=True)
class TrainedMarkers:
    """The markers a run was trained to read terms between, and its source tokenizer (whose normalisation
    finding terms applies)."""

    markers: tuple[str, str, str]
    tokenizer: Tokenizer

    @classmethod
    def of(cls, path: Path) -> TrainedMarkers:
        """Those of `path`, a run directory or an export; UserError for one trained without annotation (or
        whose vocabulary lacks a marker)."""
        found = cls.find(path)
        if found is None:
            raise UserError(NOT_TRAINED.format(path=path))
        return found

    @classmethod
    def find(cls, path: Path) -> TrainedMarkers | None:
        """Those of `path`, a run directory or an export; None for one trained without annotation."""
        if is_export(path):
            meta = json.loads((path / META).read_text(encoding="utf-8"))
            found, joint = meta.get("terminology"), meta["joint_vocabulary"]
        else:
            cfg = load_saved_config(path / "config.yaml")
            found = None if cfg.data.terminology is None else list(cfg.data.terminology.markers)
            joint = cfg.tokenizer.joint
        if found is None:
            return None
        start, translation, end = found
        tokenizer = Tokenizer(tokenizer_paths(path, joint)[0])
        for marker, i in zip(found, tokenizer.ids(found), strict=True):
            if i == UNK:
                raise UserError(
                    f"--glossary: the vocabulary of {path} lacks the marker {marker!r}; train again"
                )
        return cls((start, translation, end), tokenizer)

    def annotating(self, translator: Translates, glossary: Path) -> Annotating:
        """`translator` annotating its sources with `glossary` (its own file for the translator's direction,
        when there is one: nmt/data/glossary.py `for_direction`)."""
        path = for_direction(glossary, translator.source, translator.target)
        terms = read_glossary(path)
        check_writable(terms, self.tokenizer, path)
        return Annotating(translator, self.finder(terms), self.markers)

    def finder(self, terms: Sequence[Term]) -> TermFinder:
        """What finds `terms` in texts normalised as this run's tokenizer normalises them."""
        return TermFinder(terms, self.tokenizer.normalize)

    def unwritable(self, terms: Sequence[Term]) -> Term | None:
        """The first of `terms` whose target the vocabulary cannot write (a character it lacks), if any."""
        return unwritable(terms, self.tokenizer)


class Constraining(_Wrapping[Translator]):
    """A torch translator (`inner`) whose outputs must hold the target terms of the glossary terms `finder`
    finds in each source text (lexically constrained search; a term found twice must appear twice)."""

    def __init__(self, inner: Translator, finder: TermFinder) -> None:
        super().__init__(inner)
        self.finder = finder
        self._ids: dict[str, tuple[int, ...]] = {}  # a target term → its subword ids, as computed so far

    def terms(self, texts: Sequence[str]) -> list[list[TargetTerm]]:
        """Each text's target terms, in the order their source terms are found: each the subwords the target
        tokenizer writes for it after a space (as mid-sentence; a term it writes as nothing is left out)."""
        found = [[match.term.target for match in self.finder.find(text)] for text in texts]
        new = sorted({target for targets in found for target in targets} - set(self._ids))
        for target, ids in zip(new, self.inner.encode_terms(new), strict=True):
            self._ids[target] = ids
        return [[TargetTerm(t, self._ids[t]) for t in targets if self._ids[t]] for targets in found]

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        return self.inner.encode(texts)

    def translate(self, texts: Sequence[str], progress: Progress | None = None) -> list[str]:
        found = self.inner.search(self.inner.encode(texts), progress, terms=self.terms(texts))
        return self.inner.tokenizers.tgt.decode([hyps[0].tokens for hyps in found])

    def translated(
        self, texts: Sequence[str], alignments: bool = False, **settings: Any
    ) -> list[DecodedLine]:
        sources = self.inner.encode(texts)
        found = self.inner.search(sources, alignments=alignments, terms=self.terms(texts), **settings)
        return self.inner.decode(sources, found)

    @classmethod
    def of(cls, translator: Translator, terms: Sequence[Term], path: Path | str) -> Constraining:
        """`translator` constrained by `terms` (read from `path`, which names it in errors); a UserError
        for a term the target vocabulary cannot write."""
        check_writable(terms, translator.tokenizers.tgt, path)
        return cls(translator, TermFinder(terms, translator.tokenizers.src.normalize))


def glossary_mode(path: Path, mode: str, engine: str, glossary: Path) -> Mode | None:
    """The glossary mode `mode` (auto, constrained or annotated) asks for with the run or export `path`
    translated by `engine` (torch or ctranslate2): auto is annotated where `path` was trained with
    annotation, else constrained, and None (nothing to do) for an empty `glossary`; a mode it cannot take is
    a one-line UserError, before any model loads."""
    if mode not in MODES:
        raise UserError(f"--glossary-mode {mode}: expected {', '.join(MODES)}")
    trained = TrainedMarkers.find(path) is not None
    if mode == "auto":
        directions = glossary.parent.glob(f"{glossary.stem}.*-*{glossary.suffix}")  # for_direction's files
        if not read_glossary(glossary) and not any(directions):
            return None
        mode = "annotated" if trained else "constrained"
    if mode == "annotated" and not trained:
        raise UserError(NOT_TRAINED.format(path=path))
    if mode == "constrained" and engine != "torch":
        raise UserError(NOT_CONSTRAINED.format(path=path))
    return "annotated" if mode == "annotated" else "constrained"


def glossary_translator(translator: Translates, path: Path, glossary: Path, mode: Mode) -> Translates:
    """`translator` (of the run or export `path`) translating with `glossary` (its own file for the
    translator's direction, when there is one) in `mode` (`glossary_mode`'s); itself for an empty
    glossary."""
    own = for_direction(glossary, translator.source, translator.target)
    terms = read_glossary(own)
    if not terms:
        return translator
    if mode == "annotated":
        return TrainedMarkers.of(path).annotating(translator, glossary)
    if not isinstance(translator, Translator):
        raise UserError("--glossary: constrained search translates in one step; drop --pivot")
    return Constraining.of(translator, terms, own)
