"""Guided alignment, one change at a time: what lowers the guided Transformer's AER on the Hansards gold.

    taskset -c 0 env OMP_NUM_THREADS=1 python -m benchmarks.guided_alignment_steps --work /tmp/nmt-align-bench

It shares benchmarks/alignment_bench.py's work directory and protocol (its data and eflomal stages run first
when their outputs are missing): the guided Transformer it chose (λ 2, decoder layer 0, Shift-Att, 2 heads,
1,200 updates a direction) trained again for each step of STEPS, which changes its labels (which of eflomal's
symmetrized links it learns), how many times the gold pairs' *text* is in the training data (transductive
weighting, as the literature's `*.plustest.*` training sets; their links are never training input), whether
its unlinked subwords are pulled to the source's `</s>` (`train.alignment.null_slot`), or, around the best of
those, one of the benchmark's choices (λ, heads, layer) or the seed. Per step:
the readings of both directions chosen on the first 100 gold pairs, then on the 347 after them the AER,
precision and recall of

- grow-diag: lilt's strict grow-diag of the two directions' links (as the alignment bench);
- soft: the two directions' word × word attention averaged, every pair over a threshold linked (the
  threshold of SOFT_THRESHOLDS with the lowest AER on the first 100);

and each direction's test BLEU (beam 5, the tokenized lower-cased test2016), beside the plain Transformer's
trained on the same text (`unguided`). Runs stay in WORK/runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from benchmarks.alignment_bench import (
    DATA,
    DIRECTIONS,
    GUIDED,
    GUIDED_STEPS,
    KINDS,
    Directed,
    Kind,
    by_split,
    joint_readings,
    measure_run,
    ready,
    run_eflomal,
    run_name,
    scored,
    train,
)
from nmt.align.pharaoh import Link, SentenceLinks, read_links, write_links
from nmt.align.symmetrize import Method, symmetrize
from nmt.decode.aligner import force
from nmt.decode.loading import load_trained
from nmt.evaluate.evaluation import evaluate_run

BASE = GUIDED["guided λ2 layer 0 shift, 2 heads"]  # the alignment bench's choice
STEPS: dict[str, tuple[Method, int, bool, tuple[str, ...]]] = {  # name: (eflomal's links the labels are,
    # copies of the gold text, whether unlinked subwords are pulled to the source's </s>:
    # train.alignment.null_slot, settings that replace BASE's)
    "base: grow-diag-final-and labels, gold text ×1": ("grow-diag-final-and", 1, False, ()),
    "grow-diag labels": ("grow-diag", 1, False, ()),
    "intersection labels": ("intersection", 1, False, ()),
    "grow-diag labels, gold text ×10": ("grow-diag", 10, False, ()),
    "intersection labels, gold text ×10": ("intersection", 10, False, ()),
    "intersection labels, null slot": ("intersection", 1, True, ()),
    "intersection labels, gold text ×10, null slot": ("intersection", 10, True, ()),
    "grow-diag labels, gold text ×10, null slot": ("grow-diag", 10, True, ()),
    "intersection labels, gold text ×10, null slot, λ4": (
        "intersection",
        10,
        True,
        ("train.alignment.weight=4.0",),
    ),
    "intersection labels, gold text ×10, null slot, 4 heads": (
        "intersection",
        10,
        True,
        ("train.alignment.heads=4",),
    ),
    "intersection labels, gold text ×10, null slot, λ1": (
        "intersection",
        10,
        True,
        ("train.alignment.weight=1.0",),
    ),
    "intersection labels, gold text ×10, null slot, layer 1": (
        "intersection",
        10,
        True,
        ("train.alignment.layer=1",),
    ),
    "intersection labels, gold text ×20, null slot": ("intersection", 20, True, ()),
    "intersection labels, gold text ×10, null slot, seed 2": (
        "intersection",
        10,
        True,
        ("train.seed=2",),
    ),
    "intersection labels, gold text ×10, null slot, seed 3": (
        "intersection",
        10,
        True,
        ("train.seed=3",),
    ),
    "intersection labels, gold text ×20, null slot, seed 2": (
        "intersection",
        20,
        True,
        ("train.seed=2",),
    ),
    "intersection labels, gold text ×20, null slot, seed 3": (
        "intersection",
        20,
        True,
        ("train.seed=3",),
    ),
}
GOLD_PAIRS = 447  # the last lines of the benchmark's training text
SOFT_THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def step_name(step: str) -> str:
    """The step's kind of run (its directory: alignment_bench.run_name)."""
    return f"step {step}"


def with_copies(work: Path, copies: int) -> Path:
    """The training text with the gold pairs' text `copies` times (the alignment bench's data for 1)."""
    if copies == 1:
        return work / "data"
    out = work / f"data-gold{copies}"
    if not (out / "train.fr").exists():
        out.mkdir(parents=True, exist_ok=True)
        for path in (work / "data").iterdir():
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            if path.name.startswith("train."):
                lines += lines[-GOLD_PAIRS:] * (copies - 1)
            (out / path.name).write_text("".join(lines), encoding="utf-8")
    return out


def labels(work: Path, method: Method, copies: int, src: str) -> Path:
    """eflomal's `method` links of the training text with `copies` of the gold text, `src` word first."""
    path = work / "eflomal" / f"{method}.x{copies}.{src}-first.links"
    if not path.exists():
        found = read_links(work / "eflomal" / f"{method}.links")  # English first, the gold text once
        found += found[-GOLD_PAIRS:] * (copies - 1)
        links = [set(line.possible) if src == "en" else {(j, i) for i, j in line.possible} for line in found]
        write_links(path, links)
    return path


def train_step(work: Path, step: str, src: str, tgt: str) -> Path:
    method, copies, null_slot, changes = STEPS[step]
    gold = work / "gold"
    settings = (
        f"train.alignment.null_slot={'true' if null_slot else 'false'}",
        f"train.alignment.links={labels(work, method, copies, src)}",
        f"train.alignment.gold_src={gold / f'first100.{src}'}",
        f"train.alignment.gold_tgt={gold / f'first100.{tgt}'}",
        f"train.alignment.gold_links={gold / 'first100.links'}",
        f"train.alignment.gold_reverse={'true' if src == 'fr' else 'false'}",
        *BASE,
        *changes,  # after BASE: the last setting of a key wins
    )
    kind = Kind(step_name(step), "multi30k-cpu-transformer.yaml", GUIDED_STEPS, settings)
    return train(work, kind, src, tgt, with_copies(work, copies))


def unguided(work: Path, copies: int, src: str, tgt: str) -> Path:
    """The alignment bench's plain Transformer (no guided alignment) trained on the text with `copies` of the
    gold text (once: the bench's own run): the BLEU a guided step's compares with."""
    plain = next(kind for kind in KINDS if kind.name == "Transformer")
    name = plain.name if copies == 1 else f"{plain.name}, gold text ×{copies}"
    return train(
        work, Kind(name, plain.config, plain.steps, plain.settings), src, tgt, with_copies(work, copies)
    )


def unguided_bleu(work: Path, copies: int) -> dict[str, float]:
    """Each direction's test BLEU of `unguided` (beam 5, as the steps')."""
    runs = {src: unguided(work, copies, src, tgt) for src, tgt in DIRECTIONS}
    return {f"{s}-{t}": evaluate_run([runs[s]], "test", None, None, "cpu")["bleu"] for s, t in DIRECTIONS}


def soft_links(weights: dict[str, list[np.ndarray]], threshold: float) -> list[set[Link]]:
    """(English word, French word) pairs whose mean attention of the two directions exceeds `threshold`."""
    found = []
    for en_fr, fr_en in zip(weights["en"], weights["fr"], strict=True):
        mean = (en_fr + fr_en.T) / 2  # (French words, English words)
        found.append({(int(i), int(j)) for j, i in zip(*np.nonzero(mean > threshold), strict=True)})
    return found


def soft_symmetrized(
    pair: dict[str, Directed], text: dict[str, list[str]], gold: list[SentenceLinks]
) -> dict:
    """Soft symmetrization of the two directions' chosen readings: the threshold chosen on the first 100."""
    weights = {}
    for src, tgt in DIRECTIONS:
        forced = force(load_trained([pair[src].run], torch.device("cpu")), text[src], text[tgt])
        weights[src] = forced.soft(pair[src].chosen)  # (target words, source words)
    found = {t: soft_links(weights, t) for t in SOFT_THRESHOLDS}
    best = min(SOFT_THRESHOLDS, key=lambda t: scored(found[t], gold)["first 100"].aer)
    return {"threshold": best, "scores": by_split(scored(found[best], gold))}


def measure_step(work: Path, step: str, text: dict[str, list[str]], gold: list[SentenceLinks]) -> dict:
    runs = {src: work / "runs" / run_name(step_name(step), src, tgt) for src, tgt in DIRECTIONS}
    pair = {src: measure_run(runs[src], src, text, gold) for src in runs}
    forward, reverse = joint_readings(pair, gold)
    links = [
        symmetrize(f, r, "grow-diag")
        for f, r in zip(pair["en"].every[forward], pair["fr"].every[reverse], strict=True)
    ]
    return {
        "grow-diag": by_split(scored(links, gold)),
        "soft": soft_symmetrized(pair, text, gold),
        "bleu": {
            f"{src}-{tgt}": evaluate_run([runs[src]], "test", None, None, "cpu")["bleu"]
            for src, tgt in DIRECTIONS
        },
    }


def table(results: dict, eflomal: dict) -> str:
    """Markdown: a row per step (AER, precision, recall on the 347; BLEU), eflomal beside them."""
    lines = [
        "| step | grow-diag AER | precision | recall | soft AER (threshold) | precision | recall | "
        "test BLEU en→fr / fr→en |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step, found in results.items():
        hard, soft = found["grow-diag"]["347"], found["soft"]["scores"]["347"]
        bleu = " / ".join(f"{found['bleu'][f'{s}-{t}']:.2f}" for s, t in DIRECTIONS)
        lines.append(
            f"| {step} | {hard['aer']:.1f} | {hard['precision']:.1f} | {hard['recall']:.1f} "
            f"| {soft['aer']:.1f} ({found['soft']['threshold']}) | {soft['precision']:.1f} "
            f"| {soft['recall']:.1f} | {bleu} |"
        )
    teacher = eflomal["347"]
    lines.append(
        f"| eflomal, the teacher (grow-diag) | {teacher['aer']:.1f} | {teacher['precision']:.1f} "
        f"| {teacher['recall']:.1f} | | | | |"
    )
    return "\n".join(lines)


SEED = ", seed "  # a step trained again with another seed: "STEP, seed N"


def seed_table(results: dict) -> str:
    """Markdown: for each step also trained with other seeds (STEP, seed N), the mean ± standard deviation
    over all its seeds of AER, precision and recall on the 347, AER on the first 100, and BLEU."""
    lines = [
        "| step (seeds) | grow-diag AER | precision | recall | AER first 100 | test BLEU en→fr / fr→en |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for step in results:
        seeds = [results[name] for name in results if name == step or name.startswith(step + SEED)]
        if SEED in step or len(seeds) < 2:
            continue
        hard = [found["grow-diag"]["347"] for found in seeds]
        cells = [_spread([h[key] for h in hard]) for key in ("aer", "precision", "recall")]
        cells.append(_spread([found["grow-diag"]["first 100"]["aer"] for found in seeds]))
        bleu = [_spread([found["bleu"][f"{s}-{t}"] for found in seeds]) for s, t in DIRECTIONS]
        lines.append(f"| {step} ({len(seeds)}) | {' | '.join(cells)} | {' / '.join(bleu)} |")
    return "\n".join(lines)


def _spread(values: list[float]) -> str:
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def eflomal_scores(work: Path, gold: Sequence[SentenceLinks]) -> dict:
    found = [set(line.possible) for line in read_links(work / "eflomal" / "grow-diag.links")[-GOLD_PAIRS:]]
    return by_split(scored(found, gold))


def saved_results(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, required=True, help="the alignment bench's work directory")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data (multi30k/, alignment/)")
    parser.add_argument("--steps", nargs="+", choices=list(STEPS), default=list(STEPS))
    args = parser.parse_args()
    ready(args.data, args.work, "guided-alignment steps benchmark")
    run_eflomal(args.work)
    text = {lang: (args.work / "gold" / f"gold.{lang}").read_text().splitlines() for lang in ("en", "fr")}
    gold = read_links(args.work / "gold" / "gold.links")
    saved = args.work / "steps.json"
    for step in args.steps:
        if step not in saved_results(saved):
            for src, tgt in DIRECTIONS:
                train_step(args.work, step, src, tgt)
            found = measure_step(args.work, step, text, gold)
            saved.write_text(json.dumps(saved_results(saved) | {step: found}, indent=1) + "\n")
    for copies in sorted({STEPS[step][1] for step in args.steps}):
        key = f"unguided, gold text ×{copies}"
        if key not in saved_results(saved):
            found = unguided_bleu(args.work, copies)
            saved.write_text(json.dumps(saved_results(saved) | {key: found}, indent=1) + "\n")
    results = saved_results(saved)  # read again: another process may have measured other steps meanwhile
    print(table({step: results[step] for step in args.steps}, eflomal_scores(args.work, gold)))
    print(seed_table({step: results[step] for step in args.steps}))
    for copies in sorted({STEPS[step][1] for step in args.steps}):
        bleu = results[f"unguided, gold text ×{copies}"]
        each = " / ".join(f"{bleu[f'{s}-{t}']:.2f}" for s, t in DIRECTIONS)
        print(f"unguided Transformer, gold text ×{copies}: test BLEU en→fr / fr→en {each}")


if __name__ == "__main__":
    main()
