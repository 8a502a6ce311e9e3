"""`python -m nmt ...` (and `torchrun -m nmt ...`) run the same CLI as the `nmt` command."""

from nmt.cli import app

app(prog_name="nmt")
