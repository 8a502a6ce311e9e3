"""Which direction a command asks a translator for (`Asked`: checked by `Translator.toward`), and translation
through a third language with the same model (`Pivot`).

    into_direction(translator, Asked("de", "fr", pivot="en")).translated(lines)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from nmt.config.multilingual import Direction
from nmt.decode.translator import Progress, Translated, Translator
from nmt.errors import UserError


class Translates(Protocol):
    """What translates raw texts: a Translator into one language, or a `Pivot` of two; the languages it
    translates from and into ("" where not known), the source ids of texts and the longest source it takes
    (to split running text into pieces that fit: nmt/decode/running_text.py)."""

    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def max_source_len(self) -> int: ...

    def encode(self, texts: Sequence[str]) -> list[list[int]]: ...

    def translate(self, texts: Sequence[str], progress: Progress | None = None) -> list[str]: ...

    def translated(self, texts: Sequence[str], alignments: bool = False) -> list[Translated]: ...


class Pivot:
    """Translation through a third language with one model: each text's best translation into the pivot
    language (`first`), translated into the target language (`second`). The hypotheses, scores and subwords
    are those of the second step; the first step searches as the second does, for its best hypothesis."""

    def __init__(self, first: Translator, second: Translator) -> None:
        self.first, self.second = first.with_search(nbest=1), second

    @property
    def source(self) -> str:
        return self.first.source

    @property
    def target(self) -> str:
        return self.second.target

    @property
    def max_source_len(self) -> int:
        return self.first.max_source_len

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """The source ids of the first step."""
        return self.first.encode(texts)

    def translate(self, texts: Sequence[str], progress: Progress | None = None) -> list[str]:
        return self.second.translate(self.first.translate(texts), progress)

    def translated(self, texts: Sequence[str], alignments: bool = False) -> list[Translated]:
        if alignments:
            raise UserError(
                "word alignments link the words of one translation, and --pivot makes two: drop --pivot or "
                "--alignments"
            )
        return self.second.translated(self.first.translate(texts))


@dataclass(frozen=True)
class Asked:
    """The direction a command asks for: --src-lang, --tgt-lang, --zero-shot, --pivot (None: not given)."""

    src: str | None = None
    tgt: str | None = None
    zero_shot: bool = False
    pivot: str | None = None

    def direction(self) -> Direction:
        """The direction named, both languages needed (to find a split's files)."""
        if self.src is None or self.tgt is None:
            raise UserError("name the direction to score: --src-lang and --tgt-lang")
        return Direction(self.src, self.tgt)

    def through(self) -> str:
        """What a file name adds for a pivot language: `.pivot-en`, or nothing."""
        return "" if self.pivot is None else f".pivot-{self.pivot}"


def into_direction(translator: Translator, asked: Asked) -> Translator | Pivot:
    """The translator of `translator`'s model in the direction `asked` names (`Translator.toward`), or
    through its pivot language: both steps checked."""
    src, tgt, zero_shot, pivot = asked.src, asked.tgt, asked.zero_shot, asked.pivot
    if pivot is None:
        return translator.toward(tgt, src, zero_shot)
    if not translator.tags.tagged:
        raise UserError("--pivot: this model translates one language pair; pivoting needs a multilingual one")
    if tgt is None:
        raise UserError("--pivot needs the target language: add --tgt-lang")
    if pivot in (src, tgt):
        raise UserError(f"--pivot {pivot}: the pivot is a third language, neither source nor target")
    return Pivot(translator.toward(pivot, src, zero_shot), translator.toward(tgt, pivot, zero_shot))
