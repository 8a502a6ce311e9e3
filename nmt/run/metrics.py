"""A run's metrics.jsonl: one JSON record per log interval ("train") and per validation ("valid")."""

from __future__ import annotations

import json
import math
from typing import Any

from nmt.atomic_files import atomic_write_text
from nmt.run.directory import RunDir


def append_metrics(run_dir: RunDir, record: dict[str, Any]) -> None:
    with open(run_dir.metrics, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def read_metrics(run_dir: RunDir) -> list[dict[str, Any]]:
    if not run_dir.metrics.exists():
        return []
    return [json.loads(line) for line in run_dir.metrics.read_text(encoding="utf-8").splitlines()]


def forget_metrics_after(run_dir: RunDir, step: int) -> None:
    """Drop the metrics a killed run logged after its last checkpoint (and a line torn by the kill)."""

    def step_of(line: str) -> float:
        try:
            return json.loads(line)["step"]
        except (ValueError, KeyError, TypeError):
            return math.inf

    if run_dir.metrics.is_file():
        lines = run_dir.metrics.read_text(encoding="utf-8").splitlines()
        kept = [line for line in lines if step_of(line) <= step]
        if len(kept) < len(lines):
            atomic_write_text(run_dir.metrics, "".join(line + "\n" for line in kept))
