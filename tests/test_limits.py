"""Config fields declare their meaning and range once (nmt/limits.py `setting`): the checks refuse what the
range excludes with the message the range describes, and every field of every section has a meaning."""

import dataclasses
from dataclasses import dataclass

import pytest

from nmt.config.schema import Config, sections
from nmt.errors import ConfigError
from nmt.limits import Range, check_settings, setting


@dataclass(frozen=True)
class Section:
    count: int = setting(2, "a count", low=1, high=10)
    rate: float = setting(0.5, "a rate", low=0.0, high=1.0, high_open=True)
    limit: int = setting(0, "a limit", low=0, zero="no limit")
    pair: tuple[float, float] = setting((0.1, 0.2), "two rates", low=0.0, high=1.0)
    size: int | str = setting("auto", "a size or auto", low=1)
    name: str = setting("x", "no range")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"count": 0}, "s.count=0 must be at least 1"),
        ({"count": 11}, "s.count=11 must be at most 10"),
        ({"rate": 1.0}, "s.rate=1.0 must be in [0.0, 1.0)"),
        ({"rate": float("nan")}, "s.rate=nan must be a finite number in [0.0, 1.0)"),
        ({"limit": -1}, "s.limit=-1 must be 0 (no limit) or positive"),
        ({"pair": (0.1, 2.0)}, "s.pair[1]=2.0 must be in [0.0, 1.0]"),
        ({"size": 0}, "s.size=0 must be at least 1"),
    ],
)
def test_a_value_outside_its_range_is_refused_in_its_words(change: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_settings(dataclasses.replace(Section(), **change), "s.")
    assert str(caught.value) == message


def test_values_inside_their_ranges_and_values_without_one_pass() -> None:
    check_settings(Section(count=10, rate=0.0, limit=7, size="auto", name="anything"), "s.")


def test_a_range_describes_itself_without_a_value() -> None:
    assert Range(low=0, low_open=True).describe() == "positive"
    assert Range(low=1).describe() == "at least 1"
    assert Range(1, 256).describe() == "in [1, 256]"


def test_every_config_field_has_a_meaning() -> None:
    found = sections(Config)
    assert {name for name, _ in found} >= {"data", "train", "model", "model.transformer", "model.rnn"}
    missing = [
        f"{prefix}.{field.name}"
        for prefix, cls in found
        for field in dataclasses.fields(cls)
        if not field.metadata.get("meaning")
    ]
    assert not missing, missing
