"""The command group that every command runs in, and how it reports a mistake or an interruption (also under
torchrun, where one line speaks for the job)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from nmt import interrupts
from nmt.errors import REPORTS_ENV, Interrupted, PeerFailed, UserError, process_rank

if TYPE_CHECKING:
    from typer._click import Context as ClickContext  # what TyperGroup's methods take (typer.Context's base)


class Commands(TyperGroup):
    """The command group. Every mistake a user can fix ends the same way, whichever command made it: one line
    `nmt: error: …` on stderr and exit code 2; an interruption exits with 130."""

    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        with _one_line_errors():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: ClickContext) -> Any:
        with _one_line_errors():
            return super().invoke(ctx)


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
