"""After training: beam-search scores on valid and test, learning curves, attention heatmaps, report.json."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from nmt import __version__
from nmt.atomic_files import atomic_write_text
from nmt.config.schema import Config
from nmt.config.yaml_file import to_dict
from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from nmt.device.choice import resolve_device
from nmt.evaluate.directions import describe_directions, draw_heatmaps, evaluate_split, split_lines
from nmt.evaluate.plots import save_learning_curves
from nmt.run.average import average_run
from nmt.run.checkpoint_io import load_checkpoint
from nmt.run.directory import RunDir
from nmt.run.metrics import read_metrics
from nmt.run.report import with_directions

log = logging.getLogger(__name__)

HEATMAPS = 3  # validation sentences drawn


def git_revision() -> str | None:
    """The commit of the nmt source tree when the package itself is a git checkout (an editable install),
    else None: an installed package inside some other repository must not record that one."""
    package_root = Path(__file__).resolve().parent.parent
    try:
        run = functools.partial(
            subprocess.run, cwd=package_root, capture_output=True, text=True, timeout=10, check=True
        )
        top = run(["git", "rev-parse", "--show-toplevel"]).stdout.strip()
        if not top or Path(top).resolve() != package_root:
            return None
        return run(["git", "rev-parse", "HEAD"]).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def average_snapshots(cfg: Config, run_dir: RunDir) -> list[int]:
    """Average the last `train.average_checkpoints` snapshots into averaged.pt, or as many as the run kept
    (a run stopped early keeps fewer); returns the averaged steps (empty when fewer than two exist)."""
    wanted, kept = cfg.train.average_checkpoints, len(run_dir.snapshots())
    if not wanted:
        return []
    if kept < 2:
        log.info(
            "train.average_checkpoints=%d: the run kept %d snapshot(s), nothing to average", wanted, kept
        )
        return []
    if kept < wanted:
        log.info(
            "train.average_checkpoints=%d: the run stopped after keeping %d snapshots; averaging those",
            wanted,
            kept,
        )
    return load_checkpoint(average_run(run_dir, min(wanted, kept)))["averaged_steps"]


def final_report(cfg: Config, run_dir: RunDir, device: str) -> dict[str, Any]:
    """Score the best (and the averaged) checkpoint with beam search on the validation split, the better of
    them on the test split, and write the run's report files. It runs after training, outside
    `train.max_time`: a log line says first what it will translate, and its progress is shown. A multilingual
    run is scored direction by direction (nmt/evaluate/directions.py), and chosen by the mean BLEU."""
    started = time.monotonic()
    averaged_steps = average_snapshots(cfg, run_dir)
    runs = {
        name: load_trained([run_dir.path], resolve_device(device), name)
        for name in (["best", "averaged"] if averaged_steps else ["best"])
    }
    splits = Splits(cfg)
    with contextlib.closing(ReportProgress(cfg, splits, list(runs))) as progress:
        valid = {name: progress.evaluate(splits, run, "valid") for name, run in runs.items()}
        chosen = max(runs, key=lambda name: valid[name]["bleu"])
        test = {chosen: progress.evaluate(splits, runs[chosen], "test")} if splits.test_lines else None
    records = read_metrics(run_dir)
    save_learning_curves(records, run_dir.curves)
    draw_heatmaps(runs[chosen], run_dir.attention_dir, HEATMAPS)
    seconds = time.monotonic() - started
    report = summary(cfg, run_dir, records, valid, chosen, test) | {
        "averaging": {"requested": cfg.train.average_checkpoints, "averaged_steps": averaged_steps},
        "report_seconds": round(seconds, 1),
    }
    atomic_write_text(run_dir.report, json.dumps(report, indent=2) + "\n")
    tested = f", test BLEU {test[chosen]['bleu']:.2f}" if test else ""
    log.info(
        "final report done in %.0f s: valid BLEU %.2f%s (%s checkpoint); report in %s",
        seconds,
        valid[chosen]["bleu"],
        tested,
        chosen,
        run_dir.report,
    )
    return report


class Splits:
    """What the final report scores: every direction of the validation split and, when there is one, of the
    test split."""

    def __init__(self, cfg: Config) -> None:
        self.valid_lines = split_lines(cfg, "valid") or 0
        self.test_lines = split_lines(cfg, "test") or 0  # 0: no test split

    def evaluate(self, run: TrainedRun, split: str, progress: Callable[[int], object]) -> dict[str, Any]:
        """The split's scores in report.json's one shape (nmt/run/report.py): a bilingual run's one
        direction under `directions` too."""
        scores = evaluate_split(run, split, progress)
        if "directions" not in scores:
            (direction,) = run.cfg.data.directions.directions
            return with_directions(scores, direction.name)
        log.info("final report: %s %s", split, describe_directions(scores))
        return scores


class ReportProgress:
    """What the final report does, said before it starts; then a bar over the sentences it translates (on a
    terminal) and a log line for each split and checkpoint scored."""

    def __init__(self, cfg: Config, splits: Splits, checkpoints: list[str]) -> None:
        names = " and ".join(f"{name}.pt" for name in checkpoints)
        better = " with the better one" if len(checkpoints) > 1 else ""
        then = f", then {splits.test_lines} test sentences{better}" if splits.test_lines else ""
        log.info(
            "final report (after training, outside train.max_time; train.final_report=false skips it): "
            "beam %d on %d validation sentences with %s%s",
            cfg.search.beam_size,
            splits.valid_lines,
            names,
            then,
        )
        total = splits.valid_lines * len(checkpoints) + splits.test_lines
        self.bar = tqdm(total=total, unit="sent", desc="final report", disable=None, mininterval=1.0)

    def evaluate(self, splits: Splits, run: TrainedRun, split: str) -> dict[str, Any]:
        """The split's scores, with the bar moving; logs the score and the time it took."""
        started = time.monotonic()
        scores = splits.evaluate(run, split, self.bar.update)
        log.info(
            "final report: %s BLEU %.2f with %s.pt (%.0f s)",
            split,
            scores["bleu"],
            run.checkpoint_name,
            time.monotonic() - started,
        )
        return scores

    def close(self) -> None:
        self.bar.close()


def summary(
    cfg: Config,
    run_dir: RunDir,
    records: list[dict[str, Any]],
    valid: dict[str, dict[str, Any]],
    chosen: str,
    test: dict[str, Any] | None,
) -> dict[str, Any]:
    """The contents of report.json."""
    progress = load_checkpoint(run_dir.checkpoint("last"))["progress"]
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
        "stop_reason": progress.get("stop_reason") or None,  # why training stopped (StopReason)
        "steps": progress["step"],
        "batch_tokens": progress.get("batch_tokens") or cfg.train.batch_tokens,  # what `auto` chose
        "parent": progress.get("parent") or None,  # --init-from
        "target_tokens_per_s": statistics.median(speeds) if speeds else None,
        "config": to_dict(cfg),
    }
