"""The library's log records on the command's stderr, `nmt: message`, past any progress bar."""

from __future__ import annotations

import logging
import sys

from tqdm import tqdm


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


def log_to_stderr(level: int) -> None:
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
