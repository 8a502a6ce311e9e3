"""`nmt download`: a parallel corpus as plain text files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def download(
    name: Annotated[
        str, typer.Argument(help="multi30k, iwslt2017, wmt14, a Hugging Face dataset id or a local path.")
    ],
    out: Annotated[Path, typer.Option(help="Directory for train/valid/test.<lang> files.")],
    src_lang: Annotated[str, typer.Option(help="Source language code.")] = "de",
    tgt_lang: Annotated[str, typer.Option(help="Target language code.")] = "en",
    hf_config: Annotated[str | None, typer.Option(help="Dataset config name, e.g. iwslt2017-de-en.")] = None,
) -> None:
    """Download a parallel corpus with Hugging Face `datasets` and write it as plain text files."""
    from nmt.data.download import download as fetch

    counts = fetch(name, out, src_lang, tgt_lang, hf_config)
    typer.echo(" ".join(f"{split}={n}" for split, n in counts.items()) + f" pairs written to {out}")
