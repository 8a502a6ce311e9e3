"""After training: beam-search scores on valid and test, learning curves, attention heatmaps, report.json."""

from __future__ import annotations

import functools
import json
import logging
import statistics
import subprocess
from pathlib import Path
from typing import Any

import torch

from nmt import __version__
from nmt.average import AVERAGED, average_run
from nmt.checkpoint import METRICS_FILE, REPORT_FILE, load_checkpoint, load_run, snapshots
from nmt.config import Config, to_dict
from nmt.data.corpus import read_split
from nmt.errors import UserError
from nmt.evaluate import evaluate_run
from nmt.files import atomic_write_text
from nmt.plot import save_heatmap, save_learning_curves
from nmt.translate import align

log = logging.getLogger(__name__)

HEATMAPS = 3  # validation sentences drawn


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / METRICS_FILE
    return (
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    )


def git_revision() -> str | None:
    """The commit of the nmt source tree when the package itself is a git checkout (an editable install),
    else None: an installed package inside some other repository must not record that one."""
    package_root = Path(__file__).resolve().parent.parent
    try:
        run = functools.partial(subprocess.run, cwd=package_root, capture_output=True, text=True, timeout=10,
                                check=True)  # fmt: skip
        top = run(["git", "rev-parse", "--show-toplevel"]).stdout.strip()
        if not top or Path(top).resolve() != package_root:
            return None
        return run(["git", "rev-parse", "HEAD"]).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _has_test_split(cfg: Config) -> bool:
    try:
        read_split(cfg.data, "test")
    except UserError:
        return False
    return True


def average_snapshots(cfg: Config, run_dir: Path) -> list[int]:
    """Average the last `train.average_checkpoints` snapshots into averaged.pt, or as many as the run kept
    (a run stopped early keeps fewer); returns the averaged steps (empty when fewer than two exist)."""
    wanted, kept = cfg.train.average_checkpoints, len(snapshots(run_dir))
    if not wanted:
        return []
    if kept < 2:
        log.info(
            "train.average_checkpoints=%d: the run kept %d snapshot(s), nothing to average", wanted, kept
        )
        return []
    if kept < wanted:
        log.info("train.average_checkpoints=%d: the run stopped after keeping %d snapshots; averaging those",
                 wanted, kept)  # fmt: skip
    averaged = average_run(run_dir, min(wanted, kept))
    return load_checkpoint(averaged)["averaged_steps"]


def final_report(cfg: Config, run_dir: Path, device: str) -> dict[str, Any]:
    """Score the best (or the averaged) checkpoint with beam search and write the run's report files."""
    averaged_steps = average_snapshots(cfg, run_dir)
    candidates = ["best", AVERAGED.removesuffix(".pt")] if averaged_steps else ["best"]
    valid = {
        name: evaluate_run(run_dir, "valid", None, None, None, None, device, name) for name in candidates
    }
    chosen = max(candidates, key=lambda name: valid[name]["bleu"])
    test = (
        {chosen: evaluate_run(run_dir, "test", None, None, None, None, device, chosen)}
        if _has_test_split(cfg)
        else None
    )
    records = read_metrics(run_dir)
    save_learning_curves(records, run_dir / "curves.png")
    draw_heatmaps(run_dir, cfg, device, chosen)
    report = summary(cfg, run_dir, records, valid, chosen, test) | {
        "averaging": {"requested": cfg.train.average_checkpoints, "averaged_steps": averaged_steps}
    }
    atomic_write_text(run_dir / REPORT_FILE, json.dumps(report, indent=2) + "\n")
    tested = f", test BLEU {test[chosen]['bleu']:.2f}" if test else ""
    log.info("valid BLEU %.2f%s (%s checkpoint); report in %s", valid[chosen]["bleu"], tested, chosen,
             run_dir / REPORT_FILE)  # fmt: skip
    return report


def draw_heatmaps(run_dir: Path, cfg: Config, device: str, checkpoint: str) -> None:
    """Attention of the first validation sentences, as attention/valid-<i>.png."""
    from nmt.device import resolve_device

    run = load_run(run_dir, resolve_device(device), checkpoint)
    for i, sentence in enumerate(read_split(cfg.data, "valid").src[:HEATMAPS]):
        alignment = align(run, sentence)
        weights = alignment.weights[-1].mean(dim=0)  # last layer, mean of heads: (tgt_len, src_len)
        path = run_dir / "attention" / f"valid-{i}.png"
        save_heatmap(weights, alignment.src_pieces, alignment.tgt_pieces, path, alignment.translation)


def summary(cfg: Config, run_dir: Path, records: list[dict[str, Any]], valid: dict[str, dict[str, Any]],
            chosen: str, test: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """The contents of report.json."""
    progress = load_checkpoint(run_dir / "last.pt")["progress"]
    validations = [r for r in records if r["kind"] == "valid"]
    at_best = next((r for r in validations if r["step"] == progress["best_step"]), None)
    speeds = [r["target_tokens_per_s"] for r in records if r["kind"] == "train"]
    speeds = speeds[1:] or speeds  # the first window holds the warm-up, unless it is the only one
    return {
        "model": cfg.model.type,
        "seed": cfg.train.seed,
        "nmt_version": __version__,
        "git_revision": git_revision(),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "checkpoint": chosen,
        "valid": valid,
        "test": test,
        "best_step": progress["best_step"],
        "best_valid_bleu_greedy": progress["best_bleu"],
        "seconds_to_best": at_best["elapsed"] if at_best else None,
        "training_seconds": progress["elapsed"],
        "steps": progress["step"],
        "target_tokens_per_s": statistics.median(speeds) if speeds else None,
        "config": to_dict(cfg),
    }
