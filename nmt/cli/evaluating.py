"""`nmt evaluate`: a run's translations (or any system's output) scored by sacreBLEU with intervals, compared
with a baseline, and scored by COMET where asked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from nmt.cli.options import (
    Checkpoint,
    Device,
    FromLang,
    IntoLang,
    PivotLang,
    ZeroShot,
    asked_direction,
    checked_choice,
    checked_search,
    search_overrides,
    with_search_flags,
)
from nmt.errors import UserError

OptionalRunDirs = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Run directories written by `nmt train`; several decode as an ensemble. None with --hypotheses."
    ),
]


@with_search_flags
def evaluate(
    run_dirs: OptionalRunDirs = None,
    split: Annotated[str, typer.Option(help="valid or test: a split of the run's data.")] = "test",
    src: Annotated[Path | None, typer.Option(help="Source file to translate instead of a split.")] = None,
    ref: Annotated[Path | None, typer.Option(help="Reference translations of --src.")] = None,
    data: Annotated[
        Path | None, typer.Option(help="Read the split from this directory instead of the run's data.dir.")
    ] = None,
    hypotheses: Annotated[
        Path | None,
        typer.Option(help="Score this file of translations, one a line, of any system (no run directory)."),
    ] = None,
    references: Annotated[Path | None, typer.Option(help="The references of --hypotheses.")] = None,
    source: Annotated[
        Path | None, typer.Option(help="The source sentences of --hypotheses (for --comet and --baseline).")
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="A run to compare with: it translates the same sentences, with its own search."),
    ] = None,
    baseline_hypotheses: Annotated[
        Path | None, typer.Option(help="A baseline's translations of the same test set, to compare with.")
    ] = None,
    paired_test: Annotated[
        str,
        typer.Option(
            help="bs: paired bootstrap resampling (1,000 resamples); ar: approximate randomization (10,000 "
            "trials): sacrebleu --paired-bs / --paired-ar."
        ),
    ] = "bs",
    comet: Annotated[
        Path | None,
        typer.Option(
            help="Also score by COMET with the model in this directory (hparams.yaml, "
            "checkpoints/model.ckpt); needs the comet extra; nothing is downloaded."
        ),
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the scores as JSON here.")
    ] = None,
    glossary: Annotated[
        Path | None,
        typer.Option(
            help="A glossary, SOURCE<TAB>TARGET lines: the run translates with it (terms written in for a "
            "run trained with data.terminology, else constrained search), and term use (the share of the "
            "glossary terms found in the sources whose target term the output holds) is reported; with "
            "--hypotheses, of that file (give --source)."
        ),
    ] = None,
    src_lang: FromLang = None,
    tgt_lang: IntoLang = None,
    zero_shot: ZeroShot = False,
    pivot: PivotLang = None,
    device: Device = "auto",
    checkpoint: Checkpoint = None,
    *,
    search: dict[str, Any],
) -> None:
    """Translate a test set and print sacreBLEU's BLEU, chrF2, chrF2++ and TER, each with its 95% bootstrap
    confidence interval (1,000 resamples, seeded: sacrebleu --confidence) and signature (several runs: as an
    ensemble), with the run's search but for the options given (as `nmt translate` takes them). Or score any
    system's output: --hypotheses FILE --references FILE, with no run.

    With --baseline RUN (translating the same sentences) or --baseline-hypotheses FILE, each metric's paired
    test (--paired-test) gives the p-value of the difference and both systems' scores with intervals, as
    sacrebleu REF -i BASELINE SYSTEM --paired-bs prints them. --comet PATH adds COMET's score.

    --glossary FILE adds term use: each occurrence of a glossary term in a source counts once, and is used
    when the output holds its target term (as often as the source holds the term); the same share of the
    references is printed beside it (docs/terminology.md).

    A multilingual run is scored on every direction of the split (each with its off-target rate, then the
    means), or on the one --src-lang → --tgt-lang names (any two of its languages with --zero-shot, through a
    third with --pivot; --src and --ref files, --baseline and --comet need it too).
    """
    from nmt.evaluate.evaluation import evaluate_files, evaluate_run
    from nmt.evaluate.paired import TESTS
    from nmt.evaluate.systems import Judging

    test = checked_choice("--paired-test", paired_test, TESTS)
    if json_path is not None and json_path.is_dir():  # before the work, which would be lost
        raise UserError(f"--json {json_path} is a folder; give a file name")
    judging = Judging(baseline, baseline_hypotheses, test, comet)
    asked = asked_direction(src_lang, tgt_lang, zero_shot, pivot)
    if hypotheses is not None or references is not None:
        _check_file_mode(run_dirs, hypotheses, references, split, src, ref, data, checkpoint, search)
        assert hypotheses is not None and references is not None
        report = evaluate_files(hypotheses, references, source, judging, device, asked, glossary)
    else:
        if not run_dirs:
            raise UserError("nothing to score: give a run directory, or --hypotheses FILE --references FILE")
        if source is not None:
            raise UserError("--source goes with --hypotheses; a run translates --src (with --ref)")
        checked_search(run_dirs[0], search)
        flags = search_overrides(**search)
        report = evaluate_run(
            run_dirs, split, src, ref, device, checkpoint, data, flags, asked, judging, glossary
        )
        chosen = "" if checkpoint else " (the run's choice)"
        searched = _search_options(report["search"])
        typer.echo(f"checkpoint: {report['checkpoint']}.pt{chosen}, search: {searched}")
    for line in _score_lines(report):
        typer.echo(line)
    if json_path is not None:
        from nmt.atomic_files import atomic_write_text

        atomic_write_text(json_path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")


def _check_file_mode(
    run_dirs: list[Path] | None,
    hypotheses: Path | None,
    references: Path | None,
    split: str,
    src: Path | None,
    ref: Path | None,
    data: Path | None,
    checkpoint: str | None,
    search: dict[str, Any],
) -> None:
    """Refuse what does not go with scoring a file: a run directory, a missing side, a run's options."""
    if hypotheses is None or references is None:
        raise UserError("--hypotheses and --references go together: give both files")
    if run_dirs:
        raise UserError("--hypotheses scores a file of translations: give no run directory (or drop it)")
    given = {"--src": src, "--ref": ref, "--data": data, "--checkpoint": checkpoint}
    given |= {"--split": split if split != "test" else None}
    named = [option for option, value in given.items() if value is not None]
    if named or search:
        options = ", ".join(named + ["search options"] * bool(search))
        raise UserError(f"{options}: these choose how a run translates; --hypotheses scores a file")


def _search_options(search: dict[str, Any]) -> str:
    """The search a report records as the options that ask for it: `--beam-size 5 --length-penalty 0.6`,
    `--sampling --top-k 10`."""
    from nmt.config.search_flags import flag

    return " ".join(flag(name, value) for name, value in search.items() if name != "rule")


def _score_lines(report: dict[str, Any]) -> list[str]:
    """What `nmt evaluate` prints of its report: every metric with its interval and signature (and a
    multilingual run's off-target rate), the baseline's comparison and COMET where asked, and the hypotheses;
    of one direction, or BLEU and chrF of each direction and their means."""
    rate = "" if report.get("off_target") is None else f"  off-target {report['off_target']:.1f}%"
    if "directions" not in report:
        from nmt.evaluate.scores import MetricScore

        lines = [] if "direction" not in report else [f"direction: {report['direction']}{rate}"]
        width = max(len(name) for name in report["metrics"])
        for name, found in report["metrics"].items():
            lines.append(MetricScore(**found).line(name.ljust(width)))
        if "comet" in report:
            lines.append(f"COMET = {report['comet']['score']:.4f}  ({report['comet']['model']})")
        if "term_use" in report:
            lines.append(_term_use_line(report["term_use"]))
        lines += _baseline_lines(report.get("baseline"), width)
        return [*lines, f"hypotheses: {report['hypotheses']}"]
    from nmt.evaluate.directions import direction_lines

    first = next(iter(report["directions"].values()))
    signatures = "; ".join(found["signature"] for found in first["metrics"].values())
    return [
        *direction_lines(report),
        f"mean BLEU = {report['bleu']:.2f}  mean chrF = {report['chrf']:.2f}{rate}",
        f"({signatures})",
        f"hypotheses: {Path(first['hypotheses']).parent}",
    ]


def _term_use_line(found: dict[str, Any]) -> str:
    """Term use as printed: `term use = 87.50% (35 of 40 glossary terms in 30 sentences; references:
    90.00%)`."""
    if found["rate"] is None:
        return f"term use: no term of {found['glossary']} is found in the sources"
    counts = f"{found['used']} of {found['occurrences']} glossary terms in {found['sentences']} sentences"
    references = f"; references: {found['reference_rate']:.2f}%" if "reference_rate" in found else ""
    return f"term use = {found['rate']:.2f}% ({counts}{references})"


def _baseline_lines(baseline: dict[str, Any] | None, width: int) -> list[str]:
    """The paired test's lines: which test against which file, then per metric both scores (μ ± interval
    where known) and the p-value, starred at 0.05 or below."""
    if baseline is None:
        return []

    def estimate(found: dict[str, float | None]) -> str:
        if found["mean"] is None:
            return f"{found['score']:.2f}"
        return f"{found['score']:.2f} (μ = {found['mean']:.2f} ± {found['ci']:.2f})"

    lines = [f"{baseline['test']} against the baseline {baseline['hypotheses']}:"]
    for name, found in baseline["metrics"].items():
        star = " *" if found["p_value"] <= 0.05 else ""  # as sacreBLEU stars them
        both = f"baseline {estimate(found['baseline'])}  system {estimate(found['system'])}"
        lines.append(f"  {name.ljust(width)}  {both}  p = {found['p_value']:.4f}{star}")
    return lines
