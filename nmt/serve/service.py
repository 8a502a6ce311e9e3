"""Between the HTTP routes and the batcher: choosing the model of a request, tokenising both ways (each line
of a text into subword ids; each hypothesis back into text and subwords), and queueing the lines."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from nmt.data.corpus import normalize
from nmt.data.tokenizer import Tokenizers
from nmt.serve.batcher import Batcher, Closed, SentenceFailed
from nmt.serve.engines import Catalog, Decoding, Engine, Options, Translated
from nmt.serve.fields import RequestModels
from nmt.serve.payloads import ApiError, Limits, clipped


@dataclass(frozen=True)
class Found:
    """One hypothesis of a line: its text, score, subwords ending with '</s>' (none for a blank line), and
    when asked its attention (layers, heads, len(pieces), len(the line's source pieces))."""

    text: str
    score: float
    pieces: list[str]
    attention: Tensor | None


@dataclass(frozen=True)
class Line:
    """One line of a text: its subwords and '</s>' (none for a blank line), its hypotheses best first."""

    source_pieces: list[str]
    hypotheses: list[Found]


class Service:
    """The served models, the batcher that decodes for all of them, the request limits and the request models
    bounded by them."""

    def __init__(
        self,
        catalog: Catalog,
        batcher: Batcher[Decoding, Translated],
        limits: Limits,
        requests: RequestModels,
    ) -> None:
        self.catalog, self.batcher, self.limits, self.requests = catalog, batcher, limits, requests

    def choose(self, source: str | None, target: str | None, model: str | None) -> Engine:
        """The model named `model`, else the default one of the served pair that `source` → `target` names: a
        missing side, or a `source` of 'auto', is the one that the served pairs leave."""
        if model is not None:
            engine = self.catalog.engines.get(model)
            if engine is None:
                raise ApiError(400, f"no model {clipped(model)!r}; served: {', '.join(self.catalog.engines)}")
            if (source not in (None, "auto", engine.source)) or (target not in (None, engine.target)):
                raise ApiError(400, f"model {model!r} translates {engine.source} → {engine.target}")
            return engine
        defaults = self.catalog.defaults
        pairs = [(s, t) for s, t in defaults if source in (None, "auto", s) and target in (None, t)]
        if len(pairs) == 1:
            return self.catalog.engines[defaults[pairs[0]]]
        served = ", ".join(f"{s}→{t}" for s, t in defaults)
        asked = f"{clipped(source or 'any source')} → {clipped(target or 'any target')}"
        if not pairs:
            raise ApiError(400, f"{asked} is not served; pairs: {served}")
        matched = ", ".join(f"{s}→{t}" for s, t in pairs)
        raise ApiError(400, f"{asked} matches {len(pairs)} served pairs ({matched}): send source and target")

    def decoding(self, engine: Engine, beam_size: int | None, nbest: int, attention: bool) -> Decoding:
        """How to decode a request: with `engine`, its beam (else the model's), wide enough for `nbest`."""
        beam = max(beam_size or engine.beam_size, nbest)
        if beam > self.limits.max_beam:
            raise ApiError(400, f"a beam of {beam} exceeds this server's limit of {self.limits.max_beam}")
        return Decoding(engine.name, Options(beam, nbest, attention))

    async def translate(self, engine: Engine, texts: list[str], decoding: Decoding) -> list[list[Line]]:
        """Each text's lines translated (blank lines stay blank), all lines of all texts queued together."""
        if decoding.options.attention and not engine.has_attention:
            raise ApiError(400, f"model {engine.name!r} ({engine.describe().engine}) returns no attention")
        lines = [text.split("\n") for text in texts]
        flat = engine.tokenizers.src.encode([normalize(line) for text in lines for line in text])
        for i, ids in enumerate(flat):
            if len(ids) > engine.max_source_len:
                raise ApiError(
                    400,
                    f"line {i + 1} of the request has {len(ids)} subwords; {engine.name} "
                    f"translates at most {engine.max_source_len} a line: split it",
                )
        try:
            found = await self.batcher.translate(decoding, flat, decoding.options.beam_size)
        except Closed as err:
            raise ApiError(503, str(err)) from err
        except SentenceFailed as err:
            what = "out of memory translating" if err.memory else "failed to translate"
            raise ApiError(503 if err.memory else 500, f"the server {what} this text: {err}") from err
        decoded = [_line(engine.tokenizers, ids, f) for ids, f in zip(flat, found, strict=True)]
        out, start = [], 0
        for text in lines:
            out.append(decoded[start : start + len(text)])
            start += len(text)
        return out


def _line(tokenizers: Tokenizers, ids: list[int], found: Translated) -> Line:
    """A line's source ids and decode result as text and subwords."""
    hyps = found.hypotheses
    texts = tokenizers.tgt.decode([h.tokens for h in hyps])
    attention: list[Tensor | None] = [None] * len(hyps) if found.attention is None else [*found.attention]
    if not ids:  # a blank line: nothing was decoded
        return Line([], [Found(text, hyp.score, [], None) for hyp, text in zip(hyps, texts, strict=True)])
    return Line(
        [*tokenizers.src.pieces(ids), "</s>"],
        [
            Found(text, hyp.score, [*tokenizers.tgt.pieces(hyp.tokens), "</s>"], weights)
            for hyp, text, weights in zip(hyps, texts, attention, strict=True)
        ],
    )
