"""The models a server translates with, behind one blocking `search` that the batcher calls from its thread.

Each run directory is served as itself, named after its directory; the runs of one language pair that share a
vocabulary are also served as their ensemble, which is then the pair's default (as `nmt translate RUN RUN`
decodes) unless `--default NAME` chooses another; the default of each pair is logged at startup. With
`--engine ctranslate2` each directory is an export of `nmt export` instead.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from nmt.data.tokenizer import Tokenizers
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import TrainedRun, ensemble, load_run
from nmt.decode.translate import max_source_len, teacher_forced_attention, translate_ids
from nmt.errors import UserError
from nmt.models.config import ModelConfig
from nmt.serve.answers import ModelFacts, ReportedBleu

if TYPE_CHECKING:
    from nmt.export.runtime import Exported

log = logging.getLogger(__name__)

ENSEMBLE_ATTENTION = "one layer, one head: what search collected, the mean of the members' last layers' heads"


@dataclass(frozen=True)
class Options:
    """How a request wants its sentences searched; sentences batch only with others searched alike."""

    beam_size: int
    nbest: int
    attention: bool


@dataclass(frozen=True)
class Decoding:
    """What to decode and how: the served model's name and the search options. The batcher's key: sentences
    batch only with others decoded alike."""

    model: str
    options: Options


@dataclass(frozen=True)
class Translated:
    """One sentence's hypotheses, best first, and (when asked) the attention paid for each:
    (layers, heads, len(tokens) + 1, source subwords + 1), the rows and columns ending with eos."""

    hypotheses: list[Hypothesis]
    attention: list[Tensor] | None = None


class Engine(ABC):
    """A model served under `name` for one language pair."""

    def __init__(
        self, name: str, pair: tuple[str, str], tokenizers: Tokenizers, max_source_len: int, beam_size: int
    ) -> None:
        self.name, (self.source, self.target) = name, pair
        self.tokenizers, self.max_source_len, self.beam_size = tokenizers, max_source_len, beam_size

    has_attention = True

    @abstractmethod
    def search(self, sources: list[list[int]], options: Options) -> list[Translated]:
        """Search source id lists (each at most `max_source_len` long) as one batch; blocking."""

    @abstractmethod
    def describe(self) -> ModelFacts:
        """What /v1/models says of the model beyond its name and pair."""


class TorchEngine(Engine):
    """A trained run (or an ensemble of runs) decoded by nmt's own search."""

    def __init__(self, name: str, run: TrainedRun, members: list[TrainedRun]) -> None:
        cfg = run.cfg
        super().__init__(
            name,
            (cfg.data.src_lang, cfg.data.tgt_lang),
            run.tokenizers,
            max_source_len(cfg),
            cfg.search.beam_size,
        )
        self.run, self.members = run, members

    def search(self, sources: list[list[int]], options: Options) -> list[Translated]:
        search = dataclasses.replace(
            self.run.cfg.search,
            beam_size=options.beam_size,
            nbest=options.nbest,
            batch_size=max(1, len(sources)),
            cuda_graphs=False,  # every batch has a new shape: a capture per batch costs more than it saves
        )
        searched = options.attention and len(self.members) > 1  # an ensemble has no teacher-forced pass
        with torch.inference_mode():
            found = translate_ids(self.run.model, sources, search, self.max_source_len, searched)
        if not options.attention:
            return [Translated(hyps) for hyps in found]
        return [self._with_attention(src, hyps) for src, hyps in zip(sources, found, strict=True)]

    def _with_attention(self, src: list[int], hyps: list[Hypothesis]) -> Translated:
        """The hypotheses with every layer's and head's attention (an ensemble: what search collected, the
        mean of its members' last layers and heads, as one layer and one head); none for an empty source."""
        if not src:
            return Translated(hyps)
        if len(self.members) > 1:  # search collected every hypothesis' attention: none is None
            return Translated(hyps, [h.attention[None, None] for h in hyps])  # type: ignore[index]
        return Translated(hyps, teacher_forced_attention(self.run.model, src, [h.tokens for h in hyps]))

    def describe(self) -> ModelFacts:
        alone = len(self.members) == 1
        return ModelFacts(
            engine="torch",
            type=self.run.cfg.model.type if alone else "ensemble",
            runs=[member.directory.path.name for member in self.members],
            checkpoint=self.run.checkpoint_name,
            parameters=sum(p.numel() for p in self.run.model.parameters()),
            test_bleu=_test_bleu(self.run) if alone else None,
            beam_size=self.beam_size,
            attention=attention_layout(self.run.cfg.model) if alone else ENSEMBLE_ATTENTION,
        )


def attention_layout(model: ModelConfig) -> str:
    """The encoder-decoder attention a trained model returns: a Transformer's layers and heads, an RNN's one
    attention."""
    if model.transformer is None:
        return f"one layer, one head: {model.attention_name(0)}"
    return f"{model.decoder_layers} decoder layers × {model.transformer.heads} heads (scaled dot-product)"


def _test_bleu(run: TrainedRun) -> ReportedBleu | None:
    """The test BLEU in the run's report.json and the checkpoint it scored, if the report has one."""
    try:
        report = json.loads(run.directory.report.read_text(encoding="utf-8"))
        chosen = report["checkpoint"]
        return ReportedBleu(bleu=report["test"][chosen]["bleu"], checkpoint=chosen)
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ExportedEngine(Engine):
    """An export of `nmt export --to ctranslate2`: n-best with CTranslate2's scores, no attention."""

    has_attention = False

    def __init__(self, name: str, exported: Exported) -> None:
        if exported.languages is None:
            raise UserError(f"{name}: the export names no language pair; export the run again with this nmt")
        super().__init__(
            name, exported.languages, exported.tokenizers, exported.max_source_len, exported.search.beam_size
        )
        self.exported = exported

    def search(self, sources: list[list[int]], options: Options) -> list[Translated]:
        found = self.exported.hypotheses(sources, options.beam_size, len(sources) or 1, options.nbest)
        return [Translated(hyps) for hyps in found]

    def describe(self) -> ModelFacts:
        return ModelFacts(
            engine="ctranslate2",
            type="transformer",
            runs=[self.name],
            checkpoint=None,
            parameters=None,
            test_bleu=None,
            beam_size=self.beam_size,
            attention=None,
        )


@dataclass
class Catalog:
    """The served models by name, and the default model of each language pair."""

    engines: dict[str, Engine]
    defaults: dict[tuple[str, str], str]

    def search(self, decoding: Decoding, sources: list[list[int]]) -> list[Translated]:
        """Decode source id lists as `decoding` says (the batcher's decode function); blocking."""
        return self.engines[decoding.model].search(sources, decoding.options)


def load_catalog(
    paths: list[Path],
    engine: str,
    device: torch.device,
    which: str | None,
    beam_size: int | None,
    defaults: list[str] | None = None,
) -> Catalog:
    """Load every directory (`engine` torch: run directories, with `which` checkpoint; ctranslate2: exports)
    and name each after its directory (`name-2`, … for repeated names); `beam_size`, when given, replaces
    each model's own; `defaults`: served names that become the default of their pair."""
    names = _unique_names(paths)
    if engine == "ctranslate2":
        from nmt.export.runtime import load_export

        search = {"beam_size": beam_size} if beam_size is not None else {}
        exports: list[Engine] = [
            ExportedEngine(n, load_export(p, device.type).with_search(search))
            for n, p in zip(names, paths, strict=True)
        ]
        return _catalog(exports, [], defaults or [])
    overrides = [f"search.beam_size={beam_size}"] if beam_size is not None else []
    runs = [load_run(path, device, which, overrides) for path in paths]
    engines: list[Engine] = [TorchEngine(name, run, [run]) for name, run in zip(names, runs, strict=True)]
    ensembles: list[Engine] = []
    for pair, group in _by_pair(runs).items():
        if len(group) > 1:
            try:
                ensembles.append(TorchEngine(f"ensemble-{pair[0]}-{pair[1]}", ensemble(group), group))
            except UserError as err:
                log.warning("%s; no ensemble of %s → %s", err, *pair)
    return _catalog(engines, ensembles, defaults or [])


def _catalog(engines: list[Engine], ensembles: list[Engine], chosen: list[str]) -> Catalog:
    """Each pair's default is the model `chosen` names for it, else its ensemble, else its first model; each
    pair's default is logged with the other models of the pair."""
    served = {e.name: e for e in engines + ensembles}
    defaults: dict[tuple[str, str], str] = {}
    for engine in engines:
        defaults.setdefault((engine.source, engine.target), engine.name)
    defaults |= {(e.source, e.target): e.name for e in ensembles}
    picked: dict[tuple[str, str], str] = {}
    for name in chosen:
        if name not in served:
            raise UserError(f"--default {name}: no such model; served: {', '.join(served)}")
        pair = (served[name].source, served[name].target)
        if pair in picked and picked[pair] != name:
            raise UserError(
                f"--default {picked[pair]} and --default {name} both translate {pair[0]} → "
                f"{pair[1]}: choose one"
            )
        picked[pair] = name
    defaults |= picked
    for (source, target), name in defaults.items():
        others = [
            e.name
            for e in served.values()
            if (e.source, e.target, e.name) != (source, target, name)
            and (e.source, e.target) == (source, target)
        ]
        also = f" (also served: {', '.join(others)}; --default NAME chooses)" if others else ""
        log.info("%s → %s: %s by default%s", source, target, name, also)
    return Catalog(served, defaults)


def _by_pair(runs: list[TrainedRun]) -> dict[tuple[str, str], list[TrainedRun]]:
    groups: dict[tuple[str, str], list[TrainedRun]] = {}
    for run in runs:
        groups.setdefault((run.cfg.data.src_lang, run.cfg.data.tgt_lang), []).append(run)
    return groups


def _unique_names(paths: list[Path]) -> list[str]:
    names: list[str] = []
    for path in paths:
        base = Path(os.path.abspath(path)).name or "run"  # a symbolic link keeps its own name
        name, i = base, 1
        while name in names:
            i += 1
            name = f"{base}-{i}"
        names.append(name)
    return names
