"""SIGINT and SIGTERM, in any command and at awkward moments: one line, exit code 130; a signal while a block
must not be cut is held until the block ends."""

import signal
import threading
import time
from pathlib import Path

import pytest

from nmt import interrupts
from nmt.run.checkpoint_io import load_checkpoint
from tests.conftest import assert_interrupted, start_nmt, train_args, wait_until


def test_a_signal_deferred_takes_effect_where_the_block_ends() -> None:
    """Ctrl-C while a child process starts is held until its handle is kept, then raised at the `with` to the
    handler that was there before (one of the test's own: whatever earlier tests left installed in this
    process does not decide the outcome)."""
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, []), "SIGINT is blocked here"
    seen: list[int] = []

    def outer(signum: int, _frame: object) -> None:
        seen.append(signum)
        raise KeyboardInterrupt

    steps = []
    previous = signal.signal(signal.SIGINT, outer)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts.deferred():
            # to the main thread itself: a signal to the process may reach another thread (a library's) first
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.05)  # where an undeferred handler would already have raised
            steps.append(f"block finished, {len(seen)} signal(s) seen")
        assert signal.getsignal(signal.SIGINT) is outer
    finally:
        signal.signal(signal.SIGINT, previous)
    assert steps == ["block finished, 0 signal(s) seen"]
    assert seen == [signal.SIGINT]


@pytest.mark.slow
def test_sigterm_in_any_command_is_like_ctrl_c(trained_run: Path) -> None:
    process = start_nmt("translate", str(trained_run))  # waits for standard input
    time.sleep(2)
    process.send_signal(signal.SIGTERM)
    assert_interrupted(process, "nmt: interrupted")


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("gap", [0.0, 0.05, 0.3])
def test_a_second_signal_soon_after_the_first_is_one_line(
    signum: int, gap: float, tiny: Path, small_corpus: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    process = start_nmt(*train_args(tiny, small_corpus, run, "--max-steps", "100000"))
    wait_until(lambda: (run / "last.pt").exists(), process)
    process.send_signal(signum)
    time.sleep(gap)
    process.send_signal(signum)
    assert_interrupted(process, "nmt: interrupted")
    assert load_checkpoint(run / "last.pt")["progress"]["step"] > 0
