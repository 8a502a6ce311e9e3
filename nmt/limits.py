"""The ranges every size, count and rate in a config or on the command line must stay within, and the checks
that refuse a value outside them with a ConfigError naming the setting."""

from __future__ import annotations

import math

from nmt.errors import ConfigError

MAX_SIZE = 2**31 - 1  # sizes and counts: beyond this torch and sentencepiece overflow or cannot allocate
MAX_BEAM = 256  # beam search keeps beam × vocabulary scores per sentence
MAX_PARAMETERS = 2**33  # 32 GiB of float32 weights, before gradients and optimizer state


def check_range(name: str, value: float, low: float | None = None, high: float | None = None,
                low_open: bool = False, high_open: bool = False) -> None:  # fmt: skip
    """Raise ConfigError unless `value` is finite and within [low, high] (a bound left out is open-ended;
    `low_open`/`high_open` exclude the bound itself)."""
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if (isinstance(value, float) and not math.isfinite(value)) or too_low or too_high:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        bounds = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise ConfigError(
            f"{name}={value!r} must be {'a finite number ' * isinstance(value, float)}in {bounds}"
        )


def check_at_least_one(section: object, prefix: str, names: tuple[str, ...]) -> None:
    """Raise ConfigError naming the first of the fields `names` of `section` below 1."""
    for name in names:
        if getattr(section, name) < 1:
            raise ConfigError(f"{prefix}{name}={getattr(section, name)} must be at least 1")


def check_dropout(section: object, prefix: str, names: tuple[str, ...]) -> None:
    """Raise ConfigError naming the first of the probabilities `names` of `section` outside [0, 1)."""
    for name in names:
        if not 0.0 <= getattr(section, name) < 1.0:
            raise ConfigError(f"{prefix}{name}={getattr(section, name)} must be in [0, 1)")
