"""From directories to models that translate, in one place: run directories (nmt/decode/trained_run.py), their
ensemble, or exports of `nmt export --to ctranslate2` (nmt/decode/exported.py). The engine is chosen from
what the directories are (`choose_engine`); `load_models` loads each directory's model, and everything else is
built on it: `load_translator` for the commands that translate (several runs: their ensemble), the server's
catalog (nmt/serve/engines.py: each model, and the ensembles of runs of one pair), and `load_trained` for the
commands that need a run's config and model beside its translator (evaluate, plot, align, export).

    translator = load_translator([Path("runs/de-en")], "auto", torch.device("cpu"), None, {"beam_size": 3})
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt.config.sections import SearchConfig
from nmt.config.yaml_file import load_saved_config
from nmt.decode.exported import META, export_meta, exported_search, is_export, load_export
from nmt.decode.trained_run import TrainedRun, load_run
from nmt.decode.translator import TorchTranslator, Translator
from nmt.errors import UserError
from nmt.models.ensemble import Ensemble
from nmt.models.quantize import int8_model
from nmt.run.checkpoint import same_vocabulary

ENGINES = ("torch", "ctranslate2")


@dataclass(frozen=True)
class Loaded:
    """A model loaded from its directories: its translator, and the trained runs it is made of (one run, an
    ensemble's members, none for an export: its metadata instead)."""

    translator: Translator
    runs: tuple[TrainedRun, ...] = ()
    export: dict[str, Any] | None = None  # an export's META: what it says of its run

    @property
    def run(self) -> TrainedRun:
        """The trained run of a model loaded from one run directory."""
        if len(self.runs) != 1:
            raise ValueError("a model of one run directory has one run")
        return self.runs[0]


def choose_engine(engine: str, paths: list[Path], checkpoint: str | None) -> str:
    """The engine that decodes with `paths`: 'torch' (run directories) or 'ctranslate2' (exports of
    `nmt export`), as `engine` names it, or for 'auto' as the directories are; a choice that cannot work
    with them (or with `checkpoint`, which only runs have several of) is a UserError."""
    exports = [path for path in paths if is_export(path)]
    runs = [path for path in paths if not is_export(path)]
    if engine == "auto" and exports and runs:
        raise UserError(
            f"{exports[0]} is a CTranslate2 export (written by `nmt export`) and {runs[0]} is not; give run "
            f"directories (the torch engine) or exports (ctranslate2), not both"
        )
    if engine == "auto":
        engine = "ctranslate2" if exports else "torch"
    if engine not in ENGINES:
        raise UserError(f"--engine {engine}: unknown; use auto, torch or ctranslate2")
    if engine == "ctranslate2" and checkpoint is not None:
        raise UserError("--checkpoint: an export holds one checkpoint; choose it at `nmt export`")
    if engine == "torch" and exports:
        raise UserError(
            f"{exports[0]} is a CTranslate2 export (written by `nmt export`), not a run "
            f"directory; use it without --engine torch"
        )
    return engine


def saved_search(path: Path) -> tuple[SearchConfig, Path]:
    """The search settings of a run directory or an export, and the file that holds them."""
    if is_export(path):
        return exported_search(path, export_meta(path)), path / META
    return load_saved_config(path / "config.yaml").search, path / "config.yaml"


def load_models(
    paths: list[Path],
    engine: str,
    device: torch.device,
    checkpoint: str | None = None,
    search: dict[str, Any] | None = None,
    int8: bool = False,
    threads: int = 0,
) -> list[Loaded]:
    """Each directory's model with `engine` ('torch': run directories, with their `checkpoint`, in int8 where
    `int8` (nmt/models/quantize.py); 'ctranslate2': exports, on `threads` CPU threads, 0: CTranslate2's
    choice), its search settings replaced by `search` (`{"beam_size": 3}`; a value out of range is a
    ConfigError)."""
    search = search or {}
    if engine == "ctranslate2":
        if int8:
            raise UserError(
                "--int8 quantizes a run's model; an export's weights are chosen when it is written: "
                "`nmt export RUN OUT --quantization int8`"
            )
        return [
            Loaded(load_export(path, device.type, threads).with_search(**search), export=export_meta(path))
            for path in paths
        ]
    overrides = [f"search.{name}={json.dumps(value)}" for name, value in search.items()]
    runs = [load_run(path, device, checkpoint, overrides) for path in paths]
    if int8:
        runs = [dataclasses.replace(run, model=int8_model(run.model)) for run in runs]
    return [Loaded(TorchTranslator.of_run(run), (run,)) for run in runs]


def ensemble(members: list[Loaded]) -> Loaded:
    """Models of run directories as their ensemble (`ensembled`)."""
    runs = [member.run for member in members]
    return Loaded(TorchTranslator.of_run(ensembled(runs)), tuple(runs))


def ensembled(runs: list[TrainedRun]) -> TrainedRun:
    """Loaded runs as one `Ensemble` run with the first run's config, tokenizers and directory; every run must
    have been trained with the first one's vocabulary. The members are the runs' own models (no copies)."""
    first = runs[0]
    for run in runs[1:]:
        if not same_vocabulary(run.checkpoint.get("vocab"), first.tokenizers):
            raise UserError(
                f"{first.directory} and {run.directory} were trained with different vocabularies; an "
                f"ensemble needs runs that share one"
            )
    return dataclasses.replace(first, model=Ensemble([run.model for run in runs]).eval())


def load_translator(
    paths: list[Path],
    engine: str,
    device: torch.device,
    checkpoint: str | None,
    search: dict[str, Any],
    int8: bool = False,
) -> Translator:
    """The translator of `paths` with the engine `choose_engine` picks: run directories (several: their
    ensemble) with `checkpoint` (in int8 where `int8`), or one export; `search` replaces search settings
    (`{"beam_size": 3}`)."""
    engine = choose_engine(engine, paths, checkpoint)
    if engine == "ctranslate2" and len(paths) > 1:
        raise UserError("the ctranslate2 engine translates with one export; an ensemble needs runs")
    models = load_models(paths, engine, device, checkpoint, search, int8)
    return (models[0] if len(models) == 1 else ensemble(models)).translator


def load_trained(
    paths: list[Path], device: torch.device, checkpoint: str | None = None, overrides: list[str] | None = None
) -> TrainedRun:
    """Run directories as one trained run: one as it is, several as their ensemble (its model an `Ensemble`,
    its config, tokenizers and directory the first run's); `overrides` change the runs' configs
    (`search.beam_size=3`). An export is refused: it holds no checkpoint, config or attention to read."""
    for path in paths:
        if is_export(path):
            raise UserError(
                f"{path} is a CTranslate2 export (written by `nmt export`), not a run directory; give the "
                f"run directory it was exported from (`nmt translate` translates with the export)"
            )
    runs = [load_run(path, device, checkpoint, overrides) for path in paths]
    return runs[0] if len(runs) == 1 else ensembled(runs)
