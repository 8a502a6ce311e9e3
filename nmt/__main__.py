"""The process entry point: `nmt …`, `python -m nmt …` and `torchrun -m nmt …` run the CLI of nmt/cli.py."""

import os
import sys

from nmt.cli import app


def main() -> None:
    """Run the CLI. A process started by torchrun leaves with os._exit once its output is flushed, without
    tearing down its process group: the destructor of gloo's process group joins the backend's worker threads
    while holding the GIL, and a worker still releasing the tensors of the last collective needs the GIL (a
    deadlock seen about once in ten runs on 2 CPU cores); threads of the backends left to interpreter shutdown
    also abort the process now and then ("terminate called without an active exception")."""
    if int(os.environ.get("WORLD_SIZE", "1")) == 1:
        app(prog_name="nmt")
        return
    code: object = 0
    try:
        app(prog_name="nmt")
    except SystemExit as done:
        code = done.code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)


if __name__ == "__main__":
    main()
