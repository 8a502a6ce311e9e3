"""Translating with a glossary: each source text gets the glossary's terms written in between the markers a
run was trained with (`data.terminology`; nmt/data/terminology.py), then translates as any other text, so
the torch engine and a CTranslate2 export alike read the terms. A run trained without annotation is refused:
lexically constrained search, which would honour a glossary without training, is not available yet.

    Annotating(translator, finder, markers).translate(["Ich fahre nach Berlin."])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.config.yaml_file import load_saved_config
from nmt.data.glossary import Term, TermFinder, for_direction, read_glossary, unwritable
from nmt.data.special_tokens import UNK
from nmt.data.terminology import TermWriter, with_glossary_terms
from nmt.data.tokenizer import Tokenizer, tokenizer_paths
from nmt.decode.decoded import DecodedLine
from nmt.decode.exported import META, is_export
from nmt.decode.languages import Translates
from nmt.decode.translator import Progress
from nmt.errors import UserError

NOT_TRAINED = (
    "--glossary: {path} was not trained with terminology annotation (data.terminology), and constrained "
    "search (which needs no such training) is not available yet; train a run with data.terminology to "
    "translate with a glossary"
)


UNWRITABLE = "the run's vocabulary cannot write the target term {target!r} (it holds characters it lacks)"


class Annotating:
    """A translator (`inner`) whose source texts first get the terms `finder` finds written in, between
    `markers` (term start, translation start, term end)."""

    def __init__(self, inner: Translates, finder: TermFinder, markers: tuple[str, str, str]) -> None:
        self.inner, self.finder, self.markers = inner, finder, markers

    @property
    def source(self) -> str:
        return self.inner.source

    @property
    def target(self) -> str:
        return self.inner.target

    @property
    def max_source_len(self) -> int:
        return self.inner.max_source_len

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
        bad = self.unwritable(terms)
        if bad is not None:
            raise UserError(f"{path} line {bad.line}: {UNWRITABLE.format(target=bad.target)}")
        return Annotating(translator, self.finder(terms), self.markers)

    def finder(self, terms: Sequence[Term]) -> TermFinder:
        """What finds `terms` in texts normalised as this run's tokenizer normalises them."""
        return TermFinder(terms, self.tokenizer.normalize)

    def unwritable(self, terms: Sequence[Term]) -> Term | None:
        """The first of `terms` whose target the vocabulary cannot write (a character it lacks), if any."""
        return unwritable(terms, self.tokenizer)
