"""The options that several commands share, declared once: run directories, --device, the languages of a
multilingual model, --set, and the search options (derived from the search settings' declarations,
nmt/config/search_flags.py); and how their values become config overrides."""

from __future__ import annotations

import functools
import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand

from nmt.config.search_flags import flag, given_settings, setting_types
from nmt.data.corpus import data_layout
from nmt.errors import UserError

if TYPE_CHECKING:
    from typer._click import Context as ClickContext  # what its methods take (typer.Context's base)

    from nmt.decode.languages import Asked


Choice = TypeVar("Choice", bound=str)


class WithOverrides(TyperCommand):
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


def checked_choice(option: str, value: str, choices: tuple[Choice, ...]) -> Choice:
    """`value` of `option` as one of `choices` (typed as their Literal); any other is a UserError."""
    for choice in choices:
        if value == choice:
            return choice
    raise UserError(f"{option} {value}: expected {' or '.join(choices)}")


RunDirArgument = Annotated[Path, typer.Argument(help="Run directory written by `nmt train`.")]
DEVICES = "auto, cpu, cuda or cuda:N (the GPU numbered N, from 0)"
Device = Annotated[str, typer.Option(help=f"{DEVICES}.")]
Glossary = Annotated[
    Path | None,
    typer.Option(
        help="A glossary, SOURCE<TAB>TARGET lines (a multilingual run reads NAME.SRC-TGT.tsv for its "
        "direction when there is one): its terms are written into each source between the markers of a run "
        "trained with data.terminology, or made to appear by constrained search (--glossary-mode; "
        "docs/terminology.md)."
    ),
]
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
BatchTokens = Annotated[int | None, search_option("batch_tokens")]
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
Int8 = Annotated[
    bool,
    typer.Option(
        "--int8",
        help="Decode on the CPU with int8 weights in every linear layer and the output projection (dynamic "
        "quantization; the torch engine's; an export's are chosen by `nmt export --quantization`).",
    ),
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


def asked_direction(
    src_lang: str | None, tgt_lang: str | None, zero_shot: bool, pivot: str | None = None
) -> Asked:
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
