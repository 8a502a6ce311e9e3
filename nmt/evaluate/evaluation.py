"""`nmt evaluate`: translate a split (or any source file) with a trained run and score it against its
references (nmt/evaluate/scores.py): every direction of the split (nmt/evaluate/directions.py
`evaluate_split`), or the one direction asked for; the hypotheses are kept in the run directory."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from nmt.data.corpus import ParallelText, SplitFiles, read_files
from nmt.data.splits import language_split, read_direction
from nmt.decode.languages import Asked, Translates, into_direction
from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator
from nmt.device.choice import resolve_device
from nmt.errors import UserError
from nmt.evaluate.directions import evaluate_split, search_settings
from nmt.evaluate.hypotheses import HypothesisFiles, source_tag
from nmt.evaluate.off_target import off_target_rate
from nmt.evaluate.scores import score


def scored(
    run: TrainedRun, translator: Translates, text: ParallelText, files: HypothesisFiles, name: str
) -> dict[str, Any]:
    """Translate the source side of `text` with `translator` (of the loaded `run`, settings from
    `run.cfg.search`), keep the hypotheses (in `files`, as `name`) and score them against the target side;
    returns scores, signatures and settings."""
    hypotheses = translator.translate(text.src)
    hyp_path = files.keep(name, hypotheses)
    return score(hypotheses, text.tgt).as_dict() | search_settings(run) | {"hypotheses": str(hyp_path)}


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
    The hypotheses go to files named by their source, checkpoint and search (nmt/evaluate/hypotheses.py),
    never over those the run's report points to.

    Every direction of the split is scored, unless `asked` names one (a multilingual run's: zero-shot, or
    through a pivot language, when it says so; with its off-target rate) or files are given.
    """
    if (src is None) != (ref is None):
        raise UserError("--src and --ref go together: give both files or neither")
    if split not in ("valid", "test"):
        raise UserError(f"--split {split}: expected valid or test")
    run = load_trained(run_dirs, resolve_device(device), checkpoint, overrides or [])
    tag = f".ensemble{len(run_dirs)}" if len(run_dirs) > 1 else ""
    if data_dir is not None:
        if run.cfg.data.dir is None or data_dir.resolve() != Path(run.cfg.data.dir).resolve():
            tag += f".data-{source_tag(data_dir)}"
        data = replace(run.cfg.data, dir=str(data_dir), train=None, valid=None, test=None)
        run = replace(run, cfg=replace(run.cfg, data=data))
    asked = asked or Asked()
    files = HypothesisFiles.of_run(run, tag, protect_report=True)
    runs = {"runs": [str(path) for path in run_dirs]}
    given = SplitFiles(src, ref) if src is not None and ref is not None else None
    if given is None and asked == Asked():
        return evaluate_split(run, split, files=files) | runs
    if run.cfg.data.directions.tagged and asked == Asked():
        raise UserError("--src and --ref: name their languages with --src-lang and --tgt-lang")
    translator = into_direction(TorchTranslator.of_run(run), asked)  # checks the direction asked for
    return _evaluate_direction(run, translator, asked, split, given, files) | runs


def _evaluate_direction(
    run: TrainedRun,
    translator: Translates,
    asked: Asked,
    split: str,
    given: SplitFiles | None,
    files: HypothesisFiles,
) -> dict[str, Any]:
    """One direction: its pairs of `split`, or the `given` files, scored (a multilingual run's with the
    off-target rate)."""
    directions = run.cfg.data.directions
    direction = asked.direction() if directions.tagged else directions.pairs[0]
    origin = split if given is None else f"{given.src.name}.{source_tag(given.src)}"
    name = origin + directions.file_part(direction) + asked.through()
    if given is None:
        text = read_direction(run.cfg.data, direction, split)
        source = language_split(run.cfg.data, split).pair_files(direction).src
    else:
        data = run.cfg.data
        text, source = read_files(given, name, data.skip_bad_lines, data.unescape_entities), given.src
    found = scored(run, translator, text, files, name) | {"source": str(source)}
    if not directions.tagged:
        return found
    hypotheses = Path(found["hypotheses"]).read_text(encoding="utf-8").splitlines()
    rate = off_target_rate(hypotheses, direction.tgt, directions.languages)
    return found | {"direction": direction.name, "off_target": rate}
