"""`nmt export`: a trained run for CTranslate2, Argos Translate or Hugging Face transformers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.options import Checkpoint, RunDirArgument


def export(
    run_dir: RunDirArgument,
    out_dir: Annotated[Path, typer.Argument(help="Directory to write (new, or empty); argos: a new file.")],
    to: Annotated[
        str,
        typer.Option(
            help="Format: ctranslate2, argos (an Argos Translate package) or huggingface (a transformers "
            "model directory)."
        ),
    ] = "ctranslate2",
    quantization: Annotated[
        str, typer.Option(help="Weight type: float32, int8, int8_float16, float16 (any CTranslate2 type).")
    ] = "float32",
    checkpoint: Checkpoint = None,
) -> None:
    """Export a trained Transformer for CTranslate2 (then: nmt translate OUT_DIR --engine ctranslate2), as an
    Argos Translate package, or for Hugging Face transformers.

    --to argos writes OUT_DIR as an Argos Translate package file (e.g. de_en.argosmodel) that argostranslate
    and LibreTranslate install and run offline: the CTranslate2 model, the sentencepiece model and a sentence
    splitter of written rules (punctuation, listed abbreviations, initials, ordinals), an ONNX graph in
    MiniSBD's format, not a trained model (the package's README states the rules).

    --to huggingface writes a directory that AutoModelForSeq2SeqLM.from_pretrained(OUT_DIR) and
    AutoTokenizer.from_pretrained(OUT_DIR) load (see OUT_DIR/README.md).
    """
    if to == "argos":
        from nmt.export.argos import export_package

        typer.echo(export_package(run_dir, out_dir, quantization, checkpoint))
        return
    if to == "huggingface":
        from nmt.export.huggingface import export_run as export_huggingface

        typer.echo(export_huggingface(run_dir, out_dir, quantization, checkpoint))
        return
    from nmt.export.ctranslate2 import export_run

    typer.echo(export_run(run_dir, out_dir, to, quantization, checkpoint))
