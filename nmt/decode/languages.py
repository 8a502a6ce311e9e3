"""Which direction a translator translates: a multilingual model's target language, checked against the
directions it was trained on (one it never saw only when zero-shot translation is asked for), and translation
through a third language with the same model (`Pivot`). A one-pair model takes its own pair or none.

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
    """What translates raw texts: a Translator into one language, or a `Pivot` of two."""

    def translate(self, texts: Sequence[str], progress: Progress | None = None) -> list[str]: ...

    def translated(self, texts: Sequence[str], alignments: bool = False) -> list[Translated]: ...


class Pivot:
    """Translation through a third language with one model: each text's best translation into the pivot
    language (`first`), translated into the target language (`second`). The hypotheses, scores and subwords
    are those of the second step; the first step searches as the second does, for its best hypothesis."""

    def __init__(self, first: Translator, second: Translator) -> None:
        self.first, self.second = first.with_search(nbest=1), second

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
    """The translator of `translator`'s model in the direction `asked` names (`toward`), or through its pivot
    language: both steps checked (`toward`)."""
    src, tgt, zero_shot, pivot = asked.src, asked.tgt, asked.zero_shot, asked.pivot
    if pivot is None:
        return toward(translator, src, tgt, zero_shot)
    if translator.tags is None:
        raise UserError("--pivot: this model translates one language pair; pivoting needs a multilingual one")
    if tgt is None:
        raise UserError("--pivot needs the target language: add --tgt-lang")
    if pivot in (src, tgt):
        raise UserError(f"--pivot {pivot}: the pivot is a third language, neither source nor target")
    return Pivot(toward(translator, src, pivot, zero_shot), toward(translator, pivot, tgt, zero_shot))


def toward(translator: Translator, src: str | None, tgt: str | None, zero_shot: bool = False) -> Translator:
    """`translator` into `tgt` from `src` (either None: not named). A one-pair model takes its own pair (or
    none named); a multilingual one needs `tgt`, with a tag, and a direction it was trained on (with `src`
    unnamed: one into `tgt`) unless `zero_shot`. Anything else is a one-line UserError."""
    known = translator.directions
    trained = ", ".join(d.name for d in known)
    if translator.tags is None:
        own = known[0] if known else None
        if own is not None and (src not in (None, own.src) or tgt not in (None, own.tgt)):
            raise UserError(f"this model translates {own.src} → {own.tgt} only; it takes no other direction")
        if zero_shot:
            raise UserError("--zero-shot: this model translates one language pair; it has no other direction")
        return translator
    if tgt is None:
        raise UserError(
            f"the model translates several directions ({trained}): name the target language with --tgt-lang"
        )
    if src is not None:
        translator.tags.id(src)  # a language the model has no tag for was never seen
    into = translator.toward(tgt)
    seen = any(d.tgt == tgt and src in (None, d.src) for d in known) or not known
    if not (seen or zero_shot):
        asked = f"{src} → {tgt}" if src is not None else f"into {tgt}"
        raise UserError(
            f"the model was never trained to translate {asked} (its directions: {trained}); add --zero-shot "
            f"to translate it anyway, or --pivot LANG to translate through a third language"
        )
    return into
