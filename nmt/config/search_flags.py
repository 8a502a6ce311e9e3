"""Search settings given by hand (command-line flags, a request's fields): which settings a user may give, and
how given ones are checked against a run's search config before they change it, each mistake named as the
user spelled it (`--top-p 0`, not the run's config.yaml).

The settings are those `SearchConfig` declares (nmt/config/sections.py: the search's own and every search
rule's and processor's, nmt/rules/registry.py): nothing here lists them by name.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from nmt.config.sections import SearchConfig, SearchLimits, check_search
from nmt.errors import ConfigError, UserError
from nmt.limits import Range
from nmt.rules.registry import PARTS, active

Name = Callable[[str, Any], str]  # a setting and its value (None: the setting alone) as the user gives it


def given_settings() -> list[dataclasses.Field]:
    """The search settings a user may give by hand: every field of `SearchConfig` that is a flag."""
    return [f for f in dataclasses.fields(SearchConfig) if f.metadata.get("flag", True)]


def setting_types() -> dict[str, Any]:
    """Each search setting's Python type (int, float, bool)."""
    return typing.get_type_hints(SearchConfig)


def flag(name: str, value: Any = None) -> str:
    """A setting as a command-line flag, with its value: `--top-p 0.0`, `--sampling`."""
    option = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return option if value else "--no-" + option[2:]
    return option if value is None else f"{option} {value}"


def changed(settings: SearchConfig, given: Mapping[str, Any], name: Name, kept: Name) -> SearchConfig:
    """`settings` with the `given` ones, after refusing (UserError) a value out of its range, a setting that
    the search asked for does not read, and settings that do not go together (two search rules asked for at
    once among them); `name` words a given setting, `kept` one of `settings`. The command line and the server
    both check what they are given here."""
    fields = {f.name: f for f in given_settings()}
    for key, value in given.items():
        allowed: Range | None = fields[key].metadata.get("range")
        if allowed is not None and not isinstance(value, bool) and not allowed.contains(value):
            raise UserError(f"{name(key, value)} must be {allowed.describe(value)}")
    merged = SimpleNamespace(**(dataclasses.asdict(settings) | dict(given)))
    for key, value in given.items():
        refuse_unread(merged, key, value, name)
    try:
        check_search(merged, lambda key, value: (name if key in given else kept)(key, value))  # type: ignore[arg-type]
    except ConfigError as err:
        raise UserError(str(err)) from err
    return dataclasses.replace(settings, **given)


def refuse_unread(settings: Any, key: str, value: Any, name: Name) -> None:
    """UserError when the search that `settings` ask for does not read the setting `key`, given as `value` (a
    setting that asks for a part, or belongs to the search itself whatever its rule, is always read: a rule
    asked for beside another is refused by `check_search`); `name` words a setting as the user gives it
    (without a value: the setting alone)."""
    parts = active(settings)
    owned = {f.name for p in PARTS for f in dataclasses.fields(p)}  # type: ignore[arg-type]
    loop = {f.name for f in dataclasses.fields(SearchLimits)} - owned  # the search's own: always read
    if key in loop or any(key == p.switch for p in PARTS) or any(key in p.reads() for p in parts):
        return
    owners = sorted((p for p in PARTS if key in p.reads()), key=lambda p: p.switch is not None)
    ask = [name(p.switch, None) for p in owners if p.switch is not None]
    wanted = " and ".join(p.title for p in owners) + (f" ({', '.join(ask)})" if ask else "")
    raise UserError(f"{name(key, value)} applies to {wanted}, not to {parts[0].title}; drop it")
