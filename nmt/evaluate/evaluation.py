"""`nmt evaluate`: translate a split (or any source file) with a trained run and score it against its
references (nmt/evaluate/scores.py); the hypotheses are kept in the run directory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from nmt.atomic_files import atomic_write_text
from nmt.data.corpus import SplitFiles, read_files, split_files
from nmt.decode.trained_run import TrainedRun, load_runs
from nmt.decode.translator import TorchTranslator
from nmt.device import resolve_device
from nmt.errors import UserError
from nmt.evaluate.scores import score


def evaluate(
    run: TrainedRun, files: SplitFiles, name: str, progress: Callable[[int], object] | None = None
) -> dict[str, Any]:
    """Translate the source side of `files` with a loaded run (settings from `run.cfg.search`) and score it
    against the target side (`progress` is told the sentences of each batch translated).

    The hypotheses are written to `RUN_DIR/eval/<name>[.<checkpoint>].beam<k>.hyp`; returns scores,
    signatures and settings.
    """
    text = read_files(files, name, run.cfg.data.skip_bad_lines)
    search = run.cfg.search
    hypotheses = TorchTranslator.of_run(run).translate(text.src, progress)
    tag = "" if run.checkpoint_name == "best" else f".{run.checkpoint_name}"
    hyp_path = run.directory.eval_dir / f"{name}{tag}.beam{search.beam_size}.hyp"
    atomic_write_text(hyp_path, "".join(h + "\n" for h in hypotheses))
    settings = {
        "beam_size": search.beam_size,
        "length_penalty": search.length_penalty,
        "checkpoint": run.checkpoint_name,
    }
    return (
        score(hypotheses, text.tgt).as_dict()
        | settings
        | {"source": str(files.src), "hypotheses": str(hyp_path)}
    )


def evaluate_run(
    run_dirs: list[Path],
    split: str,
    src: Path | None,
    ref: Path | None,
    device: str,
    checkpoint: str | None = None,
    data_dir: Path | None = None,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """`nmt evaluate`: score a split of the (first) run's data (read from `data_dir` when given, else from
    where the run was trained), or --src against --ref, with `<checkpoint>.pt` (best, last or averaged; by
    default the one the run's report chose), and the search settings `overrides` (`search.beam_size=3`).
    Several runs decode as an ensemble, its hypotheses written to the first run's eval/<name>.ensemble<n>….
    """
    if (src is None) != (ref is None):
        raise UserError("--src and --ref go together: give both files or neither")
    if split not in ("valid", "test"):
        raise UserError(f"--split {split}: expected valid or test")
    run = load_runs(run_dirs, resolve_device(device), checkpoint, overrides or [])
    if run.cfg.data.multilingual is not None:
        raise UserError(
            f"{run_dirs[0]} is a multilingual run, and nmt evaluate takes no direction yet; its report.json "
            f"holds every direction's valid and test scores"
        )
    ensemble = f".ensemble{len(run_dirs)}" if len(run_dirs) > 1 else ""
    runs = {"runs": [str(path) for path in run_dirs]}
    if src is not None and ref is not None:
        return evaluate(run, SplitFiles(src, ref), src.name + ensemble) | runs
    data = (
        run.cfg.data if data_dir is None else replace(run.cfg.data, dir=str(data_dir), valid=None, test=None)
    )
    return evaluate(run, split_files(data, split), split + ensemble) | runs
