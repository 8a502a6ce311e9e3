"""`nmt evaluate`: translate a split (or any source file) with a trained run and score it against its
references (nmt/evaluate/scores.py): every direction of the split (nmt/evaluate/directions.py
`evaluate_split`), or the one direction asked for, compared with a baseline and scored by COMET where asked
(nmt/evaluate/systems.py); the hypotheses are kept in the run directory. Or score any system's hypotheses
file, with no run (`evaluate_files`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from nmt.config.multilingual import Direction
from nmt.data.corpus import SplitFiles, read_files
from nmt.data.glossary import TermFinder, for_direction, nfkc, read_glossary
from nmt.data.splits import language_split, read_direction
from nmt.decode.languages import Asked, Translates, into_direction
from nmt.decode.loading import load_trained
from nmt.decode.terminology import Constraining, TrainedMarkers
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator, Translator
from nmt.device.choice import resolve_device
from nmt.errors import UserError
from nmt.evaluate.directions import evaluate_split, search_settings
from nmt.evaluate.hypotheses import HypothesisFiles, source_tag
from nmt.evaluate.off_target import off_target_rate
from nmt.evaluate.scores import score
from nmt.evaluate.systems import Judging, TranslateBaseline, baseline_of, judged, read_outputs, score_files
from nmt.evaluate.term_use import term_use


def data_tag(run: TrainedRun, data_dir: Path) -> str:
    """What a hypothesis file's name adds for a split read from `data_dir`: `.data-<digest>` where it is not
    the run's own data directory, else nothing."""
    if run.cfg.data.dir is not None and data_dir.resolve() == Path(run.cfg.data.dir).resolve():
        return ""
    return f".data-{source_tag(data_dir)}"


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
    judging: Judging | None = None,
    glossary: Path | None = None,
) -> dict[str, Any]:
    """`nmt evaluate`: score a split of the (first) run's data (read from `data_dir` when given, else from
    where the run was trained), or --src against --ref, with `<checkpoint>.pt` (best, last or averaged; by
    default the one the run's report chose), and the search settings `overrides` (`search.beam_size=3`).
    Several runs decode as an ensemble, its hypotheses written to the first run's eval/<name>.ensemble<n>….
    The hypotheses go to files named by their source, checkpoint and search (nmt/evaluate/hypotheses.py),
    never over those the run's report points to.

    Every direction of the split is scored, unless `asked` names one (a multilingual run's: zero-shot, or
    through a pivot language, when it says so; with its off-target rate) or files are given, or `judging`
    asks for a comparison (of one direction), or a `glossary` is given: the run translates with it (its
    terms written in for a run trained with terminology annotation, else by constrained search), and its term
    use is reported (nmt/evaluate/term_use.py).
    """
    if (src is None) != (ref is None):
        raise UserError("--src and --ref go together: give both files or neither")
    if split not in ("valid", "test"):
        raise UserError(f"--split {split}: expected valid or test")
    judging = judging or Judging()
    judging.check()
    trained = None
    if glossary is not None:  # a bad file is refused before the model loads
        trained = TrainedMarkers.find(run_dirs[0])
        read_glossary(glossary)
    run = load_trained(run_dirs, resolve_device(device), checkpoint, overrides or [])
    tag = f".ensemble{len(run_dirs)}" if len(run_dirs) > 1 else ""
    if data_dir is not None:
        tag += data_tag(run, data_dir)
        data = replace(run.cfg.data, dir=str(data_dir), train=None, valid=None, test=None)
        run = replace(run, cfg=replace(run.cfg, data=data))
    asked = asked or Asked()
    files = HypothesisFiles.of_run(run, tag, protect_report=True)
    runs = {"runs": [str(path) for path in run_dirs]}
    given = SplitFiles(src, ref) if src is not None and ref is not None else None
    if given is None and asked == Asked() and not judging.anything and glossary is None:
        return evaluate_split(run, split, files=files) | runs
    if run.cfg.data.directions.tagged and asked == Asked():
        what = (
            "--src and --ref: name their languages"
            if given
            else "--baseline, --comet and --glossary: name the direction"
        )
        raise UserError(f"{what} with --src-lang and --tgt-lang")
    translator: Translates = into_direction(TorchTranslator.of_run(run), asked)  # checks the direction
    finder = None
    if glossary is not None:
        translator, finder = _with_glossary(translator, trained, glossary)
        tag += f".glossary-{source_tag(glossary)}"
        files = HypothesisFiles.of_run(run, tag, protect_report=True)
    found = _evaluate_direction(run, translator, asked, split, given, files, judging, device, finder)
    if finder is not None:
        found["term_use"] |= {"glossary": str(glossary)}
    return found | runs


def _with_glossary(
    translator: Translates, trained: TrainedMarkers | None, glossary: Path
) -> tuple[Translates, TermFinder]:
    """`translator` translating with `glossary` (its direction's own file where there is one): its terms
    written in for a run `trained` with annotation, else by constrained search; and what finds its terms."""
    if trained is not None:
        annotating = trained.annotating(translator, glossary)
        return annotating, annotating.finder
    if not isinstance(translator, Translator):
        raise UserError("--glossary: constrained search translates in one step; drop --pivot")
    own = for_direction(glossary, translator.source, translator.target)
    constraining = Constraining.of(translator, read_glossary(own), own)
    return constraining, constraining.finder


def _evaluate_direction(
    run: TrainedRun,
    translator: Translates,
    asked: Asked,
    split: str,
    given: SplitFiles | None,
    files: HypothesisFiles,
    judging: Judging,
    device: str,
    finder: TermFinder | None = None,
) -> dict[str, Any]:
    """One direction: its pairs of `split`, or the `given` files, scored (a multilingual run's with the
    off-target rate), compared as `judging` asks (a baseline run translating the same sources), and with the
    term use of the glossary terms `finder` finds, where given."""
    directions = run.cfg.data.directions
    direction = asked.direction() if directions.tagged else directions.directions[0]
    origin = split if given is None else f"{given.src.name}.{source_tag(given.src)}"
    name = origin + directions.file_part(direction) + asked.through()
    if given is None:
        text = read_direction(run.cfg.data, direction, split)
        source = language_split(run.cfg.data, split).pair_files(direction).src
    else:
        data = run.cfg.data
        text, source = read_files(given, name, data.skip_bad_lines, data.unescape_entities), given.src
    data_dir = None if given is not None or run.cfg.data.dir is None else Path(run.cfg.data.dir)
    translate = _baseline_translator(device, direction, asked, name, data_dir)
    baseline = baseline_of(judging, text.src, text.tgt, "the test set", translate)
    hypotheses = translator.translate(text.src)
    kept = {"hypotheses": str(files.keep(name, hypotheses)), "source": str(source)}
    found = judged(hypotheses, text.tgt, text.src, judging, baseline)
    found = score(hypotheses, text.tgt).as_dict() | search_settings(run) | kept | found
    if finder is not None:
        found["term_use"] = term_use(text.src, hypotheses, finder, text.tgt).as_dict()
    if not directions.tagged:
        return found
    rate = off_target_rate(hypotheses, direction.tgt, directions.languages)
    return found | {"direction": direction.name, "off_target": rate}


def _baseline_translator(
    device: str, direction: Direction | None, asked: Asked, name: str, data_dir: Path | None
) -> TranslateBaseline:
    """How a baseline run translates the sources a system translated: in the same `direction` (None: the one
    `asked`, or the baseline's own), with its own checkpoint and search, its hypotheses kept in its eval/ as
    `name` (and, for a split of `data_dir` other than its own, that folder's tag)."""

    def translate(path: Path, sources: list[str]) -> tuple[list[str], Path]:
        baseline = load_trained([path], resolve_device(device))
        wanted = asked if direction is None else replace(asked, src=direction.src, tgt=direction.tgt)
        try:
            translator = into_direction(TorchTranslator.of_run(baseline), wanted)
        except UserError as err:
            raise UserError(f"--baseline {path}: {err}") from err
        tag = "" if data_dir is None else data_tag(baseline, data_dir)
        hypotheses = translator.translate(sources)
        return hypotheses, HypothesisFiles.of_run(baseline, tag, protect_report=True).keep(name, hypotheses)

    return translate


def evaluate_files(
    hypotheses: Path,
    references: Path,
    source: Path | None,
    judging: Judging,
    device: str,
    asked: Asked | None = None,
    glossary: Path | None = None,
) -> dict[str, Any]:
    """`nmt evaluate --hypotheses FILE --references FILE`: any system's output scored, with no run; a
    baseline run (`judging.baseline`) translates `source` as `asked` (its own direction by default); with a
    `glossary` (and the `source`), the output's term use, terms found on NFKC-normalised words."""
    judging.check()
    if glossary is not None and source is None:
        raise UserError("--glossary finds its terms in the sources: give --source with --hypotheses")
    finder = None if glossary is None else TermFinder(read_glossary(glossary), nfkc)
    name = "" if source is None else f"{source.name}.{source_tag(source)}"
    translate = _baseline_translator(device, None, asked or Asked(), name, None)
    found = score_files(hypotheses, references, source, judging, translate)
    if finder is not None and source is not None:
        hyps, refs = read_outputs(hypotheses, "--hypotheses"), read_outputs(references, "--references")
        use = term_use(read_outputs(source, "--source"), hyps, finder, refs)
        found["term_use"] = use.as_dict() | {"glossary": str(glossary)}
    return found
