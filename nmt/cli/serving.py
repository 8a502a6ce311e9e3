"""`nmt serve`: translation over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.options import BeamSize, Checkpoint, Device, RunDirs
from nmt.limits import MAX_SIZE
from nmt.serve.cache import DEFAULT_ENTRIES, DEFAULT_MIB


def serve(
    run_dirs: RunDirs,
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one, logged).")] = 8000,
    engine: Annotated[
        str,
        typer.Option(
            help="auto: ctranslate2 for directories written by `nmt export`, torch for run directories."
        ),
    ] = "auto",
    device: Device = "auto",
    beam_size: BeamSize = None,
    checkpoint: Checkpoint = None,
    max_batch_tokens: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=MAX_SIZE,
            help="A batch closes at sentences × (longest source + eos) × beam size; default: the served "
            "models' search.batch_tokens (the smallest).",
        ),
    ] = None,
    max_delay_ms: Annotated[
        float,
        typer.Option(min=0, max=60_000, help="… or this long after the last batch, for its clients."),
    ] = 10.0,
    max_texts: Annotated[int, typer.Option(min=1, max=100_000, help="Texts in one request's q.")] = 128,
    max_chars: Annotated[
        int, typer.Option(min=1, max=10_000_000, help="Characters in one request's texts together.")
    ] = 20_000,
    api_key_file: Annotated[
        Path | None, typer.Option(help="Keys, one a line: every request must carry one (else 403).")
    ] = None,
    default: Annotated[
        list[str] | None,
        typer.Option("--default", help="A served model (as /v1/models names it): its pair's default."),
    ] = None,
    access_log: Annotated[bool, typer.Option(help="Log every request (uvicorn's access log).")] = False,
    cache: Annotated[
        bool, typer.Option(help="Answer a text translated before (same model and settings) from memory.")
    ] = True,
    cache_entries: Annotated[
        int, typer.Option(min=1, max=100_000_000, help="Texts the translation cache holds at most.")
    ] = DEFAULT_ENTRIES,
    cache_mib: Annotated[
        float, typer.Option(min=1, max=1_000_000, help="MiB the cached texts and translations take at most.")
    ] = DEFAULT_MIB,
    threads: Annotated[
        int,
        typer.Option(
            min=0, max=1024, help="CPU threads of a search (0: one fewer than the cores, at least 1)."
        ),
    ] = 0,
    glossary: Annotated[
        Path | None,
        typer.Option(
            help="A glossary for every request, SOURCE<TAB>TARGET lines (NAME.SRC-TGT.tsv for a direction "
            "when there is one), written into the sources of models trained with data.terminology, the "
            "constraints of constrained search for other torch models; a request's glossary entries replace "
            "its entries of the same source term."
        ),
    ] = None,
) -> None:
    """Serve translation over HTTP: the LibreTranslate API (POST /translate, GET /languages), nmt's own
    (POST /v1/translate, GET /v1/models, GET /health), the attention explorer at / and the OpenAPI
    document of them all at /openapi.json.

    Runs of the same language pair that share a vocabulary are also served as their ensemble, the pair's
    default unless --default names another. Requests from all clients are decoded together in batches.
    SIGTERM or Ctrl-C answers the requests in flight, then exits with code 0.

    With --glossary every request's texts get the glossary's terms written in, for a model trained with
    data.terminology, or are translated by constrained search that makes each output hold them, for any
    other torch model (docs/terminology.md); it is checked at startup as `nmt translate --glossary` checks
    it, and a CTranslate2 export trained without data.terminology is refused.
    """
    from nmt.serve.server import check_installed

    check_installed()
    from nmt.data.glossary import read_glossary
    from nmt.decode.loading import choose_engine
    from nmt.device.choice import resolve_device
    from nmt.serve.cache import CacheLimits
    from nmt.serve.engines import load_catalog
    from nmt.serve.glossary import with_server_glossary
    from nmt.serve.requests import Limits
    from nmt.serve.server import Settings, listen, read_keys, search_threads
    from nmt.serve.server import serve as run_server

    engine = choose_engine(engine, run_dirs, checkpoint)
    keys = read_keys(api_key_file) if api_key_file is not None else None
    listen(host, port).close()  # a busy port is reported before the models load
    threads = search_threads(threads)
    if glossary is not None:
        read_glossary(glossary)  # a bad file is refused before the models load
    catalog = load_catalog(run_dirs, engine, resolve_device(device), checkpoint, beam_size, default, threads)
    if glossary is not None:
        catalog = with_server_glossary(catalog, glossary)
    beams = [e.beam_size for engines in catalog.engines.values() for e in engines.values()]
    limits = Limits(max_texts=max_texts, max_chars=max_chars, max_beam=max(16, *beams))
    memory = CacheLimits(cache_entries if cache else 0, cache_mib)
    budget = max_batch_tokens or catalog.batch_tokens()
    settings = Settings(host, port, budget, max_delay_ms, limits, keys, access_log, memory)
    run_server(catalog, settings)
