"""The off-target rate of a multilingual model: the share of its outputs in another language than the one
asked for, as py3langid (the `langid` extra: a BSD-licensed classifier whose model ships inside the wheel)
identifies them among the run's own languages only. Without py3langid, or for a language it does not know,
the rate is skipped, said in one log line."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

from nmt.data.language_id import Unidentifiable, identifier

log = logging.getLogger(__name__)


@functools.cache
def _identifier(languages: tuple[str, ...]) -> Any | None:
    """The classifier restricted to `languages`; None (and one log line) when py3langid is not installed or
    does not know one of them."""
    try:
        return identifier(languages)
    except Unidentifiable as err:
        log.info("off-target rate skipped: %s", err)
        return None


def off_target_rate(outputs: Sequence[str], lang: str, languages: Sequence[str]) -> float | None:
    """Percentage of the non-empty `outputs` that py3langid, choosing among `languages`, does not identify
    as `lang` (0 when every output is empty); None when the rate is skipped (see `_identifier`)."""
    classifier = _identifier(tuple(sorted(set(languages))))
    if classifier is None:
        return None
    texts = [text for text in outputs if text.strip()]
    wrong = sum(classifier.classify(text)[0] != lang for text in texts)
    return round(100.0 * wrong / max(len(texts), 1), 2)
