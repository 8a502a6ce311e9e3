"""A run's scores, direction by direction: each direction of a split translated (`evaluate_split`) and scored
— BLEU, chrF (with chrF2++, TER and their intervals, but in validation) and the off-target rate of each
direction of a multilingual run, and the means of BLEU, chrF and the rate (what validation's early stopping
and `best.pt` follow); a bilingual run's one direction as it is — and the attention of the first validation
sentences drawn."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmt.config.multilingual import Direction, RunDirections
from nmt.config.schema import Config
from nmt.data.splits import language_split, read_directions
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator
from nmt.errors import UserError
from nmt.evaluate.hypotheses import HypothesisFiles, search_record
from nmt.evaluate.off_target import off_target_rate
from nmt.evaluate.plots import heatmap_title, save_heatmap
from nmt.evaluate.scores import Scores, headline, score

Outputs = dict[Direction, list[str]]


def run_scores(
    outputs: Outputs,
    references: Outputs,
    run: RunDirections,
    full: bool = True,
    extra: dict[Direction, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The scores of each direction's outputs (with `extra` fields of its own): a multilingual run's
    `direction_scores`; a bilingual run's of its one direction: every metric with its interval and signature
    (nmt/evaluate/scores.py `score`) where `full`, else BLEU and chrF alone (validation's)."""
    extra = extra or {}
    if run.tagged:
        found = direction_scores(outputs, references, run.languages, full)
        for direction, fields in extra.items():
            found["directions"][direction.name] |= fields
        return found
    (direction,) = outputs
    scores = _scored(outputs[direction], references[direction], full)
    brief = scores.as_dict() if full else {"bleu": scores.bleu, "chrf": scores.chrf}
    return brief | extra.get(direction, {})


def _scored(hypotheses: list[str], references: list[str], full: bool) -> Scores:
    return score(hypotheses, references) if full else headline(hypotheses, references)


def direction_scores(
    outputs: Outputs, references: Outputs, languages: tuple[str, ...], full: bool = True
) -> dict[str, Any]:
    """The scores (every metric where `full`, else BLEU and chrF) and the off-target rate (%, None when
    skipped) of each direction's outputs, the run's `languages` being those an output may be identified as,
    and the means of BLEU, chrF and the rate (`bleu`, `chrf`, `off_target`)."""
    found: dict[str, dict[str, Any]] = {}
    for direction, texts in outputs.items():
        scores = _scored(texts, references[direction], full)
        rate = off_target_rate(texts, direction.tgt, languages)
        found[direction.name] = scores.as_dict() | {"off_target": rate}
    rates = [record["off_target"] for record in found.values()]
    return {
        "bleu": round(statistics.mean(record["bleu"] for record in found.values()), 2),
        "chrf": round(statistics.mean(record["chrf"] for record in found.values()), 2),
        "off_target": None if None in rates else round(statistics.mean(rates), 2),
        "directions": found,
    }


def describe_directions(scores: dict[str, Any]) -> str:
    """One line of every direction's scores: `en-de BLEU 30.12 chrF 58.30 off-target 0.5%, …`."""
    return ", ".join(direction_lines(scores))


def direction_lines(scores: dict[str, Any]) -> list[str]:
    """Each direction's scores: `en-de BLEU 30.12 chrF 58.30 off-target 0.5%`."""
    return [
        f"{name} BLEU {record['bleu']:.2f} chrF {record['chrf']:.2f}"
        + ("" if record["off_target"] is None else f" off-target {record['off_target']:.1f}%")
        for name, record in scores["directions"].items()
    ]


def direction_scalars(scores: dict[str, Any]) -> dict[str, float]:
    """The scores of each direction as TensorBoard scalars: `en-de/bleu`, `en-de/chrf`, `en-de/off_target`."""
    return {
        f"{name}/{key}": record[key]
        for name, record in scores.get("directions", {}).items()
        for key in ("bleu", "chrf", "off_target")
        if record[key] is not None
    }


def split_lines(cfg: Config, split: str) -> int | None:
    """Sentences the final report translates in `split` (every direction's pairs); None when there is no
    such split (a run without test files)."""
    try:
        language_split(cfg.data, split)
    except UserError:
        if split == "valid":
            raise
        return None
    return sum(len(text) for text in read_directions(cfg.data, split).values())


def search_settings(run: TrainedRun) -> dict[str, Any]:
    """The search settings and checkpoint a score was taken with: the beam size and length penalty, and the
    whole search (`search`: its rule and every setting it reads off its default)."""
    search = run.cfg.search
    return {
        "beam_size": search.beam_size,
        "length_penalty": search.length_penalty,
        "search": search_record(search),
        "checkpoint": run.checkpoint_name,
    }


def evaluate_split(
    run: TrainedRun,
    split: str,
    progress: Callable[[int], object] | None = None,
    files: HypothesisFiles | None = None,
) -> dict[str, Any]:
    """Translate every direction of `split` with a loaded run (search from `run.cfg.search`), score it
    (`run_scores`) and keep each direction's hypotheses in `files` (by default the run's eval/, nmt/evaluate/
    hypotheses.py)."""
    cfg, directions = run.cfg, run.cfg.data.directions
    files = files or HypothesisFiles.of_run(run)
    translator, located = TorchTranslator.of_run(run), language_split(cfg.data, split)
    outputs, references, extra = {}, {}, {}
    for direction, text in read_directions(cfg.data, split).items():
        outputs[direction] = translator.toward(direction.tgt, direction.src).translate(text.src, progress)
        references[direction] = text.tgt
        path = files.keep(f"{split}{directions.file_part(direction)}", outputs[direction])
        extra[direction] = {"hypotheses": str(path), "source": str(located.pair_files(direction).src)}
    return run_scores(outputs, references, directions, extra=extra) | search_settings(run)


def draw_heatmaps(run: TrainedRun, attention_dir: Path, count: int) -> None:
    """The attention search paid translating the first `count` validation sentences, taking the directions in
    turn (a multilingual run: the first sentence of each of the first `count` directions), as
    `attention_dir`/valid-<i>.png: the last decoder layer's mean of heads, titled as `nmt plot-attention`
    titles it (and with the direction, where the run has several)."""
    cfg, directions = run.cfg, run.cfg.data.directions
    translator, texts = TorchTranslator.of_run(run), read_directions(cfg.data, "valid")
    turns = itertools.chain.from_iterable(
        itertools.zip_longest(*([(d, s) for s in text.src[:count]] for d, text in texts.items()))
    )
    chosen = [turn for turn in turns if turn is not None][:count]
    model = cfg.model
    for i, (direction, sentence) in enumerate(chosen):
        toward = translator.toward(direction.tgt, direction.src)
        (translated,) = toward.translated([sentence], attention=True)
        best = translated.best
        if best.attention is None:  # an empty source
            continue
        named = f"{direction.name}: " if directions.tagged else ""
        title = heatmap_title(model.attention_name(model.decoder_layers - 1), f"{named}{best.text}")
        path = attention_dir / f"valid-{i}.png"
        save_heatmap(best.attention[-1].mean(dim=0), translated.source_pieces, best.pieces, path, title)
