"""`python -m nmt ...`, `torchrun -m nmt ...` and the `nmt` command: the CLI in a process of its own."""

import os
import sys

from nmt import interrupts


def main() -> None:
    """Run the CLI with SIGTERM answered like SIGINT (nmt/interrupts.py).

    A process started by torchrun leaves with os._exit once its output is flushed, without tearing down its
    process group: the destructor of gloo's process group joins the backend's worker threads while holding
    the GIL, and a worker still releasing the tensors of the last collective needs the GIL (a deadlock seen
    about once in ten runs on 2 CPU cores); threads of the backends left to interpreter shutdown also abort
    the process now and then ("terminate called without an active exception"). An interrupted process leaves
    so too: interpreter shutdown resets the signal handlers, and a further Ctrl-C there would end it with the
    signal's own status rather than 130.
    """
    interrupts.install()
    code: str | int | None = 0
    try:
        from nmt.cli import app

        app(prog_name="nmt")
    except SystemExit as done:
        code = done.code
    except KeyboardInterrupt:  # before a command started (an import)
        sys.stderr.write("nmt: interrupted\n")
        code = interrupts.EXIT_CODE
    interrupts.reported()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 or code == interrupts.EXIT_CODE:
        sys.stdout.flush()
        sys.stderr.flush()
        interrupts.exit_now(code if isinstance(code, int) else 0 if code is None else 1)
    sys.exit(code)


if __name__ == "__main__":
    main()
