"""The goals of evaluation that decides, measured on one run and its CTranslate2 export (docs/evaluation.md
gives the method): scoring time, paired tests beside sacreBLEU's, confidence against chrF, the flag on
degenerate outputs.

    OMP_NUM_THREADS=1 python -m benchmarks.evaluation_bench --run RUN --export EXPORT \
        --src DIR/test2016.de --ref DIR/test2016.en
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
import timeit
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from sacrebleu.metrics import CHRF

from benchmarks.common import cells, machine, parser
from nmt.data.corpus import read_lines
from nmt.decode.aligner import teacher_forced
from nmt.decode.confidence import suspicions
from nmt.decode.decoded import DecodedLine
from nmt.decode.exported import load_export, output_limit
from nmt.decode.loading import load_trained
from nmt.decode.translator import TorchTranslator, Translator
from nmt.evaluate.paired import TESTS, Comparison, Estimate, paired_test
from nmt.evaluate.scores import score

ISSUES = {  # the word translated → the loop reported
    "salad": "salad " * 30 + "sala salad sala sala",  # LibreTranslate #46
    "increasingly": "cada vez " * 20 + "cada cada vez cada " * 5,  # LibreTranslate #167
    "never": "nunca jamás " * 15 + "jamás " * 20,  # Argos Translate #318
    "anti": "anti " * 40,
    "défavorable": "adverse " * 40,
    "dressed": "vest vestida " + "vest " * 30,
}

LOOPED = re.compile(r"\b(\w+)( \1\b){2}|(\w)\3{3}")  # a word said 3 times in a row, a letter 4 times


def loops(words: list[str]) -> dict[str, str]:
    """Degenerate outputs built on one reference: a word, its last half, a phrase or a letter looped."""
    middle, longest = words[len(words) // 2], max(words, key=len)
    return {
        "a word looped": " ".join([longest] * 30),
        "a translation that ends in a loop": " ".join(words[: len(words) // 2] + [middle] * 30),
        "a phrase looped": " ".join(words[:3] * 15),
        "a word said three times": " ".join([*words[:-1], *[words[-1]] * 3]),
        "a letter stretched": " ".join([*words[:-1], longest[0] + longest[1] * 12 + longest[2:]]),
    }


def recall(translator: Translator, sources: list[str], references: list[str]) -> dict[str, tuple[int, int]]:
    """Each kind of degenerate output: (flagged, outputs), each cut at the search's output limit."""
    found: dict[str, list[int]] = {}
    built = [("reported loops", s, o) for s, o in ISSUES.items()]
    built += [
        (k, s, o) for s, r in zip(sources, references, strict=True) for k, o in loops(r.split()).items()
    ]
    for kind, source, output in built:
        ids = translator.encode([source])[0]
        out = translator.tokenizers.tgt.encode([output])[0][: output_limit(len(ids), translator.settings)]
        found.setdefault(kind, []).append(bool(suspicions(ids, out)))
    return {kind: (sum(flags), len(flags)) for kind, flags in found.items()}


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's correlation: Pearson's of the ranks, ties given their mean rank."""

    def ranks(values: list[float]) -> np.ndarray:
        ordered = np.sort(values)
        return np.searchsorted(ordered, values, "left") + np.searchsorted(ordered, values, "right")

    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def sacrebleu_table(args: list[str]) -> dict[str, list[str]]:
    """sacreBLEU's paired-test table (`-f text -w 10`): each metric's cells, baseline then system then p."""
    command = [sys.executable, "-m", "sacrebleu", *args, "-f", "text", "-w", "10", "--no-color"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    rows = [[cell.strip() for cell in row.split("│")[1:-1]] for row in done.stdout.splitlines() if "│" in row]
    header, *cells = rows
    return {re.sub(r" \(μ.*", "", name): [row[i] for row in cells] for i, name in enumerate(header) if i}


def printed(found: dict[str, Comparison], test: str) -> dict[str, list[str]]:
    """`paired_test`'s results as sacreBLEU prints them (its AR prints no interval; p ≤ 0.05 starred)."""

    def cell(e: Estimate) -> str:
        return f"{e.score:.10f}" + ("" if test == "ar" else f" ({e.mean:.10f} ± {e.ci:.10f})")

    p = {name: f"(p = {c.p_value:.4f})" + "*" * (c.p_value <= 0.05) for name, c in found.items()}
    return {name: [cell(c.baseline), cell(c.system), p[name]] for name, c in found.items()}


def agreement(system: list[str], baseline: list[str], references: list[str]) -> list[str]:
    """Rows: each paired test beside sacreBLEU's command line on the same files."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        given = [str(Path(folder) / name) for name in ("references", "baseline", "system")]
        for path, lines in zip(given, (references, baseline, system), strict=True):
            Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        given.insert(1, "-i")
        for test in TESTS:
            theirs = sacrebleu_table([*given, f"--paired-{test}", "-m", "bleu", "chrf", "ter"])
            theirs |= sacrebleu_table([*given, f"--paired-{test}", "-m", "chrf", "--chrf-word-order", "2"])
            ours = paired_test(system, baseline, references, test)
            same = "yes" if printed(ours, test) == theirs else "NO"
            p = ", ".join(f"{n} {c.p_value:.4f}" for n, c in ours.items())
            rows.append(cells(f"paired test {test}, equal to sacreBLEU's command line", same, f"p: {p}"))
    return rows


def timed(hypotheses: list[str], references: list[str], repeats: int) -> str:
    """Row: the fastest of `repeats` scorings after an untimed one, in wall-clock and CPU seconds."""
    found, clocks = score(hypotheses, references), (time.perf_counter, time.process_time)
    timers = [timeit.Timer(lambda: score(hypotheses, references), timer=clock) for clock in clocks]
    wall, cpu = (min(timer.repeat(repeats, number=1)) for timer in timers)
    intervals = ", ".join(f"{n} {m.score:.2f} ± {m.ci:.2f}" for n, m in found.metrics.items())
    return cells("four metrics with intervals, seconds on one core", f"{wall:.2f} (CPU {cpu:.2f})", intervals)


def correlation(name: str, lines: list[DecodedLine], references: list[str]) -> str:
    """Row: Spearman's correlation of confidence with sentence chrF, beside the search score's."""
    chrf = [CHRF().sentence_score(t.best.text, [r]).score for t, r in zip(lines, references, strict=True)]
    confidence = spearman([line.best.mean_log_prob or 0.0 for line in lines], chrf)
    raw = spearman([line.best.score for line in lines], chrf)
    return cells(f"Spearman, confidence vs sentence chrF ({name})", f"{confidence:.3f}", f"score: {raw:.3f}")


def flag_rows(
    run: TorchTranslator, ours: list[DecodedLine], sources: list[str], references: list[str]
) -> list[str]:
    """Rows: the flag's recall on degenerate outputs, then what it flags elsewhere."""
    words = sorted({w for line in sources for w in line.split() if w.isalpha() and len(w) > 3})[::40]
    stress = run.translated([" ".join([w] * n) for w in [*ISSUES, *words] for n in (1, 3, 8)])
    looped = [bool(line.best.suspect) for line in stress if LOOPED.search(line.best.text)]
    found = recall(run, sources, references) | {"its translations of words": (sum(looped), len(looped))}
    found["every degenerate output"] = (sum(h for h, _ in found.values()), sum(n for _, n in found.values()))
    rows = [cells(f"flag recall: {k}", f"{h / max(n, 1):.1%}", f"{h} of {n}") for k, (h, n) in found.items()]
    encoded, targets = run.encode(sources), run.tokenizers.tgt.encode(references)
    paid = teacher_forced(run, encoded, targets)
    aligned = [w[-1].mean(dim=0)[:-1, :-1].argmax(dim=-1).tolist() for w in paid]  # as search aligns
    false = sum(bool(suspicions(s, t, a)) for s, t, a in zip(encoded, targets, aligned, strict=True))
    rows.append(cells("flagged: the references (false positives)", f"{false / len(targets):.1%}", false))
    rows.append(cells("flagged: the run's translations", *flagged(ours)))
    rows.append(cells("flagged: its translations of words of --src, once, 3 and 8 times", *flagged(stress)))
    return rows


def flagged(lines: list[DecodedLine]) -> tuple[str, str]:
    """Cells: the share of the lines' best translations flagged, and how often each reason was given."""
    reasons = Counter(reason for line in lines for reason in line.best.suspect)
    share = sum(bool(line.best.suspect) for line in lines) / len(lines)
    return f"{share:.1%} of {len(lines)}", ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "-"


def main() -> None:
    parse = parser(__doc__)
    for name in ("--run", "--export", "--src", "--ref"):
        parse.add_argument(name, type=Path, required=True)
    parse.add_argument("--repeats", type=int, default=3)
    args = parse.parse_args()
    torch.set_num_threads(1)
    sources, references = read_lines(args.src), read_lines(args.ref)
    run = TorchTranslator.of_run(load_trained([args.run], torch.device("cpu")))
    ours = run.translated(sources, alignments=True)
    exported = load_export(args.export, "cpu", threads=1)
    greedy = exported.with_search(beam_size=1).translate(sources)
    hypotheses = [line.best.text for line in ours]
    print(f"{len(sources)} sentences, 1 thread; {machine('torch', 'sacrebleu')}")
    print("\n| measure | figure | detail |\n|---|---|---|")
    print(timed(hypotheses, references, args.repeats))
    print("\n".join(agreement(hypotheses, greedy, references)))
    print(correlation("torch", ours, references))
    print(correlation("ctranslate2", exported.translated(sources), references))
    print("\n".join(flag_rows(run, ours, sources, references)))


if __name__ == "__main__":
    main()
