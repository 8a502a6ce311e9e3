"""The `nmt` command line: each command parses its arguments, loads what it needs, calls one library function.

Mistakes a user can fix (UserError, and usage errors such as a bad option value) print one line on stderr and
exit with code 2; an interrupted training run exits with 130 after saving its checkpoint.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO, Literal, TypeVar

import typer
from tqdm import tqdm
from typer.core import TyperCommand, TyperGroup

from nmt import interrupts
from nmt.config.search_flags import flag, given_settings, setting_types
from nmt.data.corpus import data_layout
from nmt.errors import REPORTS_ENV, Interrupted, PeerFailed, UserError, process_rank
from nmt.limits import MAX_SIZE

if TYPE_CHECKING:
    from typer._click import Context as ClickContext  # what TyperGroup's methods take (typer.Context's base)

    from nmt.decode.languages import Asked
    from nmt.decode.outputs import OutputFormat
    from nmt.decode.trained_run import TrainedRun
    from nmt.evaluate.plots import Scale

Choice = TypeVar("Choice", bound=str)


class _Commands(TyperGroup):
    """The command group. Every mistake a user can fix ends the same way, whichever command made it: one line
    `nmt: error: …` on stderr and exit code 2; an interruption exits with 130."""

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        with _one_line_errors():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: ClickContext) -> Any:
        with _one_line_errors():
            return super().invoke(ctx)


class _WithOverrides(TyperCommand):
    """A command with --set: `--set KEY VALUE` is a one-line error saying how to write it (Typer would report
    the value as an unexpected extra argument)."""

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        check_overrides(args)
        return super().parse_args(ctx, args)


def check_overrides(args: list[str]) -> None:
    """Refuse `--set KEY VALUE` and `--set K=V K2=V2` (one --set for two overrides), naming the fix."""
    for i, arg in enumerate(args[:-1]):
        value = args[i + 1]
        if arg == "--set" and "=" not in value:
            after = args[i + 2] if i + 2 < len(args) and not args[i + 2].startswith("-") else "VALUE"
            raise UserError(f"--set {value} {after}: write --set KEY=VALUE, e.g. --set {value}={after}")
        following = args[i + 2] if i + 2 < len(args) else ""
        if arg == "--set" and re.fullmatch(r"[A-Za-z_][\w.]*=.*", following):
            raise UserError(
                f"--set {value} {following}: each override needs its own --set: "
                f"--set {value} --set {following}"
            )


def _choice(option: str, value: str, choices: tuple[Choice, ...]) -> Choice:
    """`value` of `option` as one of `choices` (typed as their Literal); any other is a UserError."""
    for choice in choices:
        if value == choice:
            return choice
    raise UserError(f"{option} {value}: expected {' or '.join(choices)}")


@contextlib.contextmanager
def _one_line_errors() -> Iterator[None]:
    """Usage errors and UserError as one line with exit code 2; Ctrl-C/SIGTERM as one line with 130. Under
    torchrun a process reports its own user errors (naming its rank when not the main one), only the main one
    reports an interruption, and an error that only says another process failed is not reported at all."""
    rank = process_rank()
    try:
        yield
    except PeerFailed:
        raise typer.Exit(code=2) from None
    except UserError as err:
        where = "" if rank == 0 else f" (rank {rank})"
        _report(f"nmt: error{where}: {err}", rank, code=2)
    except Interrupted as err:
        _report(f"nmt: {err}", rank, code=130)
    except KeyboardInterrupt:
        _report("nmt: interrupted", rank, code=130)
    except typer.TyperException as err:  # Typer's errors; exit code 2: a mistake in the command line itself
        if type(err).__name__ == "NoArgsIsHelpError":  # bare `nmt`: the help, on stdout, and exit code 2
            typer.echo(err.format_message())
            raise typer.Exit(code=2) from None
        if err.exit_code != 2:
            raise
        ctx = getattr(err, "ctx", None)
        command = ctx.command_path if ctx is not None else "nmt"
        message = err.format_message().rstrip(".")
        _report(f"nmt: error: {message} (see `{command} --help`)", rank, code=2)


def _report(line: str, rank: int, code: int) -> None:
    """Print `line` and exit with `code`. Under `--nproc` a process leaves it to the launching process
    instead, which prints one line for the job (nmt/train/distributed.py `launch`); under torchrun only the
    main process reports an interruption. After an interruption a further signal ends the process quietly."""
    reports = os.environ.get(REPORTS_ENV)
    if reports and "RANK" in os.environ:
        with contextlib.suppress(OSError):  # the launching process is gone: nobody to tell
            Path(reports, f"rank{rank}").write_text(line)
    elif code == 2 or rank == 0:
        typer.echo(line, err=True)
    if code == 130:
        interrupts.reported()
    raise typer.Exit(code=code) from None


app = typer.Typer(
    cls=_Commands,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help as written: brackets such as `[i, j]` are text, not Rich markup
    help="Train, use and inspect neural machine translation models.",
)

RunDirArgument = Annotated[Path, typer.Argument(help="Run directory written by `nmt train`.")]
DEVICES = "auto, cpu, cuda or cuda:N (the GPU numbered N, from 0)"
Device = Annotated[str, typer.Option(help=f"{DEVICES}.")]
TrainDevice = Annotated[str | None, typer.Option(help=f"{DEVICES} (train.device).")]


def search_option(name: str) -> Any:
    """The option of the search setting `name` (nmt/config/search_flags.py): its flag, its meaning and range
    as the setting declares them, and no default (the run's own applies)."""
    field = next(f for f in given_settings() if f.name == name)
    kind, allowed = setting_types()[name], field.metadata.get("range")
    meaning = field.metadata["meaning"]
    text = meaning[0].upper() + meaning[1:] + (f"; {allowed.describe()}" if allowed else "")
    declared = f"{flag(name)}/{flag(name, False)}" if kind is bool else flag(name)
    return typer.Option(declared, help=f"{text}. Default: the run's search.{name}.")


def with_search_flags(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with an option for every search setting a user may give (nmt/config/search_flags.py
    `given_settings`: the search's own and every rule's and processor's); those given reach it as `search`
    (setting → value)."""
    names = [f.name for f in given_settings()]
    signature = inspect.signature(command, eval_str=True)
    kept = [p for p in signature.parameters.values() if p.name != "search"]
    keyword = inspect.Parameter.KEYWORD_ONLY
    types = setting_types()
    added = [
        inspect.Parameter(n, keyword, default=None, annotation=Annotated[types[n] | None, search_option(n)])
        for n in names
    ]

    @functools.wraps(command)
    def run(**values: Any) -> None:
        search = {name: value for name in names if (value := values.pop(name)) is not None}
        command(search=search, **values)

    run.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    return run


BeamSize = Annotated[int | None, search_option("beam_size")]
Checkpoint = Annotated[
    str | None,
    typer.Option(help="best, last or averaged; default: the one the run's report chose (else best)."),
]
BatchSize = Annotated[int | None, search_option("batch_size")]
RunDirs = Annotated[
    list[Path], typer.Argument(help="Run directories written by `nmt train`; several decode as an ensemble.")
]
ConfigFile = Annotated[Path, typer.Argument(help="Experiment YAML file, e.g. configs/tiny-transformer.yaml.")]
DataDir = Annotated[
    Path | None,
    typer.Option(
        help=f"Corpus directory: {data_layout('<lang>')}, for <lang> the source and the target language."
    ),
]
SrcLang = Annotated[str | None, typer.Option(help="Source language: its files' suffix (data.src_lang).")]
TgtLang = Annotated[str | None, typer.Option(help="Target language: its files' suffix (data.tgt_lang).")]
Overrides = Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE, e.g. --set train.lr=3.0e-4")]
FromLang = Annotated[
    str | None,
    typer.Option("--src-lang", help="The source language (checked against the model's directions)."),
]
IntoLang = Annotated[
    str | None,
    typer.Option("--tgt-lang", help="The target language; a multilingual model needs it."),
]
ZeroShot = Annotated[
    bool,
    typer.Option(
        "--zero-shot",
        help="Translate a direction the multilingual model was never trained on (between two of its "
        "languages).",
    ),
]
PivotLang = Annotated[
    str | None,
    typer.Option(
        help="Translate through this third language with the same multilingual model (source → pivot → "
        "target)."
    ),
]


def _asked(src_lang: str | None, tgt_lang: str | None, zero_shot: bool, pivot: str | None = None) -> Asked:
    """The direction the options ask for (nmt/decode/languages.py `Asked`)."""
    from nmt.decode.languages import Asked

    return Asked(src_lang, tgt_lang, zero_shot, pivot)


def checked_search(path: Path, given: dict[str, Any]) -> None:
    """Refuse search options that are out of range, that the search asked for does not read, or that do not
    go with the settings of the run (or export) at `path`, naming each as given (`--top-p 0`) and each of
    the run's as its config has it."""
    from nmt.config.search_flags import changed
    from nmt.decode.loading import saved_search

    if not given or not path.is_dir():  # no run there: the loader says so
        return
    settings, origin = saved_search(path)
    changed(settings, given, flag, lambda key, value: f"search.{key}={value!r} of {origin}")


def search_overrides(**flags: Any) -> list[str]:
    """Search flags that were given (beam_size=3, …) as `search.*` overrides of the run's config."""
    return flag_overrides({f"search.{name}": value for name, value in flags.items()})


def flag_overrides(flags: dict[str, Any]) -> list[str]:
    """Command-line flags that were given, as `dotted.key=value` overrides applied before `--set`."""
    return [
        f"{key}={json.dumps(str(v) if isinstance(v, Path) else v)}"
        for key, v in flags.items()
        if v is not None
    ]


def _experiment(config: Path, overrides: list[str]) -> Any:
    """The config of a model to train: loaded, and the model's size checked before any data work (a model
    too large to allocate is a one-line error at once, not after the tokenizer trained)."""
    from nmt.config.yaml_file import load_config
    from nmt.models.build import check_model_size

    cfg = load_config(config, overrides)
    check_model_size(cfg.model, cfg.tokenizer.vocab_size, cfg.tokenizer.joint)
    return cfg


def _print_version(value: bool) -> None:
    if value:
        from nmt import __version__

        typer.echo(f"nmt {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only print warnings and errors.")] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Train, use and inspect neural machine translation models."""
    _log_to_stderr(logging.WARNING if quiet else logging.INFO)


class _BarSafeHandler(logging.StreamHandler):
    """Writes each record through tqdm, which lifts a progress bar out of the way and redraws it below; a
    record that a progress bar already shows (marked `bar_shown`, kept for RUN_DIR/train.log) is left out."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "bar_shown", False):
            return
        try:
            tqdm.write(self.format(record), file=self.stream)
        except Exception:
            self.handleError(record)


def _log_to_stderr(level: int) -> None:
    """Print the library's log records of `level` and above as `nmt: message` on the current stderr (INFO
    records still reach other handlers, such as a run's train.log, under -q).

    An earlier handler is replaced, so that each in-process run (as in the tests) writes to its own stderr.
    """
    logger = logging.getLogger("nmt")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = _BarSafeHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("nmt: %(message)s"))
    handler.setLevel(level)
    logger.addHandler(handler)
    logger.setLevel(min(level, logging.INFO))


@app.command()
def download(
    name: Annotated[
        str, typer.Argument(help="multi30k, iwslt2017, wmt14, a Hugging Face dataset id or a local path.")
    ],
    out: Annotated[Path, typer.Option(help="Directory for train/valid/test.<lang> files.")],
    src_lang: Annotated[str, typer.Option(help="Source language code.")] = "de",
    tgt_lang: Annotated[str, typer.Option(help="Target language code.")] = "en",
    hf_config: Annotated[str | None, typer.Option(help="Dataset config name, e.g. iwslt2017-de-en.")] = None,
) -> None:
    """Download a parallel corpus with Hugging Face `datasets` and write it as plain text files."""
    from nmt.data.download import download as fetch

    counts = fetch(name, out, src_lang, tgt_lang, hf_config)
    typer.echo(" ".join(f"{split}={n}" for split, n in counts.items()) + f" pairs written to {out}")


@app.command(cls=_WithOverrides)
def train(
    config: ConfigFile,
    data: DataDir = None,
    src_lang: SrcLang = None,
    tgt_lang: TgtLang = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/<config name>).")] = None,
    device: TrainDevice = None,
    max_time: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Stop after this many seconds of training and validation (0: no limit); the final report "
            "follows (announced, with its progress; train.final_report=false skips it).",
        ),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(min=0, max=MAX_SIZE, help="Stop after this many updates (0: no limit).")
    ] = None,
    max_epochs: Annotated[
        int | None, typer.Option(min=0, max=MAX_SIZE, help="Stop after this many epochs (0: no limit).")
    ] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in --out from its last checkpoint.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace a finished run in --out.")] = False,
    init_from: Annotated[
        Path | None,
        typer.Option(
            help="Start from this run's weights and sentencepiece model (fine-tuning); optimizer and "
            "schedule start afresh."
        ),
    ] = None,
    tensorboard: Annotated[
        Path | None, typer.Option(help="Also write TensorBoard event files into this directory.")
    ] = None,
    overrides: Overrides = None,
    nproc: Annotated[
        int, typer.Option(min=1, help="Data-parallel processes on this machine (one per GPU), via torchrun.")
    ] = 1,
) -> None:
    """Train the model described by CONFIG; prints the best checkpoint's path.

    Under `torchrun --nproc_per_node N -m nmt train …` (or with --nproc N) N processes train together.
    """
    from nmt.train.command import train as run_training

    flags = {
        "data.dir": data,
        "data.src_lang": src_lang,
        "data.tgt_lang": tgt_lang,
        "train.device": device,
        "train.max_time": max_time,
        "train.max_steps": max_steps,
        "train.max_epochs": max_epochs,
        "train.tensorboard": True if tensorboard else None,
        "train.tensorboard_dir": tensorboard,
    }
    cfg = _experiment(config, flag_overrides(flags) + (overrides or []))
    if nproc > 1:
        from nmt.train.distributed import launch

        code, line = launch(nproc, sys.argv[1:])  # this command line, in nproc processes
        if line:
            typer.echo(line, err=True)
        raise typer.Exit(code=code)
    run_dir = out or Path("runs") / config.stem
    best = run_training(cfg, run_dir, resume=resume, overwrite=overwrite, init_from=init_from)
    if process_rank() == 0:
        typer.echo(best)


@contextlib.contextmanager
def _read_input(path: Path | None) -> Iterator[tuple[BinaryIO, str, bool]]:
    """The bytes to translate (a file, or stdin), their name for errors, and whether they come from a terminal
    (then each line is answered as soon as it is entered)."""
    if path is None:
        if sys.stdin is None:  # closed, as under cron with <&-
            raise UserError("standard input is closed; pass --input FILE")
        yield sys.stdin.buffer, "standard input", sys.stdin.isatty()
        return
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from err
    with handle:
        yield handle, str(path), False


@app.command()
@with_search_flags
def translate(
    run_dirs: RunDirs,
    input: Annotated[
        Path | None, typer.Option("--input", "-i", help="One sentence per line (default stdin).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Translations (default stdout).")
    ] = None,
    scores: Annotated[bool, typer.Option(help="Write `i ||| translation ||| score` lines.")] = False,
    format: Annotated[
        str, typer.Option("--format", help="text, or jsonl: one JSON object of hypotheses per line.")
    ] = "text",
    alignments: Annotated[
        bool,
        typer.Option(
            help="Append each translation's word alignment, ` ||| i-j …` (source word i, output word j, from "
            "0), from the attention search pays (a Transformer's last layer, mean of heads)."
        ),
    ] = False,
    src_lang: FromLang = None,
    tgt_lang: IntoLang = None,
    zero_shot: ZeroShot = False,
    pivot: PivotLang = None,
    device: Device = "auto",
    checkpoint: Checkpoint = None,
    skip_bad_lines: Annotated[
        bool, typer.Option(help="Translate lines that are not valid UTF-8 as empty lines instead of failing.")
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            help="auto: ctranslate2 for a directory written by `nmt export`, torch for run directories."
        ),
    ] = "auto",
    interactive: Annotated[
        bool | None,
        typer.Option(
            "--interactive/--no-interactive",
            help="Answer each line as soon as it is read (default: when standard input is a terminal); "
            "otherwise input is read 10,000 lines at a time, whatever --batch-size.",
        ),
    ] = None,
    *,
    search: dict[str, Any],
) -> None:
    """Translate raw sentences, one per line, keeping the line order (empty lines stay empty).

    The search is the run's (its config's search section) but for the options given: beam search, or
    --sampling (a line with the same --seed and settings samples the same output wherever it stands; the
    seed is 0 unless given), or diverse beam search (--diverse-groups), with n-gram blocking and a minimum
    length where asked. An option the search does not read is refused.

    With --nbest N > 1 or --scores, each input line i (counted from 0) gives Moses-style lines
    `i ||| translation ||| score`, best first; with --format jsonl, one line
    `{"line": i, "hypotheses": [{"text": …, "score": …}, …]}`. Scores are length-normalised
    log-probabilities at every beam size: the summed log-probability of the tokens and eos divided by
    ((5 + length) / 6) ** A, A the length penalty. The input is read and translated in chunks, written as
    they are done (to --output only when complete).

    With --alignments each translation is followed by ` ||| 0-0 1-2 …`: each output word linked to the source
    words its subwords attended most (with --format jsonl: an "alignment" field of [i, j] pairs).

    A multilingual model translates into --tgt-lang: from --src-lang, a direction it was trained on (or any
    of its languages with --zero-shot), or through a third language with --pivot (the scores and n-best
    lists are then those of the second step).
    """
    from nmt.atomic_files import write_output
    from nmt.decode.languages import into_direction
    from nmt.decode.loading import load_translator
    from nmt.decode.outputs import stream_translations
    from nmt.device.choice import resolve_device

    if format not in ("text", "jsonl"):
        raise UserError(f"--format {format}: expected text or jsonl")
    nbest = search.get("nbest", 1)
    style: OutputFormat = "jsonl" if format == "jsonl" else "moses" if scores or nbest > 1 else "text"
    checked_search(run_dirs[0], search)
    loaded = load_translator(run_dirs, engine, resolve_device(device), checkpoint, search)
    translator = into_direction(loaded, _asked(src_lang, tgt_lang, zero_shot, pivot))
    bad = 0
    with _read_input(input) as (source, name, terminal):
        if terminal:  # the model is loaded: a user at the keyboard learns when to type, and how to stop
            logging.getLogger(__name__).info("ready: type a sentence and press Enter; Ctrl-D ends")

        def write(out: BinaryIO) -> None:
            nonlocal bad
            live = terminal if interactive is None else interactive
            bad = stream_translations(translator, source, name, out, skip_bad_lines, live, style, alignments)

        write_output(output, write)
    if bad:
        typer.echo(f"nmt: {bad} lines that are not valid UTF-8 translated as empty lines", err=True)


@app.command()
@with_search_flags
def evaluate(
    run_dirs: RunDirs,
    split: Annotated[str, typer.Option(help="valid or test: a split of the run's data.")] = "test",
    src: Annotated[Path | None, typer.Option(help="Source file to translate instead of a split.")] = None,
    ref: Annotated[Path | None, typer.Option(help="Reference translations of --src.")] = None,
    data: Annotated[
        Path | None, typer.Option(help="Read the split from this directory instead of the run's data.dir.")
    ] = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the scores as JSON here.")
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
    """Translate a test set and print sacreBLEU BLEU and chrF with their signatures (several runs: as an
    ensemble), with the run's search but for the options given (as `nmt translate` takes them).

    A multilingual run is scored on every direction of the split (each with its off-target rate, then the
    means), or on the one --src-lang → --tgt-lang names (any two of its languages with --zero-shot, through a
    third with --pivot; --src and --ref files need it too).
    """
    from nmt.evaluate.evaluation import evaluate_run

    checked_search(run_dirs[0], search)
    flags = search_overrides(**search)
    asked = _asked(src_lang, tgt_lang, zero_shot, pivot)
    report = evaluate_run(run_dirs, split, src, ref, device, checkpoint, data, flags, asked)
    chosen = "" if checkpoint else " (the run's choice)"
    typer.echo(f"checkpoint: {report['checkpoint']}.pt{chosen}, beam size {report['beam_size']}")
    for line in _score_lines(report):
        typer.echo(line)
    if json_path is not None:
        from nmt.atomic_files import atomic_write_text

        atomic_write_text(json_path, json.dumps(report, indent=2) + "\n")


def _score_lines(report: dict[str, Any]) -> list[str]:
    """What `nmt evaluate` prints of its report: BLEU and chrF (and a multilingual run's off-target rate) with
    their signatures and hypotheses, of one direction or of each direction and their means."""
    rate = "" if report.get("off_target") is None else f"  off-target {report['off_target']:.1f}%"
    if "directions" not in report:
        lines = [] if "direction" not in report else [f"direction: {report['direction']}{rate}"]
        return [
            *lines,
            f"BLEU = {report['bleu']:.2f}  ({report['bleu_signature']})",
            f"chrF = {report['chrf']:.2f}  ({report['chrf_signature']})",
            f"hypotheses: {report['hypotheses']}",
        ]
    from nmt.evaluate.directions import direction_lines

    first = next(iter(report["directions"].values()))
    return [
        *direction_lines(report),
        f"mean BLEU = {report['bleu']:.2f}  mean chrF = {report['chrf']:.2f}{rate}",
        f"({first['bleu_signature']}; {first['chrf_signature']})",
        f"hypotheses: {Path(first['hypotheses']).parent}",
    ]


@app.command("plot-attention")
def plot_attention(
    run_dir: RunDirArgument,
    text: Annotated[str, typer.Option(help="Source sentence to translate and plot.")],
    out: Annotated[Path, typer.Option(help="Image file: .png, .svg or .pdf.")],
    layer: Annotated[int, typer.Option(help="Decoder layer, from 0; negative counts from the last.")] = -1,
    head: Annotated[str, typer.Option(help="Attention head (from 0) or 'mean'.")] = "mean",
    all_heads: Annotated[
        bool, typer.Option(help="Draw every head of the layer in a grid (one colour scale for all).")
    ] = False,
    scale: Annotated[
        str,
        typer.Option(
            help="figure: colours from 0 to the largest weight drawn (weak attention stays visible); "
            "fixed: 0 to 1 (comparable across figures)."
        ),
    ] = "figure",
    beam_size: BeamSize = None,
    src_lang: FromLang = None,
    tgt_lang: IntoLang = None,
    zero_shot: ZeroShot = False,
    device: Device = "auto",
    checkpoint: Checkpoint = None,
) -> None:
    """Draw the encoder-decoder attention of one translation as a heatmap (output rows, source columns);
    a multilingual run's into --tgt-lang."""
    from nmt.decode.languages import toward
    from nmt.decode.loading import load_trained
    from nmt.decode.translator import TorchTranslator
    from nmt.device.choice import resolve_device
    from nmt.evaluate.plots import check_output_path, save_attention

    check_output_path(out)
    colours: Scale = _choice("--scale", scale, ("figure", "fixed"))
    run = load_trained([run_dir], resolve_device(device), checkpoint, search_overrides(beam_size=beam_size))
    translator = toward(TorchTranslator.of_run(run), src_lang, tgt_lang, zero_shot)
    translated = translator.translate_with_attention(text)
    save_attention(translated, out, run.cfg.model, layer, head, all_heads, colours)
    typer.echo(f"{translated.best.text}\nwrote {out}")


@app.command()
def align(
    run_dir: RunDirArgument,
    src: Annotated[Path, typer.Option(help="Source sentences, whitespace-tokenized, one a line.")],
    tgt: Annotated[
        Path, typer.Option(help="Their target sentences (references, not translations), line by line.")
    ],
    layer: Annotated[
        int | None,
        typer.Option(
            help="Decoder layer, from 0 (negative: from the last); default: the layer guided alignment "
            "trained, else the last."
        ),
    ] = None,
    head: Annotated[
        str | None,
        typer.Option(
            help="Head N, heads N,M,… (their mean) or 'mean' (of all); default: the heads guided alignment "
            "trained, else the mean."
        ),
    ] = None,
    rule: Annotated[
        str | None,
        typer.Option(
            help="argmax: the attention of the step that predicts each target subword; shift: of the step "
            "that reads it (Shift-Att). Default: the rule guided alignment trained, else argmax."
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(help="Link every source subword with at least this weight (none, or several) instead."),
    ] = None,
    soft: Annotated[
        bool,
        typer.Option(help="Write JSON lines of weights instead: per target word, one per source word."),
    ] = False,
    reverse_run: Annotated[
        Path | None,
        typer.Option(help="A run of the other direction: its links are symmetrized with RUN's."),
    ] = None,
    symmetrize: Annotated[
        str | None,
        typer.Option(
            "--symmetrize",
            help="With --reverse-run: intersection, union, grow-diag (strict), grow-diag-moses or "
            "grow-diag-final-and (the default); see `nmt symmetrize`.",
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default stdout).")] = None,
    batch_size: BatchSize = None,
    device: Device = "auto",
    checkpoint: Checkpoint = None,
) -> None:
    """Word-align sentence pairs with a trained model's attention, teacher-forced on the given target: one
    Pharaoh line per pair (0-based source-target word links, `</s>` dropped), a word pair linked when any of
    their subwords are. Each word is encoded on its own, its subwords kept."""
    from nmt.align.attention import RULES
    from nmt.align.symmetrize import METHODS
    from nmt.atomic_files import write_output
    from nmt.decode.aligner import Request, align_files
    from nmt.decode.loading import load_trained
    from nmt.device.choice import resolve_device

    if symmetrize is not None and reverse_run is None:
        raise UserError("--symmetrize combines two directions: give the other one's run with --reverse-run")
    overrides = search_overrides(batch_size=batch_size)

    def load(path: Path) -> TrainedRun:
        return load_trained([path], resolve_device(device), checkpoint, overrides)

    asked = Request(
        layer=layer,
        heads=_heads(head),
        rule=None if rule is None else _choice("--rule", rule, RULES),
        threshold=threshold,
        soft=soft,
        reverse=None if reverse_run is None else load(reverse_run),
        method=_choice("--symmetrize", symmetrize or "grow-diag-final-and", METHODS),
    )
    text = align_files(load(run_dir), src, tgt, asked)
    write_output(out, lambda handle: handle.write(text.encode("utf-8")))


def _heads(head: str | None) -> tuple[int, ...] | Literal["mean"] | None:
    """--head: None (the run's default), 'mean' (every head), N or N,M,…."""
    if head is None:
        return None
    if head == "mean":
        return "mean"
    try:
        return tuple(int(part) for part in head.split(","))
    except ValueError:
        raise UserError(f"--head {head}: expected mean, a head number N or numbers N,M,…") from None


@app.command("score-alignments")
def score_alignments(
    hypothesis: Annotated[
        Path, typer.Argument(help="Pharaoh file of links to score (i-j, one line a pair).")
    ],
    gold: Annotated[Path, typer.Argument(help="Gold Pharaoh file: i-j sure, ipj or i?j possible links.")],
    hyp_one_based: Annotated[bool, typer.Option(help="HYPOTHESIS counts words from 1.")] = False,
    gold_one_based: Annotated[bool, typer.Option(help="GOLD counts words from 1.")] = False,
    hyp_reverse: Annotated[
        bool, typer.Option(help="HYPOTHESIS names the target word first (i-j: target i, source j).")
    ] = False,
    gold_reverse: Annotated[bool, typer.Option(help="GOLD names the target word first.")] = False,
) -> None:
    """Score word alignments against gold links: the alignment error rate of Och & Ney (2003),
    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|) with sure links S and possible links P ⊇ S, precision |A∩P| / |A|
    and recall |A∩S| / |S|, each count summed over the corpus, in percent; and the link counts."""
    from nmt.align.score import score_files

    scores = score_files(hypothesis, gold, hyp_one_based, gold_one_based, hyp_reverse, gold_reverse)
    typer.echo(scores.describe())


@app.command()
def symmetrize(
    forward: Annotated[Path, typer.Argument(help="Pharaoh links of the source → target direction.")],
    reverse: Annotated[Path, typer.Argument(help="Pharaoh links of the target → source direction.")],
    method: Annotated[
        str,
        typer.Option(
            help="intersection, union, grow-diag (lilt/alignment-scripts' strict grow-diagonal: a neighbour "
            "joins when both its words are unaligned), grow-diag-moses (Moses' grow-diag: either word) or "
            "grow-diag-final-and (Moses')."
        ),
    ] = "grow-diag-final-and",
    swap_reverse: Annotated[
        bool, typer.Option(help="REVERSE names the target word first (an aligner run on the swapped corpus).")
    ] = False,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default stdout).")] = None,
) -> None:
    """Combine the word links of two directions, line by line, into one Pharaoh file (0-based,
    source-target), e.g. the -f and -r files of `eflomal-align` into the links of train.alignment.links."""
    from nmt.align.symmetrize import METHODS, symmetrize_files
    from nmt.atomic_files import write_output

    text = symmetrize_files(forward, reverse, _choice("--method", method, METHODS), swap_reverse)
    write_output(out, lambda handle: handle.write(text.encode("utf-8")))


@app.command()
def average(
    run_dir: RunDirArgument,
    last: Annotated[int, typer.Option(min=1, help="How many of the newest kept checkpoints to average.")] = 5,
) -> None:
    """Average the weights of a run's last kept checkpoints (train.keep_checkpoints) into averaged.pt."""
    from nmt.run.average import average_run
    from nmt.run.directory import RunDir

    typer.echo(average_run(RunDir(run_dir), last))


@app.command()
def export(
    run_dir: RunDirArgument,
    out_dir: Annotated[Path, typer.Argument(help="Directory to write (new, or empty); argos: a new file.")],
    to: Annotated[
        str,
        typer.Option(
            help="Format: ctranslate2, argos (an Argos Translate package) or huggingface (a transformers "
            "model directory)."
        ),
    ] = "ctranslate2",
    quantization: Annotated[
        str, typer.Option(help="Weight type: float32, int8, int8_float16, float16 (any CTranslate2 type).")
    ] = "float32",
    checkpoint: Checkpoint = None,
) -> None:
    """Export a trained Transformer for CTranslate2 (then: nmt translate OUT_DIR --engine ctranslate2), as an
    Argos Translate package, or for Hugging Face transformers.

    --to argos writes OUT_DIR as an Argos Translate package file (e.g. de_en.argosmodel) that argostranslate
    and LibreTranslate install and run offline: the CTranslate2 model, the sentencepiece model and a sentence
    splitter of written rules (punctuation, listed abbreviations, initials, ordinals), an ONNX graph in
    MiniSBD's format, not a trained model (the package's README states the rules).

    --to huggingface writes a directory that AutoModelForSeq2SeqLM.from_pretrained(OUT_DIR) and
    AutoTokenizer.from_pretrained(OUT_DIR) load (see OUT_DIR/README.md).
    """
    if to == "argos":
        from nmt.export.argos import export_package

        typer.echo(export_package(run_dir, out_dir, quantization, checkpoint))
        return
    if to == "huggingface":
        from nmt.export.huggingface import export_run as export_huggingface

        typer.echo(export_huggingface(run_dir, out_dir, quantization, checkpoint))
        return
    from nmt.export.ctranslate2 import export_run

    typer.echo(export_run(run_dir, out_dir, to, quantization, checkpoint))


@app.command(cls=_WithOverrides)
def benchmark(
    config: ConfigFile,
    data: DataDir = None,
    src_lang: SrcLang = None,
    tgt_lang: TgtLang = None,
    device: TrainDevice = None,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the results as JSON here.")
    ] = None,
    warmup_steps: Annotated[
        int,
        typer.Option(
            min=0,
            max=MAX_SIZE,
            help="Untimed warm-up updates; the warm-up then runs to the end of its epoch.",
        ),
    ] = 30,
    steps: Annotated[
        int, typer.Option(min=1, max=MAX_SIZE, help="Most updates timed (at most one epoch), at least 1.")
    ] = 400,
    bleu_target: Annotated[
        float, typer.Option(min=0, max=100, help="Validation BLEU for the time-to-BLEU figure.")
    ] = 40.0,
    bleu_budget: Annotated[
        float,
        typer.Option(
            min=0, help="Seconds of training allowed to reach --bleu-target (0: training speed only)."
        ),
    ] = 120.0,
    decode_sentences: Annotated[
        int, typer.Option(min=0, max=MAX_SIZE, help="Test sentences decoded in one batch (0: no decoding).")
    ] = 1000,
    overrides: Overrides = None,
) -> None:
    """Measure training and decoding speed, peak memory and time to a validation BLEU of the model CONFIG
    describes; print a table. Without --data, on a synthetic corpus of Multi30k's size."""
    from nmt.atomic_files import atomic_write_text
    from nmt.bench.benchmark import benchmark as run_benchmark
    from nmt.bench.benchmark import format_table

    flags = {"data.src_lang": src_lang, "data.tgt_lang": tgt_lang, "train.device": device}
    cfg = _experiment(config, flag_overrides(flags) + (overrides or []))
    result = run_benchmark(cfg, data, warmup_steps, steps, bleu_target, bleu_budget, decode_sentences)
    typer.echo(format_table(result))
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(result, indent=2) + "\n")


@app.command()
def serve(
    run_dirs: RunDirs,
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one, logged).")] = 8000,
    engine: Annotated[
        str,
        typer.Option(
            help="auto: ctranslate2 for directories written by `nmt export`, torch for run directories."
        ),
    ] = "auto",
    device: Device = "auto",
    beam_size: BeamSize = None,
    checkpoint: Checkpoint = None,
    max_batch_tokens: Annotated[
        int,
        typer.Option(min=1, max=MAX_SIZE, help="A batch closes at sentences × longest source × beam size."),
    ] = 8192,
    max_delay_ms: Annotated[
        float,
        typer.Option(min=0, max=60_000, help="… or this long after its oldest request (or the last batch)."),
    ] = 10.0,
    max_texts: Annotated[int, typer.Option(min=1, max=100_000, help="Texts in one request's q.")] = 128,
    max_chars: Annotated[
        int, typer.Option(min=1, max=10_000_000, help="Characters in one request's texts together.")
    ] = 20_000,
    api_key_file: Annotated[
        Path | None, typer.Option(help="Keys, one a line: every request must carry one (else 403).")
    ] = None,
    default: Annotated[
        list[str] | None,
        typer.Option("--default", help="A served model (as /v1/models names it): its pair's default."),
    ] = None,
    access_log: Annotated[bool, typer.Option(help="Log every request (uvicorn's access log).")] = False,
) -> None:
    """Serve translation over HTTP: the LibreTranslate API (POST /translate, GET /languages), nmt's own
    (POST /v1/translate, GET /v1/models, GET /health), the attention explorer at / and the OpenAPI
    document of them all at /openapi.json.

    Runs of the same language pair that share a vocabulary are also served as their ensemble, the pair's
    default unless --default names another. Requests from all clients are decoded together in batches.
    SIGTERM or Ctrl-C answers the requests in flight, then exits with code 0.
    """
    from nmt.serve.server import check_installed

    check_installed()
    from nmt.decode.loading import choose_engine
    from nmt.device.choice import resolve_device
    from nmt.serve.engines import load_catalog
    from nmt.serve.requests import Limits
    from nmt.serve.server import Settings, listen, read_keys
    from nmt.serve.server import serve as run_server

    engine = choose_engine(engine, run_dirs, checkpoint)
    keys = read_keys(api_key_file) if api_key_file is not None else None
    listen(host, port).close()  # a busy port is reported before the models load
    catalog = load_catalog(run_dirs, engine, resolve_device(device), checkpoint, beam_size, default)
    beams = [e.beam_size for engines in catalog.engines.values() for e in engines.values()]
    limits = Limits(max_texts=max_texts, max_chars=max_chars, max_beam=max(16, *beams))
    run_server(catalog, Settings(host, port, max_batch_tokens, max_delay_ms, limits, keys, access_log))
