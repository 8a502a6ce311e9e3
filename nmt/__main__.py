"""`python -m nmt ...` (and `torchrun -m nmt ...`) run the same CLI as the `nmt` command."""

import os
import sys

from nmt.cli import app

if int(os.environ.get("WORLD_SIZE", "1")) > 1:
    # A process started by torchrun leaves with os._exit once its output is flushed: during interpreter
    # shutdown, threads of torch.distributed's backends now and then abort the process ("terminate called
    # without an active exception") although its work is done and its files are written.
    code: object = 0
    try:
        app(prog_name="nmt")
    except SystemExit as done:
        code = done.code
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0 if code is None else 1)
else:
    app(prog_name="nmt")
