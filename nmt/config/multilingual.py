"""The directions a run translates: the `data.multilingual` section (one model trained on many languages,
Johnson et al. 2017: its directions, how often each is drawn, where the target-language tag goes), and
`RunDirections`, what every later stage reads, a bilingual run being the case of one direction without tags
(nmt/config/sections.py `DataConfig.directions` builds it from either spelling)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from nmt.errors import ConfigError
from nmt.limits import MAX_SIZE, check_settings, setting

LANGUAGE_CODE = re.compile(r"[A-Za-z0-9_]+")  # no '-': it separates a direction's two codes
KEY = "data.multilingual"
BILINGUAL_PAIR = ("src_lang", "tgt_lang")  # the data settings of a bilingual run's one pair


def pair_beside_multilingual(names: list[str]) -> ConfigError:
    """The error for `data.src_lang`/`data.tgt_lang` (`names`) set beside data.multilingual."""
    return ConfigError(
        f"{' and '.join(f'data.{name}' for name in names)}: a multilingual run takes its languages from "
        f"{KEY}.directions, not from the one pair of a bilingual run; remove it"
    )


@dataclass(frozen=True)
class Direction:
    """One translation direction of a multilingual run: `src` → `tgt`, written `src-tgt` (`en-de`)."""

    src: str
    tgt: str

    @property
    def name(self) -> str:
        return f"{self.src}-{self.tgt}"

    @classmethod
    def parse(cls, text: str) -> Direction:
        """`en-de` → Direction('en', 'de'); ConfigError for anything that is not two distinct codes."""
        src, sep, tgt = str(text).partition("-")
        if not sep or not LANGUAGE_CODE.fullmatch(src) or not LANGUAGE_CODE.fullmatch(tgt):
            raise ConfigError(
                f"{KEY}.directions: {text!r} is not SRC-TGT, two language codes (letters, digits, _) joined "
                f"by '-', e.g. en-de"
            )
        if src == tgt:
            raise ConfigError(f"{KEY}.directions: {text!r} translates {src} into itself; remove it")
        return cls(src, tgt)


@dataclass(frozen=True)
class BackTranslationConfig:
    """Random online back-translation (ROBT, Zhang et al. 2020): from update `start` on, a `share` of each
    batch's pairs get a new source, their target translated by the model in training into another language
    of the run drawn at random, so that directions no corpus holds (zero-shot ones) get training pairs
    (nmt/train/back_translation.py)."""

    share: float = setting(
        0.0,
        "share of each batch's pairs whose source is replaced by the model's translation of their target "
        "into another language the run translates into, drawn at random (0: off)",
        low=0.0,
        high=1.0,
    )
    start: int = setting(0, "the update from which on pairs are back-translated", low=0, high=MAX_SIZE)
    search: Literal["greedy", "sampling"] = setting(
        "greedy",
        "how the model back-translates: greedy, or sampling (with the search section's temperature, top_k "
        "and top_p)",
    )

    def __post_init__(self) -> None:
        check_settings(self, f"{KEY}.back_translation.")


@dataclass(frozen=True)
class MultilingualConfig:
    """Many translation directions in one model (Johnson et al. 2017), replacing `data.src_lang` and
    `data.tgt_lang`. Every direction's pairs train one model with one joint vocabulary, the source (or the
    decoder's first token) marked with a tag naming the target language, `>>de<<`.

    The text of language `L` is `train.L`, `valid.L` (or `val.L`, `dev.L`), `test.L` in `data.dir` (or under
    the path prefixes `data.train`, `data.valid`, `data.test`), line-aligned across all languages; or, for
    corpora that are not, `data.train` (and `data.valid`, `data.test`) is a `.jsonl` file: one JSON object
    per line mapping language codes to sentences, `{"en": "A dog.", "de": "Ein Hund."}`, and a direction
    uses the lines that hold both its languages. Each epoch draws direction `d` in proportion to
    `weights[d] × pairs(d) ** (1 / temperature)`.
    """

    directions: tuple[str, ...] = setting(
        (), "the directions trained, each SRC-TGT: [en-de, de-en, en-fr, fr-en]"
    )
    weights: dict[str, float] | None = setting(
        None, "a direction's weight in each epoch's draw, e.g. {en-cs: 2.0}; unlisted directions: 1"
    )
    temperature: float = setting(
        1.0,
        "sampling temperature: a direction's share of an epoch ∝ pairs ** (1/T) (1: as the data holds it)",
        low=0.0,
        low_open=True,
    )
    tags: Literal["encoder", "decoder"] = setting(
        "decoder",
        "where the target-language tag goes: decoder, the first target token (forced when translating); "
        "encoder, the first source token",
    )
    back_translation: BackTranslationConfig | None = setting(
        None, "random online back-translation into the run's other languages (absent: none)"
    )

    def __post_init__(self) -> None:
        check_settings(self, f"{KEY}.")
        if not self.directions:
            raise ConfigError(f"{KEY}.directions is empty; list the directions to train, e.g. [en-de, de-en]")
        names = [direction.name for direction in self._parsed()]  # parsing checks each one
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ConfigError(f"{KEY}.directions lists {', '.join(twice)} twice; list each direction once")
        for name, weight in (self.weights or {}).items():
            if name not in names:
                raise ConfigError(
                    f"{KEY}.weights names {name}, which is not in {KEY}.directions ({', '.join(names)})"
                )
            if not (isinstance(weight, float) and math.isfinite(weight) and weight > 0):
                raise ConfigError(f"{KEY}.weights.{name}={weight!r} must be a positive number")
        targets = {direction.tgt for direction in self._parsed()}
        if self.back_translation is not None and self.back_translation.share > 0 and len(targets) < 2:
            raise ConfigError(
                f"{KEY}.back_translation: the run translates into {', '.join(sorted(targets))} only, so a "
                f"target has no other language to be back-translated into; list directions into two "
                f"languages or more, or remove it"
            )

    def _parsed(self) -> tuple[Direction, ...]:
        """The directions named, parsed, in the order listed."""
        return tuple(Direction.parse(text) for text in self.directions)

    def run_directions(self) -> RunDirections:
        robt = self.back_translation
        robt = robt if robt is not None and robt.share > 0 else None
        return RunDirections(self._parsed(), self.tags, dict(self.weights or {}), self.temperature, robt)


Placement = Literal["encoder", "decoder"]


@dataclass(frozen=True)
class RunDirections:
    """What a run translates: its directions (in the order listed), where its target-language tags go (None:
    no tags, the one direction of a bilingual run), each direction's weight in an epoch's draw and the
    draw's temperature (see nmt/data/directions.py), and its online back-translation (None: none)."""

    directions: tuple[Direction, ...]
    tags: Placement | None = None
    weights: dict[str, float] = field(default_factory=dict)
    temperature: float = 1.0
    back_translation: BackTranslationConfig | None = None

    @property
    def tagged(self) -> bool:
        """Whether the run marks the target language with a tag: several directions (or one, listed in
        data.multilingual) in one model, scored direction by direction."""
        return bool(self.tags)

    @property
    def languages(self) -> tuple[str, ...]:
        """Every language of the run, sorted."""
        return tuple(sorted({lang for d in self.directions for lang in (d.src, d.tgt)}))

    @property
    def forced_tokens(self) -> int:
        """Tokens the decoder reads after bos before its output: the tag, with decoder tags."""
        return 1 if self.tags == "decoder" else 0

    def weight(self, direction: Direction) -> float:
        return self.weights.get(direction.name, 1.0)

    def file_part(self, direction: Direction) -> str:
        """What a file of `direction`'s outputs adds to its name: `.en-de` where the run has several
        directions to tell apart, nothing for the one pair of a bilingual run."""
        return f".{direction.name}" if self.tagged else ""

    def label(self, what: str, direction: Direction) -> str:
        """How messages name `what` (a split) of `direction`: `train en-de`; `train` in a bilingual run."""
        return f"{what} {direction.name}" if self.tagged else what
