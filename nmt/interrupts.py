"""How a process of `nmt` answers SIGINT and SIGTERM: alike, with one line on stderr and exit code 130.

The first signal raises KeyboardInterrupt (training instead stops after the step: `after_the_step`), so that
`finally` blocks and context managers clean up. A further signal stops the process at once: raised again it
could land in a finalizer or a generator being closed, where Python prints "Exception ignored …" with a
traceback and carries on. Files are written under temporary names and renamed, so stopping at once leaves
nothing half-written under a real name; the temporary files being written (`unfinished`), in any thread, are
removed on the way out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from nmt.errors import REPORTS_ENV, process_rank

SIGNALS = (signal.SIGINT, signal.SIGTERM)
Handler = Callable[[int, FrameType | None], object] | int | None  # what signal.signal takes (SIG_DFL: an int)
EXIT_CODE = 130


# Process state, as the signal handlers are: the temporary files being written, by any thread, which an exit
# at once removes. A set of str: adding, discarding and copying it run no Python code, so a signal handler
# in the main thread sees it whole while another thread changes it.
_UNFINISHED: set[str] = set()


@contextlib.contextmanager
def unfinished(path: Path) -> Iterator[None]:
    """`path` is a temporary file that the block creates and renames (or fails): it is removed when the block
    ends without renaming it, and when the process stops at once meanwhile (a second Ctrl-C, whatever thread
    writes it). Registered before the block creates it, so that no moment leaves it unknown."""
    name = str(path)
    _UNFINISHED.add(name)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):  # renamed into place, or never created
            os.unlink(name)
        _UNFINISHED.discard(name)


def exit_now(code: int) -> None:
    """End the process with `code` at once, without any cleanup but removing unfinished temporary files."""
    for name in list(_UNFINISHED):
        with contextlib.suppress(OSError):
            os.unlink(name)
    os._exit(code)


def interrupt(_signum: int, _frame: FrameType | None) -> None:
    """The first signal: KeyboardInterrupt; a further one stops the process at once."""
    for sig in SIGNALS:
        signal.signal(sig, stop_now)
    raise KeyboardInterrupt


def stop_now(_signum: int, _frame: FrameType | None) -> None:
    """A signal while the process already stops: one line and exit code 130, without any cleanup. Under
    torchrun only the main process prints it; under `nmt … --nproc` the launching process does."""
    if process_rank() == 0 and REPORTS_ENV not in os.environ:
        os.write(2, b"nmt: interrupted\n")
    exit_now(EXIT_CODE)


def exit_silently(_signum: int, _frame: FrameType | None) -> None:
    """A signal after the process reported how it ends: exit code 130, and no second line."""
    exit_now(EXIT_CODE)


def reported() -> None:
    """The process printed its last line: a signal from now on (as during interpreter shutdown) just ends it.
    Only this module's handlers are replaced (not those of a test calling the CLI in its own process)."""
    if _current() in (interrupt, stop_now):
        _install(exit_silently)


def install() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt, for the life of the process (`python -m nmt`, `nmt`)."""
    _install(interrupt)


def _current() -> Handler:
    return signal.getsignal(signal.SIGINT)


def _install(handler: Handler) -> None:
    if threading.current_thread() is threading.main_thread():
        for sig in SIGNALS:
            signal.signal(sig, handler)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM received during the block take effect as it ends, raised where the `with` statement
    is: for a step that must not be cut in half, such as starting a child process and keeping its handle."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: received.append(signum)) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if received:
            signal.raise_signal(received[0])


@dataclass
class StopRequest:
    """The signal that asked training to stop after its current step, if any."""

    signal: int | None = None


@contextlib.contextmanager
def after_the_step(request: StopRequest) -> Iterator[None]:
    """For the block (the training loop), SIGINT/SIGTERM set `request.signal`: the loop then saves `last.pt`
    and stops after the current step, and says so; a further signal stops the process at once (`stop_now`).
    The handler writes nothing: a signal that arrives while the log writes train.log would re-enter its
    buffered stream (a "Logging error" traceback)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if request.signal is not None:  # a second Ctrl-C: stop at once (last.pt is renamed into place)
            stop_now(signum, frame)
        request.signal = signum

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield
    finally:  # once stopping, the process's own handler (`interrupt`) would raise in the cleanup
        stopping = request.signal is not None
        for sig, old in previous.items():
            signal.signal(sig, stop_now if stopping and old is interrupt else old)
