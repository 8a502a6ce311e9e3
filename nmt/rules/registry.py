"""Every search rule and processor, once: a new one is a file of this package and a line of `PARTS`.

The `search` config section takes every part's settings (nmt/config/sections.py `SearchConfig`); the
command line, the server and the CTranslate2 engine read them from there. A search is one rule — the first
of `PARTS` that applies, beam search when none does — and every processor that applies.
"""

from __future__ import annotations

from dataclasses import Field
from typing import Any

from nmt.rules.beam import BeamSearch
from nmt.rules.contract import Part, Processor, SearchRule
from nmt.rules.diverse_beam import DiverseBeamSearch
from nmt.rules.min_length import MinLength
from nmt.rules.no_repeat_ngram import NoRepeatNGram
from nmt.rules.sampling import Sampling
from nmt.rules.target_vocabulary import TargetVocabulary

PARTS: tuple[type[Part], ...] = (
    Sampling,
    DiverseBeamSearch,
    BeamSearch,
    NoRepeatNGram,
    MinLength,
    TargetVocabulary,
)


def settings_fields() -> list[Field]:
    """The settings of every part, each once, in the order of `PARTS` (a setting two parts read is one
    field, declared in their common base)."""
    found: dict[str, Field] = {}
    for part in PARTS:
        for field in part.settings():
            if found.setdefault(field.name, field) is not field:
                raise TypeError(f"{part.__name__} declares the setting {field.name!r} again")
    return list(found.values())


def owners(name: str) -> list[type[Part]]:
    """The parts that read the setting `name`."""
    return [part for part in PARTS if any(f.name == name for f in part.settings())]


def chosen_rule(settings: Any) -> type[SearchRule]:
    """The search rule a search config asks for: the first rule of `PARTS` that applies."""
    return next(p for p in PARTS if issubclass(p, SearchRule) and p.applies(settings))


def overridden(settings: Any) -> list[type[SearchRule]]:
    """The rules a search config asks for (their switch set) that its chosen rule overrides: a search follows
    one rule, so asking for two is a mistake to refuse, never a choice to make silently."""
    chosen = chosen_rule(settings)
    return [
        p
        for p in PARTS
        if issubclass(p, SearchRule) and p is not chosen and p.switch is not None and p.applies(settings)
    ]


def rule_of(settings: Any) -> SearchRule:
    """The search rule of a search config, made from its settings."""
    return chosen_rule(settings).of(settings)


def processors_of(settings: Any) -> tuple[Processor, ...]:
    """The processors a search config asks for, in the order of `PARTS`."""
    return tuple(p.of(settings) for p in PARTS if issubclass(p, Processor) and p.applies(settings))


def active(settings: Any) -> list[type[Part]]:
    """The parts whose settings a search config uses: its rule and its processors."""
    return [chosen_rule(settings), *(p for p in PARTS if issubclass(p, Processor) and p.applies(settings))]
