"""Guided alignment, one change at a time: what lowers the guided Transformer's AER on the Hansards gold
(docs/alignment.md, "One change at a time").

    taskset -c 0 env OMP_NUM_THREADS=1 python -m benchmarks.guided_alignment_steps --work /tmp/nmt-align-bench

It shares benchmarks/alignment_bench.py's work directory and protocol: the guided Transformer it chose is
trained again for each of `STEPS`, each changing its labels, the copies of the gold pairs' text in the
training data (never their links), the null slot, λ, heads, layer or seed. Per step: AER, precision and recall
on the 347 of grow-diag and of soft symmetrization (mean attention over a threshold chosen on the first 100),
and test BLEU, beside the plain Transformer on the same text. Figures in WORK/steps.json.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks import alignment_bench as bench
from benchmarks.alignment_bench import DIRECTIONS, by_split, scored
from benchmarks.common import parser, spread
from nmt.align.pharaoh import Link, SentenceLinks, pharaoh_text, read_links
from nmt.align.symmetrize import Method, symmetrize
from nmt.decode.aligner import force
from nmt.decode.loading import load_trained
from nmt.evaluate.evaluation import evaluate_run

BASE = bench.GUIDED["guided λ2 layer 0 shift, 2 heads"]  # the alignment bench's choice
STEPS = (  # each name states how its step trains BASE again: eflomal's links its labels are, the copies
    # of the gold pairs' text in the training text (×1 unless named), unlinked subwords pulled to the source's
    # </s> (null slot: train.alignment.null_slot), and settings that replace BASE's (`named_settings`)
    "base: grow-diag-final-and labels, gold text ×1",
    "grow-diag labels",
    "intersection labels",
    "grow-diag labels, gold text ×10",
    "intersection labels, gold text ×10",
    "intersection labels, null slot",
    "intersection labels, gold text ×10, null slot",
    "grow-diag labels, gold text ×10, null slot",
    "intersection labels, gold text ×10, null slot, λ4",
    "intersection labels, gold text ×10, null slot, 4 heads",
    "intersection labels, gold text ×10, null slot, λ1",
    "intersection labels, gold text ×10, null slot, layer 1",
    "intersection labels, gold text ×20, null slot",
    "intersection labels, gold text ×10, null slot, seed 2",
    "intersection labels, gold text ×10, null slot, seed 3",
    "intersection labels, gold text ×20, null slot, seed 2",
    "intersection labels, gold text ×20, null slot, seed 3",
)
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


def copies_of(step: str) -> int:
    """The copies of the gold pairs' text a step trains on."""
    found = re.search(r"gold text ×(\d+)", step)
    return int(found[1]) if found else 1


def labels(work: Path, method: Method, copies: int, src: str) -> Path:
    """eflomal's `method` links of the training text with `copies` of the gold text, `src` word first."""
    path = work / "eflomal" / f"{method}.x{copies}.{src}-first.links"
    if not path.exists():
        found = read_links(work / "eflomal" / f"{method}.links")  # English first, the gold text once
        found += found[-GOLD_PAIRS:] * (copies - 1)
        links = [set(line.possible) if src == "en" else {(j, i) for i, j in line.possible} for line in found]
        path.write_text(pharaoh_text(links))
    return path


def train_step(work: Path, step: str, src: str, tgt: str) -> Path:
    method: Method = re.search(r"([\w-]+) labels", step)[1]  # type: ignore[assignment,index]
    copies = copies_of(step)
    candidate = (*BASE, *bench.named_settings(step))  # after BASE: the last setting of a key wins
    settings = bench.guided_settings(work, src, tgt, candidate, labels(work, method, copies, src))
    kind = bench.Kind(step_name(step), "multi30k-cpu-transformer.yaml", bench.GUIDED_STEPS, settings)
    return bench.train(work, kind, src, tgt, with_copies(work, copies))


def unguided(work: Path, copies: int, src: str, tgt: str) -> Path:
    """The alignment bench's plain Transformer (no guided alignment) trained on the text with `copies` of the
    gold text (once: the bench's own run): the BLEU a guided step's compares with."""
    plain = next(kind for kind in bench.KINDS if kind.name == "Transformer")
    name = plain.name if copies == 1 else f"{plain.name}, gold text ×{copies}"
    return bench.train(work, dataclasses.replace(plain, name=name), src, tgt, with_copies(work, copies))


def unguided_bleu(work: Path, copies: int) -> dict[str, float]:
    """Each direction's test BLEU of `unguided` (beam 5, as the steps')."""
    return test_bleu({src: unguided(work, copies, src, tgt) for src, tgt in DIRECTIONS})


def test_bleu(runs: dict[str, Path]) -> dict[str, float]:
    """Each direction's test BLEU (beam 5) of its run, by the source language."""
    return {f"{s}-{t}": evaluate_run([runs[s]], "test", None, None, "cpu")["bleu"] for s, t in DIRECTIONS}


def soft_links(weights: dict[str, list[np.ndarray]], threshold: float) -> list[set[Link]]:
    """(English word, French word) pairs whose mean attention of the two directions exceeds `threshold`."""
    found = []
    for en_fr, fr_en in zip(weights["en"], weights["fr"], strict=True):
        mean = (en_fr + fr_en.T) / 2  # (French words, English words)
        found.append({(int(i), int(j)) for j, i in zip(*np.nonzero(mean > threshold), strict=True)})
    return found


def soft_symmetrized(
    pair: dict[str, bench.Directed], text: dict[str, list[str]], gold: list[SentenceLinks]
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
    """The step trained in both directions (where it was not), then scored."""
    runs = {src: train_step(work, step, src, tgt) for src, tgt in DIRECTIONS}
    pair = {src: bench.measure_run(runs[src], src, text, gold) for src in runs}
    forward, reverse = bench.joint_readings(pair, gold)
    both = zip(pair["en"].every[forward], pair["fr"].every[reverse], strict=True)
    links = [symmetrize(f, r, "grow-diag") for f, r in both]
    return {
        "grow-diag": by_split(scored(links, gold)),
        "soft": soft_symmetrized(pair, text, gold),
        "bleu": test_bleu(runs),
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
        cells = [spread([h[key] for h in hard]) for key in ("aer", "precision", "recall")]
        cells.append(spread([found["grow-diag"]["first 100"]["aer"] for found in seeds]))
        bleu = [spread([found["bleu"][f"{s}-{t}"] for found in seeds]) for s, t in DIRECTIONS]
        lines.append(f"| {step} ({len(seeds)}) | {' | '.join(cells)} | {' / '.join(bleu)} |")
    return "\n".join(lines)


def saved(path: Path, key: str, work: Callable[[], Any]) -> None:
    """`work()`'s result kept in the JSON file `path` under `key` (once; read again before it is written:
    another process may have measured other keys meanwhile)."""
    if key not in (json.loads(path.read_text()) if path.exists() else {}):
        found = work()
        results = json.loads(path.read_text()) if path.exists() else {}
        path.write_text(json.dumps(results | {key: found}, indent=1) + "\n")


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--work", type=Path, required=True, help="the alignment bench's work directory")
    parse.add_argument(
        "--data", type=Path, default=bench.DATA, help="the shared data (multi30k/, alignment/)"
    )
    parse.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    args = parse.parse_args()
    bench.ready(args.data, args.work, "guided-alignment steps benchmark")
    bench.run_eflomal(args.work)
    text = {lang: (args.work / "gold" / f"gold.{lang}").read_text().splitlines() for lang in ("en", "fr")}
    gold = read_links(args.work / "gold" / "gold.links")
    path, copies = args.work / "steps.json", sorted({copies_of(step) for step in args.steps})
    for step in args.steps:
        saved(path, step, lambda step=step: measure_step(args.work, step, text, gold))
    for n in copies:
        saved(path, f"unguided, gold text ×{n}", lambda n=n: unguided_bleu(args.work, n))
    results = json.loads(path.read_text())
    teacher = by_split(scored(bench.linked(args.work / "eflomal" / "grow-diag.links")[-GOLD_PAIRS:], gold))
    print(table({step: results[step] for step in args.steps}, teacher))
    print(seed_table({step: results[step] for step in args.steps}))
    for n in copies:
        each = " / ".join(f"{results[f'unguided, gold text ×{n}'][f'{s}-{t}']:.2f}" for s, t in DIRECTIONS)
        print(f"unguided Transformer, gold text ×{n}: test BLEU en→fr / fr→en {each}")


if __name__ == "__main__":
    main()
