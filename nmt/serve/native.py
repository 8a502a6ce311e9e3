"""nmt's own API: POST /v1/translate (n-best with scores, subwords and, on request, the attention of every
layer and head), GET /v1/models and GET /health."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from torch import Tensor

from nmt.serve.engines import Engine
from nmt.serve.payloads import boolean, integer, only, string, texts
from nmt.serve.service import Line, Service

FIELDS = {"q", "source", "target", "model", "nbest", "beam_size", "attention", "api_key"}
DIGITS = 5  # attention weights are rounded to this many decimals


async def translate(request: Request) -> JSONResponse:
    """POST /v1/translate: `q` (a string or a list of texts, each split into lines), `source` and `target` or
    `model`, `nbest`, `beam_size`, `attention` → per text its best translation and per line the hypotheses."""
    service: Service = request.app.state.service
    fields = request.state.fields
    only(fields, FIELDS)
    found, _ = texts(fields, service.limits)
    engine = service.choose(
        string(fields, "source", required=False),
        string(fields, "target", required=False),
        string(fields, "model", required=False),
    )
    high = service.limits.max_beam
    nbest = integer(fields, "nbest", 1, 1, high)
    beam = integer(fields, "beam_size", 0, 0, high) or None  # 0: the model's own
    options = service.options(engine, beam, nbest, boolean(fields, "attention", False))
    results = await service.translate(engine, found, options)
    return JSONResponse(
        {
            "model": engine.name,
            "source": engine.source,
            "target": engine.target,
            "beam_size": options.beam_size,
            "translations": [_text(engine, lines) for lines in results],
        }
    )


def _text(engine: Engine, lines: list[Line]) -> dict[str, Any]:
    described = [_line(engine, line) for line in lines]
    best = "\n".join(line["hypotheses"][0]["text"] for line in described)
    return {"translatedText": best, "lines": described}


def _line(engine: Engine, line: Line) -> dict[str, Any]:
    """A line's source subwords and hypotheses (text, score, target subwords, attention when asked). The
    subword lists end with '</s>': the attention has a row per target subword and a column per source one."""
    tokenizers, hyps = engine.tokenizers, line.found.hypotheses
    texts_ = tokenizers.tgt.decode([h.tokens for h in hyps])
    described = []
    for i, (hyp, text) in enumerate(zip(hyps, texts_, strict=True)):
        entry = {
            "text": text,
            "score": round(hyp.score, 4),
            "target_pieces": _pieces(tokenizers.tgt, hyp.tokens),
        }
        if line.found.attention is not None:
            entry["attention"] = _rounded(line.found.attention[i])
        described.append(entry)
    return {"source_pieces": _pieces(tokenizers.src, line.ids), "hypotheses": described}


def _pieces(tokenizer: Any, ids: list[int]) -> list[str]:
    return [*tokenizer.pieces(ids), "</s>"] if ids else []


def _rounded(weights: Tensor) -> list[Any]:
    """(layers, heads, tgt, src) weights as nested lists of numbers with `DIGITS` decimals."""
    return weights.double().mul(10**DIGITS).round().div(10**DIGITS).tolist()


async def models(request: Request) -> JSONResponse:
    """GET /v1/models: every served model, its pair, whether it is the pair's default, what it is."""
    catalog = request.app.state.service.catalog
    defaults = set(catalog.defaults.values())
    return JSONResponse(
        {
            "models": [
                {"name": name, "source": e.source, "target": e.target, "default": name in defaults}
                | e.describe()
                for name, e in catalog.engines.items()
            ]
        }
    )


async def health(request: Request) -> JSONResponse:
    """GET /health: the server answers; its models, sentences waiting, batches decoded so far."""
    service: Service = request.app.state.service
    stats = service.batcher.stats
    return JSONResponse(
        {
            "status": "ok",
            "models": list(service.catalog.engines),
            "waiting": service.batcher.waiting,
            "batches": stats.batches,
            "sentences": stats.sentences,
            "split_batches": stats.split_batches,
        }
    )
