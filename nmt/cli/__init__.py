"""The `nmt` command line: each command parses its arguments, loads what it needs, calls one library function.

Mistakes a user can fix (UserError, and usage errors such as a bad option value) print one line on stderr and
exit with code 2; an interrupted training run exits with 130 after saving its checkpoint.

This module builds the Typer app and registers the commands, in the order `nmt --help` lists them; each family
of commands has a module of its own (training.py, translating.py, evaluating.py, aligning.py, …), and the
options they share are declared once in options.py. group.py holds the error handling every command goes
through.
"""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from nmt.cli import aligning, downloading, evaluating, exporting, importing, serving, training, translating
from nmt.cli.group import Commands
from nmt.cli.logs import log_to_stderr
from nmt.cli.options import WithOverrides

app = typer.Typer(
    cls=Commands,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # help as written: brackets such as `[i, j]` are text, not Rich markup
    help="Train, use and inspect neural machine translation models.",
)


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
    log_to_stderr(logging.WARNING if quiet else logging.INFO)


app.command()(downloading.download)
app.command("import")(importing.import_model)
app.command(cls=WithOverrides)(training.train)
app.command()(translating.translate)
app.command()(evaluating.evaluate)
app.command("plot-attention")(translating.plot_attention)
app.command()(aligning.align)
app.command("score-alignments")(aligning.score_alignments)
app.command()(aligning.symmetrize)
app.command()(training.average)
app.command()(exporting.export)
app.command(cls=WithOverrides)(training.benchmark)
app.command()(serving.serve)
