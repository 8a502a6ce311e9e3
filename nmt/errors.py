"""Exceptions the CLI turns into one line: mistakes a user can fix (exit code 2) and interruptions (130); and
which process of a torchrun job reports them."""

import os


class UserError(Exception):
    """Something in the user's input, files or flags is wrong; the message says what and how to fix it."""


class PeerFailed(UserError):
    """Another process of a torchrun job failed and reports its own error: this one exits with code 2 and
    prints nothing, so that the user reads one line per job."""


class ConfigError(UserError):
    """A config file or override is invalid."""


class Interrupted(Exception):
    """Training stopped by SIGINT/SIGTERM after writing its last checkpoint (the CLI exits with 130)."""


# Under `nmt … --nproc N` each process writes the line it would print into this directory (named by the
# environment variable) instead; the launching process prints one of them.
REPORTS_ENV = "NMT_REPORTS"


def process_rank() -> int:
    """This process's rank in a torchrun job; 0, the main process (the one that reports for the job), when
    torchrun did not start it."""
    return int(os.environ.get("RANK", "0"))
