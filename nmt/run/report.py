"""A run's report.json, read in one place: every split's scores, per checkpoint, in one shape for every run,
bilingual or multilingual — the means (`bleu`, `chrf`, `off_target`), the search they were taken with, and a
`directions` map holding each direction's scores (a bilingual run's: its one direction). A report written
before a bilingual run had the map is read in today's shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SEARCH_KEYS = ("beam_size", "length_penalty", "search", "checkpoint")  # how a split was scored, not a score


def with_directions(scores: dict[str, Any], direction: str) -> dict[str, Any]:
    """One direction's split scores (every metric, its files and the search) in the shape of a multilingual
    run's: the means, equal to the direction's, the search, and `directions` holding the direction's scores
    (no off-target rate: a bilingual run's outputs are not identified)."""
    own = {key: value for key, value in scores.items() if key not in SEARCH_KEYS} | {"off_target": None}
    search = {key: scores[key] for key in SEARCH_KEYS if key in scores}
    means = {"bleu": scores.get("bleu"), "chrf": scores.get("chrf"), "off_target": None}
    return means | search | {"directions": {direction: own}}


def read_report(path: Path) -> dict[str, Any]:
    """report.json at `path`, its splits in today's shape whatever the version that wrote it; OSError or
    ValueError where it is missing or not JSON."""
    report = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(report, dict):
        raise ValueError(f"{path} holds no report")
    data = (report.get("config") or {}).get("data") or {}
    direction = f"{data.get('src_lang')}-{data.get('tgt_lang')}"
    for split in ("valid", "test"):
        for checkpoint, scores in (report.get(split) or {}).items():
            if isinstance(scores, dict) and "directions" not in scores and "bleu" in scores:
                report[split][checkpoint] = with_directions(scores, direction)
    return report
