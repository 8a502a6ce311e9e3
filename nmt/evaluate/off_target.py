"""The off-target rate of a multilingual model: the share of its outputs in another language than the one
asked for, as py3langid (the `langid` extra: a BSD-licensed classifier whose model ships inside the wheel)
identifies them among the run's own languages only. Without py3langid, or for a language it does not know,
the rate is skipped, said in one log line."""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)


@functools.cache
def _identifier(languages: tuple[str, ...]) -> Any | None:
    """py3langid's classifier restricted to `languages`, loaded once per process (about a second); None (and
    one log line) when py3langid is not installed or does not know one of them."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError:
        log.info("off-target rate skipped: it needs py3langid (pip install 'nmt[langid]')")
        return None
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE)
    unknown = sorted(set(languages) - set(identifier.labels))
    if unknown:
        log.info(
            "off-target rate skipped: py3langid does not know the language code(s) %s", ", ".join(unknown)
        )
        return None
    identifier.set_languages(list(languages))
    return identifier


def off_target_rate(outputs: Sequence[str], lang: str, languages: Sequence[str]) -> float | None:
    """Percentage of the non-empty `outputs` that py3langid, choosing among `languages`, does not identify
    as `lang` (0 when every output is empty); None when the rate is skipped (see `_identifier`)."""
    identifier = _identifier(tuple(sorted(set(languages))))
    if identifier is None:
        return None
    texts = [text for text in outputs if text.strip()]
    wrong = sum(identifier.classify(text)[0] != lang for text in texts)
    return round(100.0 * wrong / max(len(texts), 1), 2)
