"""The models a server translates with, behind one blocking `search` that the batcher calls from its thread.

Each run directory is served as itself, named after its directory, for every direction it was trained on (a
multilingual run: each of its directions, into the target language by its tag); the runs of one language pair
that share a vocabulary are also served as their ensemble, which is then the pair's default (as
`nmt translate RUN RUN` decodes) unless `--default NAME` chooses another; the default of each pair is logged
at startup. With `--engine ctranslate2` each directory is an export of `nmt export` instead; either is
loaded by nmt/decode/loading.py. A model is served as one `Engine` for each of its directions, made as it
loads: a request chooses one (nmt/serve/service.py) and the batcher's key holds it, so nothing is looked up
again.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from nmt.config.multilingual import Direction
from nmt.config.sections import SearchConfig
from nmt.data.glossary import Term, TermFinder
from nmt.data.terminology import TermWriter
from nmt.decode.exported import exported_run
from nmt.decode.loading import Loaded, ensemble, load_models
from nmt.decode.search import Hypothesis
from nmt.decode.terminology import Constraining, TrainedMarkers
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import Translator
from nmt.errors import UserError
from nmt.models.config import ModelConfig
from nmt.run.report import read_report
from nmt.serve.answers import ModelFacts, ReportedBleu

log = logging.getLogger(__name__)

ENSEMBLE_ATTENTION = "one layer, one head: what search collected, the mean of the members' last layers' heads"


@dataclass(frozen=True, eq=False)
class Engine:
    """A model served under `name` in one of its directions: its translator into the direction's target
    language, and what /v1/models says of it. Made once when the models load, and compared by identity: the
    batcher's key holds the engine a request chose."""

    name: str
    direction: Direction
    translator: Translator
    facts: ModelFacts
    terms: TrainedMarkers | None = None  # the markers of a model trained with terminology annotation
    glossary: tuple[Term, ...] = ()  # the server's glossary (`nmt serve --glossary`), for every request

    @functools.cached_property
    def glossary_writer(self) -> TermWriter | None:
        """What writes the server's glossary into a request's lines (None: the server has none)."""
        if not self.glossary or self.terms is None:
            return None
        return TermWriter(self.terms.finder(self.glossary), self.terms.markers)

    @property
    def source(self) -> str:
        return self.direction.src

    @property
    def target(self) -> str:
        return self.direction.tgt

    @property
    def beam_size(self) -> int:
        return self.translator.settings.beam_size

    def search(self, sources: list[list[int]], decoding: Decoding) -> list[list[Hypothesis]]:
        """Search source id lists as one batch, as `decoding` says; blocking. A batch that fails raises: the
        batcher splits it (the translator does not retry it in halves). Each batch has a new shape:
        capturing CUDA graphs would cost more than it saves."""
        translator = decoding.translator
        terms = None
        if decoding.glossary:  # found in the sources as the tokenizer writes them back
            finder = TermFinder(decoding.glossary, translator.tokenizers.src.normalize)
            terms = Constraining(translator, finder).terms(translator.tokenizers.src.decode(sources))
        return translator.search(
            sources, attention=decoding.attention, alignments=decoding.alignments, one_batch=True, terms=terms
        )


Engines = dict[Direction, Engine]  # a served model's engine in each of its directions


@dataclass(frozen=True)
class Decoding:
    """What to decode and how: the engine a request chose, the search settings (the model's, changed by the
    request's) and whether each hypothesis' attention and word alignment come with it; `glossary`: the terms
    constrained search makes each output hold, where found in its source (nmt/serve/glossary.py). The
    batcher's key: sentences batch only with others decoded alike (a sampled line draws the same whatever its
    batch)."""

    engine: Engine
    settings: SearchConfig
    attention: bool = False
    alignments: bool = False
    glossary: tuple[Term, ...] = ()

    @functools.cached_property
    def translator(self) -> Translator:
        """The engine's translator searching with `settings`, made once: the settings were checked when the
        request was, and the service keeps the decodings of the settings requests gave last."""
        return self.engine.translator.with_search(
            **dataclasses.asdict(self.settings) | {"cuda_graphs": False}
        )


def decode(decoding: Decoding, sources: list[list[int]]) -> list[list[Hypothesis]]:
    """The batcher's decode function: source id lists decoded as `decoding` says, by its engine; blocking."""
    return decoding.engine.search(sources, decoding)


def served(name: str, translator: Translator, facts: ModelFacts) -> Engines:
    """A model's engine in each direction it was trained on (a multilingual model's translator `toward` each
    target language, once)."""
    if not translator.directions:
        raise UserError(f"{name}: the export names no language pair; export the run again with this nmt")
    return {d: Engine(name, d, translator.toward(d.tgt, d.src), facts) for d in translator.directions}


def run_engines(name: str, loaded: Loaded) -> Engines:
    """A trained run (or an ensemble of runs) served by nmt's own search."""
    run, alone = loaded.runs[0], len(loaded.runs) == 1
    translator = loaded.translator
    facts = ModelFacts(
        engine="torch",
        type=run.cfg.model.type if alone else "ensemble",
        runs=[member.directory.path.name for member in loaded.runs],
        checkpoint=run.checkpoint_name,
        domain=_domain([member.cfg.data.domain for member in loaded.runs]),
        parameters=sum(p.numel() for member in loaded.runs for p in member.model.parameters()),
        test_bleu=_test_bleu(run) if alone else None,
        beam_size=translator.settings.beam_size,
        attention=attention_layout(run.cfg.model) if alone else ENSEMBLE_ATTENTION,
    )
    return served(name, translator, facts)


def export_engines(name: str, loaded: Loaded) -> Engines:
    """An export of `nmt export --to ctranslate2`: n-best with CTranslate2's scores, no attention; its run,
    checkpoint and domain as its metadata names them."""
    meta = loaded.export or {}
    facts = ModelFacts(
        engine="ctranslate2",
        type="transformer",
        runs=[exported_run(meta) or name],
        checkpoint=meta.get("checkpoint"),
        domain=meta.get("domain"),
        parameters=None,
        test_bleu=None,
        beam_size=loaded.translator.settings.beam_size,
        attention=None,
    )
    return served(name, loaded.translator, facts)


def _domain(domains: list[str | None]) -> str | None:
    """What a model of runs was trained on: their data.domain where they all state the same one."""
    return domains[0] if len(set(domains)) == 1 else None


def attention_layout(model: ModelConfig) -> str:
    """The encoder-decoder attention a trained model returns: a Transformer's layers and heads, an RNN's one
    attention."""
    if model.transformer is None:
        return f"one layer, one head: {model.attention_name(0)}"
    return f"{model.decoder_layers} decoder layers × {model.transformer.heads} heads (scaled dot-product)"


def _test_bleu(run: TrainedRun) -> ReportedBleu | None:
    """The test BLEU in the run's report.json and the checkpoint it scored, if the report has one."""
    try:
        report = read_report(run.directory.report)
        chosen = report["checkpoint"]
        return ReportedBleu(bleu=report["test"][chosen]["bleu"], checkpoint=chosen)
    except (OSError, ValueError, KeyError, TypeError):
        return None


@dataclass
class Catalog:
    """The served models by name, each as its engine in each of its directions, and the default model of each
    direction."""

    engines: dict[str, Engines]
    defaults: dict[Direction, str]

    def batch_tokens(self) -> int:
        """The batcher's budget unless `nmt serve --max-batch-tokens` gives one: the served models'
        `search.batch_tokens`, the smallest where they differ."""
        served = [engine for engines in self.engines.values() for engine in engines.values()]
        return min(engine.translator.settings.batch_tokens for engine in served)


def load_catalog(
    paths: list[Path],
    engine: str,
    device: torch.device,
    which: str | None,
    beam_size: int | None,
    defaults: list[str] | None = None,
    threads: int = 0,
) -> Catalog:
    """Load every directory (`engine` torch: run directories, with `which` checkpoint; ctranslate2: exports,
    searching on `threads` CPU threads, 0: CTranslate2's choice) and name each after its directory (`name-2`,
    … for repeated names); `beam_size`, when given, replaces each model's own; `defaults`: served names that
    become the default of their direction."""
    names = _unique_names(paths)
    search = {"beam_size": beam_size} if beam_size is not None else {}
    models = load_models(paths, engine, device, which, search, threads=threads)
    if engine == "ctranslate2":
        exports = [
            _with_terms(export_engines(name, model), path)
            for name, model, path in zip(names, models, paths, strict=True)
        ]
        return _catalog(dict(zip(names, exports, strict=True)), {}, defaults or [])
    engines = {
        name: _with_terms(run_engines(name, model), path)
        for name, model, path in zip(names, models, paths, strict=True)
    }
    ensembles: dict[str, Engines] = {}
    for direction, group in _by_direction(models).items():  # one-pair runs
        if len(group) > 1:
            name = f"ensemble-{direction.src}-{direction.tgt}"
            try:
                joined = run_engines(name, ensemble(group))
            except UserError as err:
                log.warning("%s; no ensemble of %s → %s", err, direction.src, direction.tgt)
                continue
            ensembles[name] = _with_terms(joined, group[0].run.directory.path)
    catalog = _catalog(engines, ensembles, defaults or [])
    if device.type == "cpu":
        log.info(
            "on a CPU a run's CTranslate2 export answers sooner: `nmt export RUN OUT --to ctranslate2`, then "
            "`nmt serve OUT` (docs/serving.md, Speed at every load)"
        )
    return catalog


def _with_terms(engines: Engines, path: Path) -> Engines:
    """`engines` with the terminology markers of the run (or export) at `path`, if it was trained with them
    (an ensemble's members share one vocabulary: the first one's)."""
    terms = TrainedMarkers.find(path)
    return {direction: dataclasses.replace(engine, terms=terms) for direction, engine in engines.items()}


def _catalog(
    engines: dict[str, Engines],
    ensembles: dict[str, Engines],
    chosen: list[str],
) -> Catalog:
    """Each direction's default is the model `chosen` names for it, else its ensemble, else its first model;
    each direction's default is logged with the other models of the direction."""
    served = engines | ensembles
    defaults: dict[Direction, str] = {}
    for name, directions in engines.items():
        for direction in directions:
            defaults.setdefault(direction, name)
    defaults |= {direction: name for name, directions in ensembles.items() for direction in directions}
    picked: dict[Direction, str] = {}
    for name in chosen:
        if name not in served:
            raise UserError(f"--default {name}: no such model; served: {', '.join(served)}")
        for direction in served[name]:
            if direction in picked and picked[direction] != name:
                raise UserError(
                    f"--default {picked[direction]} and --default {name} both translate {direction.src} → "
                    f"{direction.tgt}: choose one"
                )
            picked[direction] = name
    defaults |= picked
    for direction, name in defaults.items():
        others = [other for other, directions in served.items() if other != name and direction in directions]
        also = f" (also served: {', '.join(others)}; --default NAME chooses)" if others else ""
        log.info("%s → %s: %s by default%s", direction.src, direction.tgt, name, also)
    return Catalog(served, defaults)


def _by_direction(models: list[Loaded]) -> dict[Direction, list[Loaded]]:
    """The models of one-pair runs by their direction (multilingual runs are served alone)."""
    groups: dict[Direction, list[Loaded]] = {}
    for model in models:
        data = model.run.cfg.data
        if not data.directions.tagged:
            groups.setdefault(data.directions.directions[0], []).append(model)
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
