"""Search settings given by hand (command-line flags, a request's fields) against a run's search config: every
pair of settings, each at a value other than its default, is either refused or read — each setting given
changes the search that runs (its rule, its options or its batches), so that none is silently ignored."""

import dataclasses
import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from nmt.config.search_flags import changed, flag, given_settings
from nmt.config.sections import SearchConfig
from nmt.decode.translator import search_options
from nmt.errors import UserError
from nmt.rules.registry import rule_of


def other_value(field: dataclasses.Field) -> Any:
    """A value of the setting other than its default, within its declared range."""
    default, allowed = field.default, field.metadata.get("range")
    if isinstance(default, bool):
        return not default
    step = 1 if isinstance(default, int) else 0.5
    return next(v for v in (default + step, default - step) if allowed is None or allowed.contains(v))


def kept(key: str, value: Any) -> str:
    return f"search.{key}={value!r}"


def effect(settings: Any) -> tuple:
    """What a search config changes in a translation: its rule, its options and its batches."""
    return rule_of(settings), search_options(settings), settings.batch_tokens


def given_pairs() -> list[dict[str, Any]]:
    fields = given_settings()
    return [{a.name: other_value(a), b.name: other_value(b)} for a, b in itertools.combinations(fields, 2)]


def test_every_pair_of_search_settings_is_refused_or_each_is_read() -> None:
    ignored, accepted = [], []
    for given in given_pairs():
        try:
            settings = changed(SearchConfig(), given, flag, kept)
        except UserError:
            continue
        accepted.append(set(given))
        for key in given:
            default = next(f.default for f in dataclasses.fields(SearchConfig) if f.name == key)
            without = SimpleNamespace(**(dataclasses.asdict(settings) | {key: default}))
            if effect(without) == effect(settings):
                ignored.append(f"{key} beside {given}")
    assert ignored == []
    assert {"sampling", "top_k"} in accepted and {"beam_size", "diverse_groups"} in accepted  # not vacuous


@pytest.mark.parametrize(
    "given", [{"sampling": True, "diverse_groups": 5}, {"diverse_groups": 5, "sampling": True}]
)
def test_two_search_rules_asked_for_at_once_are_refused(given: dict[str, Any]) -> None:
    with pytest.raises(
        UserError, match=r"^--diverse-groups 5 asks for diverse beam search and --sampling for"
    ):
        changed(SearchConfig(), given, flag, kept)


def test_a_rule_asked_for_over_the_run_s_other_rule_is_refused_naming_both() -> None:
    run = SearchConfig(diverse_groups=5)
    with pytest.raises(UserError, match=r"search.diverse_groups=5 asks .* and --sampling for sampling"):
        changed(run, {"sampling": True}, flag, kept)
    assert rule_of(changed(run, {"sampling": True, "diverse_groups": 1}, flag, kept)).title == "sampling"
