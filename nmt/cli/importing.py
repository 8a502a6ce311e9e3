"""`nmt import`: a published MarianMT model (OPUS-MT) as a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def import_model(
    source: Annotated[
        str,
        typer.Argument(
            help="A transformers MarianMT model directory (config.json, model.safetensors, source.spm, "
            "target.spm, vocab.json), or a hub id such as Helsinki-NLP/opus-mt-de-en."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Run directory to write (new, or empty).")],
) -> None:
    """Import a MarianMT model (an OPUS-MT model) as a run directory that every command reads: translate,
    evaluate, plot-attention, align, serve, export, and `nmt train CONFIG --init-from RUN_DIR` to fine-tune
    it.

    The run keeps the model's sentencepiece models and vocabulary, its generation settings (beams scored as
    transformers scores them) and, in RUN_DIR/origin.json, where it came from: the hub id and revision, the
    sha256 of each file read and the model card's licence.
    """
    from nmt.importing.marian import import_model as run_import

    typer.echo(run_import(source, out))
