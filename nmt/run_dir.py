"""The run directory `nmt train` writes: checked against --resume/--overwrite before anything is written."""

from __future__ import annotations

from pathlib import Path

from nmt.checkpoint import CONFIG_FILE, METRICS_FILE
from nmt.config import Config, load_config, save_config, with_absolute_paths
from nmt.data.prepare import PreparedData, prepare_data
from nmt.errors import UserError


def prepare_run(cfg: Config, run_dir: Path, resume: bool, overwrite: bool) -> PreparedData:
    """Check the run directory against --resume/--overwrite, then read, tokenize and save the config."""
    if run_dir.exists() and not run_dir.is_dir():
        raise UserError(f"--out {run_dir} is a file; pass a directory for the run")
    if resume:
        if not (run_dir / "last.pt").is_file():
            raise UserError(
                f"--resume: {run_dir} holds no last.pt to resume from; drop --resume to start a new run"
            )
        check_same_setup(cfg, run_dir)
    elif (run_dir / "last.pt").exists() or (run_dir / "best.pt").exists():
        if not overwrite:
            raise UserError(
                f"{run_dir} already holds a trained run; pass --resume to continue it or --overwrite"
            )
        for name in ("last.pt", "best.pt", METRICS_FILE):
            (run_dir / name).unlink(missing_ok=True)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"cannot create the run directory {run_dir}: {err.strerror}") from err
    for stale in run_dir.glob(".*.pt.*.tmp"):  # a checkpoint being written when a run was killed
        stale.unlink()
    data = prepare_data(cfg, run_dir, reuse_tokenizers=resume)
    save_config(cfg, run_dir / CONFIG_FILE)
    return data


def check_same_setup(cfg: Config, run_dir: Path) -> None:
    """Resuming needs the same data, tokenizer and model settings as the run was started with."""
    saved = with_absolute_paths(load_config(run_dir / CONFIG_FILE))
    for section in ("data", "tokenizer", "model"):
        if getattr(saved, section) != getattr(cfg, section):
            raise UserError(
                f"the {section} settings differ from {run_dir / CONFIG_FILE}; resume with the same config"
            )
