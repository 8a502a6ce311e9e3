"""The ranges every size, count and rate in a config or on the command line must stay within, and how a config
field declares its meaning and range once (`setting`), for both the check that refuses a value outside it with
a ConfigError naming the setting (`check_settings`) and the configuration reference that prints it
(scripts/docs_reference.py)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nmt.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

MAX_SIZE = 2**31 - 1  # sizes and counts: beyond this torch and sentencepiece overflow or cannot allocate
MAX_BEAM = 256  # beam search keeps beam × vocabulary scores per sentence
MAX_PARAMETERS = 2**33  # 32 GiB of float32 weights, before gradients and optimizer state


@dataclass(frozen=True)
class Range:
    """The values a number may take: from `low` to `high` (None: open-ended), the bound itself excluded when
    `low_open`/`high_open`; `zero` names what 0 means when it is the lowest value (`0 (no limit) or
    positive`)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    zero: str | None = None

    def bounds(self) -> str:
        """The interval as written in an error, e.g. `[0, 1)` or `(0.0, inf)`."""
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        low, high = "-inf" if self.low is None else self.low, "inf" if self.high is None else self.high
        return f"{left}{low}, {high}{right}"

    def contains(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        too_low = self.low is not None and (value <= self.low if self.low_open else value < self.low)
        too_high = self.high is not None and (value >= self.high if self.high_open else value > self.high)
        return not (too_low or too_high)

    def describe(self, value: float | None = None) -> str:
        """What a value must be, in words: the side that `value` misses for a count (`at least 1`, `at most
        1024`), the whole interval for a rate (`in [0, 1)`); without a value, the whole range."""
        if isinstance(value, float) and not math.isfinite(value):
            return f"a finite number in {self.bounds()}"
        below = value is not None and self.low is not None and value <= self.low
        if self.zero is not None and (value is None or below):
            return f"0 ({self.zero}) or positive"
        if self.high is None:
            if self.low_open:
                return "positive" if self.low == 0 else f"above {self.low}"
            return f"at least {self.low}"
        if isinstance(value, float) or isinstance(self.low, float) or value is None:
            return f"in {self.bounds()}"
        return f"at least {self.low}" if below else f"at most {self.high}"


def setting(default: Any, meaning: str, flag: bool = True, **bounds: Any) -> Any:
    """A config field: its default, one line of meaning and, for a number, its Range (`low=1`, `high=…`,
    `low_open=True`, `zero="no limit"`), declared once for the check (`check_settings`) and for the
    configuration reference; a search setting is also a command-line flag and a request field unless `flag`
    is false."""
    allowed = Range(**bounds) if bounds else None
    return dataclasses.field(default=default, metadata={"meaning": meaning, "range": allowed, "flag": flag})


def check_settings(section: DataclassInstance, prefix: str) -> None:
    """Raise ConfigError naming the first field of dataclass `section` outside its declared Range (each item
    of a tuple is checked; a value that is not a number, such as `batch_tokens: auto`, has no range)."""
    for field in dataclasses.fields(section):
        allowed, value = field.metadata.get("range"), getattr(section, field.name)
        items = enumerate(value) if isinstance(value, tuple) else [(None, value)]
        for index, item in items:
            if allowed is None or isinstance(item, bool) or not isinstance(item, int | float):
                continue
            if not allowed.contains(item):
                name = f"{prefix}{field.name}" + ("" if index is None else f"[{index}]")
                raise ConfigError(f"{name}={item!r} must be {allowed.describe(item)}")
