"""The models a server translates with, behind one blocking `search` that the batcher calls from its thread.

Each run directory is served as itself, named after its directory, for every direction it was trained on (a
multilingual run: each of its directions, into the target language by its tag); the runs of one language pair
that share a vocabulary are also served as their ensemble, which is then the pair's default (as
`nmt translate RUN RUN` decodes) unless `--default NAME` chooses another; the default of each pair is logged
at startup. With `--engine ctranslate2` each directory is an export of `nmt export` instead.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt.config.sections import SearchConfig
from nmt.decode.search import Hypothesis
from nmt.decode.trained_run import TrainedRun, ensemble, load_run
from nmt.decode.translator import TorchTranslator, Translator, search_options, search_rule
from nmt.errors import UserError
from nmt.export.runtime import ExportedTranslator, load_export
from nmt.models.config import ModelConfig
from nmt.serve.answers import ModelFacts, ReportedBleu

log = logging.getLogger(__name__)

ENSEMBLE_ATTENTION = "one layer, one head: what search collected, the mean of the members' last layers' heads"


@dataclass(frozen=True)
class Decoding:
    """What to decode and how: the served model's name, the language it translates into, the search settings
    (the model's, changed by the request's) and whether each hypothesis' attention and word alignment come
    with it. The batcher's key: sentences batch only with others decoded alike (a sampled line draws the
    same whatever its batch)."""

    model: str
    settings: SearchConfig
    attention: bool = False
    alignments: bool = False
    target: str | None = None


Pair = tuple[str, str]  # source and target language


class Engine:
    """A model served under `name` for its language pairs (a multilingual model's directions): its
    translator, and what /v1/models says of it. `pair` gives the engine of one of them (`source`,
    `target`), which a request translates with."""

    def __init__(self, name: str, pairs: tuple[Pair, ...], translator: Translator, facts: ModelFacts) -> None:
        self.name, self.pairs, self.translator, self.facts = name, pairs, translator, facts

    @property
    def source(self) -> str:
        return self.pairs[0][0]

    @property
    def target(self) -> str:
        return self.pairs[0][1]

    def pair(self, source: str, target: str) -> Engine:
        """This model's engine for `source` → `target`, one of its pairs (a multilingual model's translator
        into `target`)."""
        return Engine(self.name, ((source, target),), into(self.translator, target), self.facts)

    @property
    def beam_size(self) -> int:
        return self.translator.settings.beam_size

    def search(self, sources: list[list[int]], decoding: Decoding) -> list[list[Hypothesis]]:
        """Search source id lists as one batch, as `decoding` says; blocking. Each batch has a new shape:
        capturing CUDA graphs would cost more than it saves."""
        settings = dataclasses.replace(decoding.settings, batch_size=max(1, len(sources)), cuda_graphs=False)
        searching = into(self.translator, decoding.target).with_search(**dataclasses.asdict(settings))
        wanted = search_options(settings, decoding.attention, decoding.alignments)
        return searching.search(sources, search_rule(settings), wanted)

    def describe(self) -> ModelFacts:
        """What /v1/models says of the model beyond its name and pair."""
        return self.facts


def into(translator: Translator, target: str | None) -> Translator:
    """A multilingual model's translator into `target`; a one-pair model's as it is."""
    return translator if target is None else translator.toward(target)


def pairs_of(translator: Translator, name: str) -> tuple[Pair, ...]:
    """The language pairs a model is served for: the directions it was trained on."""
    if not translator.directions:
        raise UserError(f"{name}: the export names no language pair; export the run again with this nmt")
    return tuple((d.src, d.tgt) for d in translator.directions)


def run_engine(name: str, run: TrainedRun, members: list[TrainedRun]) -> Engine:
    """A trained run (or an ensemble of runs) served by nmt's own search."""
    cfg, alone = run.cfg, len(members) == 1
    facts = ModelFacts(
        engine="torch",
        type=cfg.model.type if alone else "ensemble",
        runs=[member.directory.path.name for member in members],
        checkpoint=run.checkpoint_name,
        parameters=sum(p.numel() for p in run.model.parameters()),
        test_bleu=_test_bleu(run) if alone else None,
        beam_size=cfg.search.beam_size,
        attention=attention_layout(cfg.model) if alone else ENSEMBLE_ATTENTION,
    )
    translator = TorchTranslator.of_run(run)
    return Engine(name, pairs_of(translator, name), translator, facts)


def export_engine(name: str, exported: ExportedTranslator) -> Engine:
    """An export of `nmt export --to ctranslate2`: n-best with CTranslate2's scores, no attention."""
    facts = ModelFacts(
        engine="ctranslate2",
        type="transformer",
        runs=[name],
        checkpoint=None,
        parameters=None,
        test_bleu=None,
        beam_size=exported.settings.beam_size,
        attention=None,
    )
    return Engine(name, pairs_of(exported, name), exported, facts)


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


@dataclass
class Catalog:
    """The served models by name, and the default model of each language pair."""

    engines: dict[str, Engine]
    defaults: dict[Pair, str]

    def search(self, decoding: Decoding, sources: list[list[int]]) -> list[list[Hypothesis]]:
        """Decode source id lists as `decoding` says (the batcher's decode function); blocking."""
        return self.engines[decoding.model].search(sources, decoding)


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
        search = {"beam_size": beam_size} if beam_size is not None else {}
        exports = [
            export_engine(n, load_export(p, device.type).with_search(**search))
            for n, p in zip(names, paths, strict=True)
        ]
        return _catalog(exports, [], defaults or [])
    overrides = [f"search.beam_size={beam_size}"] if beam_size is not None else []
    runs = [load_run(path, device, which, overrides) for path in paths]
    engines = [run_engine(name, run, [run]) for name, run in zip(names, runs, strict=True)]
    ensembles: list[Engine] = []
    for pair, group in _by_pair(runs).items():  # one-pair runs
        if len(group) > 1:
            try:
                ensembles.append(run_engine(f"ensemble-{pair[0]}-{pair[1]}", ensemble(group), group))
            except UserError as err:
                log.warning("%s; no ensemble of %s → %s", err, *pair)
    return _catalog(engines, ensembles, defaults or [])


def _catalog(engines: list[Engine], ensembles: list[Engine], chosen: list[str]) -> Catalog:
    """Each pair's default is the model `chosen` names for it, else its ensemble, else its first model; each
    pair's default is logged with the other models of the pair."""
    served = {e.name: e for e in engines + ensembles}
    defaults: dict[Pair, str] = {}
    for engine in engines:
        for pair in engine.pairs:
            defaults.setdefault(pair, engine.name)
    defaults |= {pair: e.name for e in ensembles for pair in e.pairs}
    picked: dict[Pair, str] = {}
    for name in chosen:
        if name not in served:
            raise UserError(f"--default {name}: no such model; served: {', '.join(served)}")
        for pair in served[name].pairs:
            if pair in picked and picked[pair] != name:
                raise UserError(
                    f"--default {picked[pair]} and --default {name} both translate {pair[0]} → "
                    f"{pair[1]}: choose one"
                )
            picked[pair] = name
    defaults |= picked
    for (source, target), name in defaults.items():
        others = [e.name for e in served.values() if e.name != name and (source, target) in e.pairs]
        also = f" (also served: {', '.join(others)}; --default NAME chooses)" if others else ""
        log.info("%s → %s: %s by default%s", source, target, name, also)
    return Catalog(served, defaults)


def _by_pair(runs: list[TrainedRun]) -> dict[Pair, list[TrainedRun]]:
    """The one-pair runs by their pair (multilingual runs are served alone)."""
    groups: dict[Pair, list[TrainedRun]] = {}
    for run in runs:
        if not run.cfg.data.directions.tagged:
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
