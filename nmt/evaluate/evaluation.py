"""`nmt evaluate`: translate a split (or any source file) with a trained run and score it against its
references (nmt/evaluate/scores.py), a multilingual run's direction by direction; the hypotheses are kept in
the run directory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from nmt.atomic_files import atomic_write_text
from nmt.data.corpus import ParallelText, SplitFiles, read_files, split_files
from nmt.data.language_files import read_direction
from nmt.decode.languages import Asked, Translates, into_direction
from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator
from nmt.device.choice import resolve_device
from nmt.errors import UserError
from nmt.evaluate.directions import evaluate_directions
from nmt.evaluate.off_target import off_target_rate
from nmt.evaluate.scores import score


def evaluate(
    run: TrainedRun, files: SplitFiles, name: str, progress: Callable[[int], object] | None = None
) -> dict[str, Any]:
    """Translate the source side of `files` with a loaded run (settings from `run.cfg.search`) and score it
    against the target side (`scored`)."""
    text = read_files(files, name, run.cfg.data.skip_bad_lines)
    return scored(run, TorchTranslator.of_run(run), text, name, progress) | {"source": str(files.src)}


def scored(
    run: TrainedRun,
    translator: Translates,
    text: ParallelText,
    name: str,
    progress: Callable[[int], object] | None = None,
) -> dict[str, Any]:
    """Translate the source side of `text` with `translator` (of the loaded `run`, settings from
    `run.cfg.search`) and score it against the target side (`progress` is told the sentences of each batch
    translated).

    The hypotheses are written to `RUN_DIR/eval/<name>[.<checkpoint>].beam<k>.hyp`; returns scores,
    signatures and settings.
    """
    search = run.cfg.search
    hypotheses = translator.translate(text.src, progress)
    tag = "" if run.checkpoint_name == "best" else f".{run.checkpoint_name}"
    hyp_path = run.directory.eval_dir / f"{name}{tag}.beam{search.beam_size}.hyp"
    atomic_write_text(hyp_path, "".join(h + "\n" for h in hypotheses))
    settings = {
        "beam_size": search.beam_size,
        "length_penalty": search.length_penalty,
        "checkpoint": run.checkpoint_name,
    }
    return score(hypotheses, text.tgt).as_dict() | settings | {"hypotheses": str(hyp_path)}


def evaluate_run(
    run_dirs: list[Path],
    split: str,
    src: Path | None,
    ref: Path | None,
    device: str,
    checkpoint: str | None = None,
    data_dir: Path | None = None,
    overrides: list[str] | None = None,
    asked: Asked | None = None,
) -> dict[str, Any]:
    """`nmt evaluate`: score a split of the (first) run's data (read from `data_dir` when given, else from
    where the run was trained), or --src against --ref, with `<checkpoint>.pt` (best, last or averaged; by
    default the one the run's report chose), and the search settings `overrides` (`search.beam_size=3`).
    Several runs decode as an ensemble, its hypotheses written to the first run's eval/<name>.ensemble<n>….

    A multilingual run scores the direction `asked` names (zero-shot, or through a pivot language, when it
    says so; its off-target rate too), else every direction of the split (`evaluate_directions`).
    """
    if (src is None) != (ref is None):
        raise UserError("--src and --ref go together: give both files or neither")
    if split not in ("valid", "test"):
        raise UserError(f"--split {split}: expected valid or test")
    run = load_trained(run_dirs, resolve_device(device), checkpoint, overrides or [])
    if data_dir is not None:
        data = replace(run.cfg.data, dir=str(data_dir), train=None, valid=None, test=None)
        run = replace(run, cfg=replace(run.cfg, data=data))
    asked = asked or Asked()
    ensemble = f".ensemble{len(run_dirs)}" if len(run_dirs) > 1 else ""
    runs = {"runs": [str(path) for path in run_dirs]}
    ml = run.cfg.data.multilingual
    given = SplitFiles(src, ref) if src is not None and ref is not None else None
    if ml is None:
        files = given or split_files(run.cfg.data, split)
        name = (split if src is None else src.name) + ensemble
        translator = into_direction(TorchTranslator.of_run(run), asked)  # checks the pair asked for
        text = read_files(files, name, run.cfg.data.skip_bad_lines)
        return scored(run, translator, text, name) | {"source": str(files.src)} | runs
    if asked == Asked():
        if src is not None:
            raise UserError("--src and --ref: name their languages with --src-lang and --tgt-lang")
        return evaluate_directions(run, split) | runs
    return _evaluate_direction(run, asked, split, given, ensemble, ml.languages) | runs


def _evaluate_direction(
    run: TrainedRun,
    asked: Asked,
    split: str,
    given: SplitFiles | None,
    ensemble: str,
    languages: tuple[str, ...],
) -> dict[str, Any]:
    """One direction of a multilingual run: its pairs of `split`, or the `given` files, scored with the
    off-target rate (`languages`: those an output may be identified as)."""
    translator = into_direction(TorchTranslator.of_run(run), asked)
    direction = asked.direction()
    name = (split if given is None else given.src.name) + f".{direction.name}{asked.through()}{ensemble}"
    if given is None:
        text = read_direction(run.cfg.data, direction, split)
    else:
        text = read_files(given, name, run.cfg.data.skip_bad_lines)
    found = scored(run, translator, text, name)
    rate = off_target_rate(Path(found["hypotheses"]).read_text().splitlines(), direction.tgt, languages)
    source = split if given is None else str(given.src)
    return found | {"direction": direction.name, "off_target": rate, "source": source}
