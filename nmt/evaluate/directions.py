"""Scores of a multilingual run, direction by direction: BLEU, chrF and the off-target rate of each direction,
and their means (what validation's early stopping and `best.pt` follow); each direction's split translated
and scored for the final report, and its attention drawn."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmt.atomic_files import atomic_write_text
from nmt.config.multilingual import Direction
from nmt.config.schema import Config
from nmt.data.language_files import language_split, multilingual, read_directions
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator, search_options
from nmt.errors import UserError
from nmt.evaluate.off_target import off_target_rate
from nmt.evaluate.plots import heatmap_title, save_heatmap
from nmt.evaluate.scores import score


def direction_scores(
    outputs: dict[Direction, list[str]], references: dict[Direction, list[str]], languages: tuple[str, ...]
) -> dict[str, Any]:
    """BLEU, chrF (with their signatures) and the off-target rate (%, None when skipped) of each direction's
    outputs, the run's `languages` being those an output may be identified as, and the means of the three
    (`bleu`, `chrf`, `off_target`)."""
    found: dict[str, dict[str, Any]] = {}
    for direction, texts in outputs.items():
        scores = score(texts, references[direction])
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


def evaluate_directions(
    run: TrainedRun, split: str, progress: Callable[[int], object] | None = None
) -> dict[str, Any]:
    """Translate every direction of `split` with a loaded multilingual run (search from `run.cfg.search`),
    score it (`direction_scores`) and write each direction's hypotheses to
    `RUN_DIR/eval/<split>.<direction>[.<checkpoint>].beam<k>.hyp`."""
    cfg, search = run.cfg, run.cfg.search
    translator, texts = TorchTranslator.of_run(run), read_directions(cfg.data, split)
    outputs, references, files = {}, {}, {}
    checkpoint = "" if run.checkpoint_name == "best" else f".{run.checkpoint_name}"
    for direction, text in texts.items():
        outputs[direction] = translator.toward(direction.tgt).translate(text.src, progress)
        references[direction] = text.tgt
        hyp_path = run.directory.eval_dir / f"{split}.{direction.name}{checkpoint}.beam{search.beam_size}.hyp"
        atomic_write_text(hyp_path, "".join(line + "\n" for line in outputs[direction]))
        files[direction.name] = str(hyp_path)
    scores = direction_scores(outputs, references, multilingual(cfg.data).languages)
    for name, path in files.items():
        scores["directions"][name]["hypotheses"] = path
    settings = {"beam_size": search.beam_size, "length_penalty": search.length_penalty}
    return scores | settings | {"checkpoint": run.checkpoint_name}


def draw_direction_heatmaps(run: TrainedRun, attention_dir: Path, count: int) -> None:
    """The attention search paid translating the first validation sentence of each of the first `count`
    directions, as `attention_dir`/valid-<i>.png, titled with the direction."""
    cfg = run.cfg
    translator, texts = TorchTranslator.of_run(run), read_directions(cfg.data, "valid")
    model = cfg.model
    for i, (direction, text) in enumerate(list(texts.items())[:count]):
        toward = translator.toward(direction.tgt)
        sources = toward.encode(text.src[:1])
        found = toward.search(sources, options=search_options(cfg.search, attention=True))
        (translated,) = toward.decode(sources, found)
        best = translated.best
        if best.attention is None:  # an empty source
            continue
        title = heatmap_title(
            model.attention_name(model.decoder_layers - 1), f"{direction.name}: {best.text}"
        )
        path = attention_dir / f"valid-{i}.png"
        save_heatmap(best.attention[-1].mean(dim=0), translated.source_pieces, best.pieces, path, title)
