"""What training shows while it runs: metrics.jsonl, a progress bar on a terminal (log lines without one),
RUN_DIR/train.log and, when asked for, TensorBoard event files."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm import tqdm

from nmt.config.sections import TrainConfig
from nmt.errors import UserError
from nmt.evaluate.directions import direction_scalars
from nmt.run.directory import RunDir
from nmt.run.metrics import append_metrics
from nmt.train.distributed import World

log = logging.getLogger(__name__)


def remaining_seconds(cfg: TrainConfig, step: int, elapsed: float) -> float | None:
    """Seconds until the step or time limit stops training (the nearer one, at the pace so far); None without
    such a limit."""
    estimates = []
    if cfg.max_steps and step and elapsed > 0:
        estimates.append(max(0, cfg.max_steps - step) * elapsed / step)
    if cfg.max_time:
        estimates.append(max(0.0, cfg.max_time - elapsed))
    return min(estimates) if estimates else None


def clock(seconds: float | None) -> str:
    """H:MM:SS, or '?' when unknown."""
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


@contextlib.contextmanager
def run_log(path: Path) -> Iterator[None]:
    """Also write every record of the `nmt` loggers into `path` for the block, each line with its time,
    appended (a resumed run continues the file); training records are written there also while a progress bar
    shows them on the terminal instead (`bar_shown`), and so is the user error that ends the block."""
    try:
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror}") from err
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    logger = logging.getLogger("nmt")
    logger.addHandler(handler)
    try:
        yield
    except UserError as err:
        record = {"levelno": logging.ERROR, "levelname": "ERROR", "msg": str(err)}
        handler.handle(logging.makeLogRecord(record))
        raise
    finally:
        logger.removeHandler(handler)
        handler.close()


class Monitor:
    """Progress of one training process. Only the main process writes and shows anything.

    On a terminal a tqdm bar counts updates (its total and ETA follow the step or time limit) and log lines
    are written through it; without a terminal (nohup, tee, a batch job) every training record becomes an
    INFO log line instead.
    """

    def __init__(self, cfg: TrainConfig, run_dir: RunDir, is_main: bool, step: int) -> None:
        self.cfg, self.run_dir, self.is_main = cfg, run_dir, is_main
        self.bar = tqdm(
            total=cfg.max_steps or None,
            initial=step,
            unit="step",
            dynamic_ncols=True,
            disable=None if is_main else True,  # None: off when stderr is not a terminal
            mininterval=1.0,
        )
        self.events = open_tensorboard(cfg, run_dir) if is_main else None

    def close(self) -> None:
        self.bar.close()
        if self.events is not None:
            self.events.close()

    def update(self) -> None:
        """One more optimizer update."""
        self.bar.update(1)

    def train(self, step: int, epoch: int, record: dict[str, float]) -> None:
        """A training window: loss, lr, target tokens/s, elapsed seconds (earlier processes of the run
        included)."""
        if not self.is_main:
            return
        self._append("train", step, epoch, record)
        keys = ("loss", "align_loss", "lr", "target_tokens_per_s")
        self._scalars(step, {f"train/{key}": record[key] for key in keys if key in record})
        eta = remaining_seconds(self.cfg, step, record["elapsed"])
        if not self.bar.disable:
            if eta is not None:  # the steps the nearer limit leaves at the pace so far: tqdm shows the ETA
                self.bar.total = step + round(eta * step / max(record["elapsed"], 1e-9))
            self.bar.set_postfix(
                loss=f"{record['loss']:.3f}",
                lr=f"{record['lr']:.2e}",
                tok_s=f"{record['target_tokens_per_s']:.0f}",
            )
        limit = f"/{self.cfg.max_steps}" if self.cfg.max_steps else ""
        log.info(
            "step %d%s: loss %.3f%s, lr %.2e, %.0f target tok/s, elapsed %s, ETA %s",
            step,
            limit,
            record["loss"],
            f", alignment loss {record['align_loss']:.3f}" if "align_loss" in record else "",
            record["lr"],
            record["target_tokens_per_s"],
            clock(record["elapsed"]),
            clock(eta),
            extra={"bar_shown": not self.bar.disable},
        )

    def valid(self, step: int, epoch: int, record: dict[str, Any]) -> None:
        """A validation: loss, BLEU, chrF, elapsed seconds; with a gold alignment set also AER; a multilingual
        run's also the off-target rate and each direction's scores (`directions`)."""
        if not self.is_main:
            return
        self._append("valid", step, epoch, record)
        kinds = ("loss", "bleu", "chrf", "aer", "off_target")
        scalars = {key: record[key] for key in kinds if record.get(key) is not None}
        scalars |= direction_scalars(record)
        self._scalars(step, {f"valid/{key}": value for key, value in scalars.items()})

    def _append(self, kind: str, step: int, epoch: int, record: dict[str, Any]) -> None:
        append_metrics(self.run_dir, {"kind": kind, "step": step, "epoch": epoch} | record)

    def _scalars(self, step: int, values: dict[str, float]) -> None:
        if self.events is not None:
            for tag, value in values.items():
                self.events.add_scalar(tag, value, step)
            self.events.flush()


def open_tensorboard(cfg: TrainConfig, run_dir: RunDir) -> Any:
    """A TensorBoard SummaryWriter into `train.tensorboard_dir` (default RUN_DIR/tensorboard), or None."""
    if not cfg.tensorboard:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:
        raise UserError(
            "train.tensorboard needs the tensorboard package: pip install tensorboard (or nmt[tensorboard])"
        ) from err
    directory = Path(cfg.tensorboard_dir) if cfg.tensorboard_dir else run_dir.tensorboard
    log.info("TensorBoard events go to %s (tensorboard --logdir %s)", directory, directory)
    return SummaryWriter(log_dir=str(directory))


class LossWindow:
    """Loss and target tokens since the last log line, summed on the device (no per-update sync); `flush`
    sums them over all processes and starts a new window."""

    def __init__(self, device: torch.device, world: World) -> None:
        self.device, self.world = device, world
        self.reset()

    def reset(self) -> None:
        self.loss = torch.zeros((), device=self.device)
        self.tokens = torch.zeros((), device=self.device, dtype=torch.long)
        self.started = time.perf_counter()

    def add(self, loss: Tensor, tokens: Tensor) -> None:
        self.loss += loss
        self.tokens += tokens

    def carry(self, loss: float, tokens: int, seconds: float) -> None:
        """Start a window that already holds `loss`, `tokens` and `seconds`: the part of one that a resumed
        run's checkpoint saved (see `partial`). The main process holds them, as `flush` sums all processes."""
        self.reset()
        self.started -= seconds
        if self.world.is_main:
            self.loss += loss
            self.tokens += tokens

    def partial(self) -> tuple[float, int, float]:
        """The window so far (loss and tokens summed over all processes, seconds), for a checkpoint; every
        process must call this."""
        seconds = time.perf_counter() - self.started
        return self.world.sum(self.loss).item(), int(self.world.sum(self.tokens).item()), seconds

    def flush(self, aligned: Tensor | None = None) -> dict[str, float]:
        """The window's mean loss per target token (nan when every update was skipped) and tokens/s; given
        the alignment loss summed since the last flush (`Update.alignment_sum`, reset here), its mean per
        target token as `align_loss`."""
        loss, tokens, seconds = self.partial()
        self.reset()
        record = {
            "loss": loss / tokens if tokens else math.nan,
            "target_tokens_per_s": tokens / max(seconds, 1e-9),
        }
        if aligned is not None:
            record["align_loss"] = self.world.sum(aligned).item() / tokens if tokens else math.nan
            aligned.zero_()
        return record
