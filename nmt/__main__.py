"""`python -m nmt ...`, `torchrun -m nmt ...` and the `nmt` command: the CLI in a process of its own."""

import os
import sys

from nmt import interrupts


def main() -> None:
    """Run the CLI with SIGTERM answered like SIGINT (nmt/interrupts.py).

    A process started by torchrun leaves with os._exit once its output is flushed: during interpreter
    shutdown, threads of torch.distributed's backends now and then abort the process ("terminate called
    without an active exception") although its work is done and its files are written. An interrupted process
    leaves so too: interpreter shutdown resets the signal handlers, and a further Ctrl-C there would end it
    with the signal's own status rather than 130.
    """
    interrupts.install()
    code: object = 0
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
        os._exit(code if isinstance(code, int) else 0 if code is None else 1)
    sys.exit(code)


if __name__ == "__main__":
    main()
