"""Between the HTTP routes and the batcher: choosing the model of a request, splitting its texts into lines,
encoding and checking them, and queueing them for decoding."""

from __future__ import annotations

from dataclasses import dataclass

from nmt.data.corpus import normalize
from nmt.serve.batcher import Batcher, Closed, SentenceFailed
from nmt.serve.engines import Catalog, Engine, Options, Translated
from nmt.serve.payloads import ApiError, Limits


@dataclass(frozen=True)
class Line:
    """One line of a text: its subword ids (empty for a blank line) and what decoding found."""

    ids: list[int]
    found: Translated


class Service:
    """The served models, the batcher that decodes for all of them, and the request limits."""

    def __init__(self, catalog: Catalog, batcher: Batcher, limits: Limits) -> None:
        self.catalog, self.batcher, self.limits = catalog, batcher, limits

    def choose(self, source: str | None, target: str | None, model: str | None) -> Engine:
        """The model named `model`, else the default one of the pair `source` → `target`; a `source` of
        'auto' is the one source language served into `target`."""
        if model is not None:
            engine = self.catalog.engines.get(model)
            if engine is None:
                raise ApiError(400, f"no model {model!r}; served: {', '.join(self.catalog.engines)}")
            if (source not in (None, "auto", engine.source)) or (target not in (None, engine.target)):
                raise ApiError(400, f"model {model!r} translates {engine.source} → {engine.target}")
            return engine
        if source == "auto":
            sources = sorted({s for s, t in self.catalog.defaults if t == target})
            if len(sources) != 1:
                raise ApiError(400, f"source 'auto' needs one source language served into {target!r}; "
                               f"there are {len(sources)}: name it")  # fmt: skip
            source = sources[0]
        name = self.catalog.defaults.get((source or "", target or ""))
        if name is None:
            pairs = ", ".join(f"{s}→{t}" for s, t in self.catalog.defaults)
            raise ApiError(400, f"{source} → {target} is not served; pairs: {pairs}")
        return self.catalog.engines[name]

    async def translate(self, engine: Engine, texts: list[str], options: Options) -> list[list[Line]]:
        """Each text's lines translated (blank lines stay blank), all lines of all texts queued together."""
        if options.attention and not engine.has_attention:
            raise ApiError(400, f"model {engine.name!r} ({engine.describe()['engine']}) returns no attention")
        lines = [text.split("\n") for text in texts]
        flat = engine.tokenizers.src.encode([normalize(line) for text in lines for line in text])
        for i, ids in enumerate(flat):
            if len(ids) > engine.max_source_len:
                raise ApiError(400, f"line {i + 1} of the request has {len(ids)} subwords; {engine.name} "
                               f"translates at most {engine.max_source_len} a line: split it")  # fmt: skip
        try:
            found = await self.batcher.translate((engine.name, options), flat, options.beam_size)
        except Closed as err:
            raise ApiError(503, str(err)) from err
        except SentenceFailed as err:
            what = "out of memory translating" if err.memory else "failed to translate"
            raise ApiError(503 if err.memory else 500, f"the server {what} this text: {err}") from err
        out, start = [], 0
        for text in lines:
            end = start + len(text)
            out.append([Line(ids, f) for ids, f in zip(flat[start:end], found[start:end], strict=True)])
            start = end
        return out

    def options(self, engine: Engine, beam_size: int | None, nbest: int, attention: bool) -> Options:
        """Search options of a request: its beam size (else the model's), wide enough for `nbest`."""
        beam = max(beam_size or engine.beam_size, nbest)
        if beam > self.limits.max_beam:
            raise ApiError(400, f"a beam of {beam} exceeds this server's limit of {self.limits.max_beam}")
        return Options(beam, nbest, attention)
