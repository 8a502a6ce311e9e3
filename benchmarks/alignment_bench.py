"""Is attention alignment? Word alignments of every kind of model scored against human gold, in one table
(docs/alignment.md, "Is attention alignment?", which gives the method).

    taskset -c 0 env OMP_NUM_THREADS=1 python -m benchmarks.alignment_bench --work /tmp/nmt-align-bench \
        --figure docs/images/alignment-heads.png

Each stage is kept in --work: the data, eflomal's links, the runs (`KINDS` and the `GUIDED` candidates, both
directions), the measurement (work/results.json). --figure draws the AER of every layer × head of the
Transformers. --steps [CHANGE …] trains the chosen guided Transformer again for each of `CHANGES` instead
(docs/alignment.md, "One change at a time"; work/steps.json).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import ROOT, Results, fastest, nmt, parser, settings, spread, table
from nmt.align.eflomal import align_with_eflomal
from nmt.align.pharaoh import Link, SentenceLinks, pharaoh_text, read_lines, read_links
from nmt.align.reading import Reading, attention_layout, default_reading
from nmt.align.score import AlignmentScores, score_alignments
from nmt.align.symmetrize import METHODS, Method, symmetrize
from nmt.config.sections import LINK_RULES
from nmt.decode.aligner import Forced, force
from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator
from nmt.evaluate.evaluation import evaluate_run
from nmt.run.directory import RunDir
from nmt.run.metrics import read_metrics

EFLOMAL_OPTIONS = ("--model", "3", "--n-samplers", "3")  # IBM1+HMM+fertility, 3 samplers
DATA = ROOT.parent / "shared" / "data"
TOKENS = {  # the fixed preprocessing of the Multi30k side: lower-cased, then these words
    "en": re.compile(r"'\w+|\w+|[^\w\s]"),  # clitics start a word: "man's" → man 's
    "fr": re.compile(r"\w+'|\w+|[^\w\s]"),  # elisions end one: "l'homme" → l' homme
}


def missing_data(data: Path, benchmark: str = "alignment benchmark") -> str | None:
    """Why the benchmark cannot run on `data` (None: it can): it needs the shared data's Multi30k En–Fr and
    alignment gold sets, which stay outside the repository."""
    needed = [data / "multi30k" / "train.fr", data / "alignment" / "gold" / "enfr.gold"]
    absent = ", ".join(str(path) for path in needed if not path.is_file())
    where = "../shared/data beside the repository, or --data DIR, with multi30k/ and alignment/"
    return f"skipped: the {benchmark} needs the shared data ({where}); {absent} not found" if absent else None


def tokenize(line: str, lang: str) -> str:
    """A Multi30k line as the benchmark's words: lower-cased, punctuation and clitics split off."""
    return " ".join(TOKENS[lang].findall(line.lower()))


def read_gold(data: Path) -> tuple[list[str], list[str], list[str]]:
    """The 447 En–Fr gold pairs, lower-cased (their words as given), and their links, 0-based, English
    first, `p` marking a possible link."""
    pairs = (data / "alignment" / "gold" / "enfr.src-tgt").read_text(encoding="utf-8").splitlines()
    en, fr = zip(*(line.split(" ||| ") for line in pairs), strict=True)
    links = []
    for line in (data / "alignment" / "gold" / "enfr.gold").read_text(encoding="utf-8").splitlines():
        found = (re.fullmatch(r"(\d+)([-p])(\d+)", token) for token in line.split())
        links.append(" ".join(f"{int(m[1]) - 1}{m[2]}{int(m[3]) - 1}" for m in found if m))
    return [" ".join(s.lower().split()) for s in en], [" ".join(s.lower().split()) for s in fr], links


def ready(data: Path, work: Path, benchmark: str = "alignment benchmark") -> None:
    """The data in `work` (`prepare`), on one CPU thread; when `data` lacks what it needs, the `benchmark`
    says so and exits (0: a skip, not a failure)."""
    missing = missing_data(data, benchmark)
    if missing is not None:
        print(missing, file=sys.stderr)
        sys.exit(0)
    torch.set_num_threads(1)
    prepare(data, work)


def prepare(data: Path, work: Path) -> None:
    """work/data: Multi30k En–Fr tokenized (train, val, test2016), the gold pairs appended to train;
    work/gold: the gold pairs and links (gold.*), and the first 100 of them (first100.*)."""
    corpus, gold = work / "data", work / "gold"
    if (gold / "gold.links").exists():
        return
    corpus.mkdir(parents=True, exist_ok=True)
    gold.mkdir(parents=True, exist_ok=True)
    en, fr, links = read_gold(data)
    sides = {"en": en, "fr": fr}
    for split in ("train", "val", "test2016"):
        for lang in ("en", "fr"):
            lines = (data / "multi30k" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
            words = [tokenize(line, lang) for line in lines] + (sides[lang] if split == "train" else [])
            (corpus / f"{split}.{lang}").write_text("".join(f"{w}\n" for w in words), encoding="utf-8")
    for name, first in (("gold", 447), ("first100", 100)):
        for lang, lines in (*sides.items(), ("links", links)):
            (gold / f"{name}.{lang}").write_text("".join(f"{w}\n" for w in lines[:first]), encoding="utf-8")


def run_eflomal(work: Path) -> None:
    """work/eflomal: eflomal's links of the whole training text (Multi30k and the gold pairs), English
    first, each direction (`forward.links`, `reverse.links`) and symmetrized (`METHOD.links`)."""
    out = work / "eflomal"
    if (out / "grow-diag-final-and.links").exists():
        return
    out.mkdir(parents=True, exist_ok=True)
    en, fr = (read_lines(work / "data" / f"train.{lang}") for lang in ("en", "fr"))
    found, seconds = fastest(lambda: align_with_eflomal(en, fr, "grow-diag", EFLOMAL_OPTIONS), 1)
    written = {"forward": found.forward, "reverse": found.reverse}
    written |= {method: symmetrized(found.forward, found.reverse, method) for method in METHODS}
    for name, links in written.items():
        (out / f"{name}.links").write_text(pharaoh_text(links))
    (out / "seconds").write_text(f"{seconds:.1f}\n")


@dataclass(frozen=True)
class Kind:
    """A kind of model: its config, updates (about 5 minutes on one CPU thread) and settings."""

    name: str
    config: str
    steps: int
    settings: tuple[str, ...] = ()


KINDS = (
    Kind("RNN + Bahdanau", "multi30k-cpu-rnn-bahdanau.yaml", 400),
    Kind("RNN + Luong", "multi30k-cpu-rnn-luong.yaml", 1000),
    Kind("Transformer", "multi30k-cpu-transformer.yaml", 1200),
)
NAMED_SETTINGS = {  # what a run's name says → its setting (guided alignment's, and the seed)
    r"λ([\d.]+)": "train.alignment.weight={}",
    r"layer (\d+)": "train.alignment.layer={}",
    r"(\d+) heads": "train.alignment.heads={}",
    r"full context": "train.alignment.full_context=true",
    r"shift": "train.alignment.shift=true",
    r"null slot": "train.alignment.null_slot=true",
    r"seed (\d+)": "train.seed={}",
}


def named_settings(name: str) -> tuple[str, ...]:
    """The settings a run's name states (`guided λ2 layer 0 shift, 2 heads`: λ 2, decoder layer 0, Shift-Att,
    the mean of 2 heads supervised)."""
    found = ((re.search(pattern, name), setting) for pattern, setting in NAMED_SETTINGS.items())
    return tuple(setting.format(*match.groups()) for match, setting in found if match)


GUIDED = {  # candidates for the guided Transformer, one chosen by the AER of its attention on the first 100
    name: named_settings(name)
    for name in (
        "guided λ0.05 layer 0",
        "guided λ0.5 layer 0 full context",
        "guided λ0.5 layer 1 full context",
        "guided λ0.5 layer 0 shift",
        "guided λ0.5 layer 1 shift",
        "guided λ1 layer 0 shift",
        "guided λ2 layer 0 shift",
        "guided λ4 layer 0 shift",
        "guided λ2 layer 0 shift, 2 heads",
        "guided λ2 layer 0 shift, 4 heads",
    )
}
DIRECTIONS = (("en", "fr"), ("fr", "en"))
GUIDED_STEPS = 1200  # as many updates as the plain Transformer's
GUIDED_NAME = "Transformer, guided (eflomal's links)"
STEPS = {kind.name: kind.steps for kind in KINDS} | dict.fromkeys(GUIDED, GUIDED_STEPS)


def run_name(kind: str, src: str, tgt: str) -> str:
    return f"{re.sub(r'[^a-z0-9.]+', '-', kind.lower()).strip('-')}.{src}-{tgt}"


def guided_settings(
    work: Path, src: str, tgt: str, candidate: tuple[str, ...], links: Path | None = None
) -> tuple[str, ...]:
    """train.alignment for one direction: `links` (default: eflomal's grow-diag-final-and links of the
    training text), the first 100 gold pairs as the validation gold set, then the candidate's settings."""
    gold = work / "gold"
    return (
        f"train.alignment.links={links or labels(work, 'grow-diag-final-and', 1, src)}",
        f"train.alignment.gold_src={gold / f'first100.{src}'}",
        f"train.alignment.gold_tgt={gold / f'first100.{tgt}'}",
        f"train.alignment.gold_links={gold / 'first100.links'}",
        f"train.alignment.gold_reverse={'true' if src == 'fr' else 'false'}",
        *candidate,
    )


def train(work: Path, kind: Kind, src: str, tgt: str, data: Path | None = None) -> Path:
    """One run (skipped when it finished before), `kind.steps` updates, validated once at the end, on the
    benchmark's training text (or on `data`)."""
    out = work / "runs" / run_name(kind.name, src, tgt)
    done = out / "trained"
    if done.exists():
        return out
    if out.exists():
        shutil.rmtree(out)
    limits = [f"train.max_steps={kind.steps}", "train.max_time=0", f"train.eval_every={kind.steps}"]
    given = ["--out", str(out), "--data", str(data or work / "data"), "--src-lang", src, "--tgt-lang", tgt]
    sets = settings(*limits, "train.final_report=false", *kind.settings)
    done.write_text(f"{nmt('train', ROOT / 'configs' / kind.config, *given, *sets).seconds:.1f}\n")
    return out


def train_all(work: Path) -> None:
    for src, tgt in DIRECTIONS:
        for kind in KINDS:
            train(work, kind, src, tgt)
    for (src, tgt), (name, candidate) in itertools.product(DIRECTIONS, GUIDED.items()):
        settings = guided_settings(work, src, tgt, candidate)
        train(work, Kind(name, "multi30k-cpu-transformer.yaml", GUIDED_STEPS, settings), src, tgt)


SPLITS = {"first 100": slice(0, 100), "347": slice(100, 447), "447": slice(0, 447)}
THRESHOLDS = (None, 0.1, 0.2, 0.3, 0.4, 0.5)
READING = ("rule", "layer", "head", "threshold")  # what a reading is, as the tables show it
AGREEMENT_PAIRS = 1000  # the first Multi30k training pairs, for agreement with eflomal and for speed
Scores = dict[str, dict[str, float]]  # by split: AER, precision and recall in percent


@dataclass(frozen=True)
class Directed:
    """A run teacher-forced on the gold pairs: their links (English first) under every reading (rule × layer ×
    head, and thresholds for the best of them), their scores, and the reading chosen on the first 100."""

    run: TrainedRun
    forced: Forced
    chosen: Reading
    every: dict[Reading, list[set[Link]]]
    grid: dict[Reading, Scores]


def percent(scores: AlignmentScores) -> dict[str, float]:
    return {"aer": 100 * scores.aer, "precision": 100 * scores.precision, "recall": 100 * scores.recall}


def scored(links: Sequence[set[Link]], gold: Sequence[SentenceLinks]) -> Scores:
    return {name: percent(score_alignments(links[part], gold[part])) for name, part in SPLITS.items()}


def english_first(links: Sequence[set[Link]], src: str) -> list[set[Link]]:
    """Links of a run from `src` as (English word, French word); and English-first links as `src`-first."""
    return [set(line) if src == "en" else {(j, i) for i, j in line} for line in links]


def symmetrized(
    forward: Sequence[set[Link]], reverse: Sequence[set[Link]], method: Method = "grow-diag"
) -> list[set[Link]]:
    return [symmetrize(f, r, method) for f, r in zip(forward, reverse, strict=True)]


def every_reading(run: TrainedRun) -> list[Reading]:
    """Each layer's heads alone and their mean, and the heads guided alignment supervised (their mean), by
    both rules, with and without the null slot."""
    layers, heads = attention_layout(run.cfg)
    choices: list[tuple[int, ...] | None] = [(h,) for h in range(heads)] + ([None] if heads > 1 else [])
    supervised = default_reading(run.cfg, None, None, "run").heads  # None: no guided heads (an RNN's one)
    choices += [supervised] if supervised is not None and supervised not in choices else []
    found = itertools.product(LINK_RULES, (False, True), range(layers), choices)
    return [Reading(layer, h, rule, null=null) for rule, null, layer, h in found]


def measure_run(run_dir: Path, src: str, gold: dict[str, list[str]], links: list[SentenceLinks]) -> Directed:
    """Align the gold pairs with a run in its direction; choose the reading (rule, layer, head, then the
    threshold) with the lowest AER on the first 100 pairs."""
    run = load_trained([run_dir], torch.device("cpu"))
    forced = force(run, gold[src], gold["fr" if src == "en" else "en"])
    every = {r: english_first(forced.links(r), src) for r in every_reading(run)}
    best = min(every, key=lambda r: score_alignments(every[r][:100], links[:100]).aer)
    thresholds = [dataclasses.replace(best, threshold=t) for t in THRESHOLDS]
    every |= {r: english_first(forced.links(r), src) for r in thresholds[1:]}
    grid = {r: scored(found, links) for r, found in every.items()}
    return Directed(run, forced, min(thresholds, key=lambda r: grid[r]["first 100"]["aer"]), every, grid)


def joint_readings(pair: dict[str, Directed], gold: list[SentenceLinks]) -> tuple[Reading, Reading]:
    """The readings of the two directions whose links, symmetrized with grow-diag, have the lowest AER on the
    first 100 pairs."""

    def aer(readings: tuple[Reading, Reading]) -> float:
        links = symmetrized(pair["en"].every[readings[0]][:100], pair["fr"].every[readings[1]][:100])
        return score_alignments(links, gold[:100]).aer

    return min(itertools.product(pair["en"].every, pair["fr"].every), key=aer)


def diagonal(en: Sequence[str], fr: Sequence[str], src: str) -> list[set[Link]]:
    """Position alone: each target word j of J linked to source word ≈ (j + ½)·I/J of I (English first)."""
    found = []
    for e, f in zip(en, fr, strict=True):
        i_count, j_count = len(e.split()), len(f.split())
        if src == "fr":  # French word j → English word ≈ j·I/J
            found.append({(min(i_count - 1, int((j + 0.5) * i_count / j_count)), j) for j in range(j_count)})
        else:
            found.append({(i, min(j_count - 1, int((i + 0.5) * j_count / i_count))) for i in range(i_count)})
    return found


def agreement(pair: dict[str, Directed], readings: tuple[Reading, Reading], work: Path) -> dict[str, float]:
    """Scores of a kind's symmetrized (grow-diag) attention links (`readings` of the two directions) of the
    first Multi30k training pairs against eflomal's symmetrized (grow-diag) links of them, taken as sure."""
    text = {lang: read_lines(work / "data" / f"train.{lang}")[:AGREEMENT_PAIRS] for lang in ("en", "fr")}
    forward, reverse = (
        english_first(force(pair[src].run, text[src], text[tgt]).links(reading), src)
        for (src, tgt), reading in zip(DIRECTIONS, readings, strict=True)
    )
    teacher = read_links(work / "eflomal" / "grow-diag.links")[:AGREEMENT_PAIRS]
    sure = [SentenceLinks(t.possible, t.possible) for t in teacher]
    return percent(score_alignments(symmetrized(forward, reverse), sure))


def speed(found: Directed, text: dict[str, list[str]], src: str) -> list[float]:
    """Sentence pairs a second: `nmt align` (teacher-forced, the chosen reading) and greedy `nmt translate` of
    the same sources, on the Multi30k training pairs `text`, after a warm-up on 50 of them."""
    tgt = "fr" if src == "en" else "en"
    translator = TorchTranslator.of_run(found.run).with_search(beam_size=1)
    rates = []
    for task in (
        lambda n: force(found.run, text[src][:n], text[tgt][:n]).links(found.chosen),
        lambda n: translator.translate(text[src][:n]),
    ):
        task(50)  # warm-up
        rates.append(AGREEMENT_PAIRS / fastest(lambda task=task: task(AGREEMENT_PAIRS), 1)[1])
    return rates


def every_method(
    forward: Sequence[set[Link]], reverse: Sequence[set[Link]], gold: list[SentenceLinks]
) -> dict:
    """Every method's scores on each split."""
    return {method: scored(symmetrized(forward, reverse, method), gold) for method in METHODS}


def describe(reading: Reading) -> dict[str, object]:
    heads = "mean" if reading.heads is None else ",".join(map(str, reading.heads))
    return {"rule": reading.rule, "layer": reading.layer, "head": heads, "threshold": reading.threshold}


def choose_guided(work: Path) -> tuple[str, dict[str, dict[str, float]]]:
    """The guided candidate whose supervised attention had the lowest validation AER on the first 100 gold
    pairs, averaged over both directions; and every candidate's AER there."""

    def aer(name: str, src: str, tgt: str) -> float:
        records = read_metrics(RunDir(work / "runs" / run_name(name, src, tgt)))
        return 100 * [r["aer"] for r in records if r["kind"] == "valid"][-1]

    found = {name: {f"{src}-{tgt}": aer(name, src, tgt) for src, tgt in DIRECTIONS} for name in GUIDED}
    return min(found, key=lambda name: sum(found[name].values())), found


def measure(work: Path, data: Path) -> dict:
    """Everything the report shows, as JSON-ready numbers."""
    text = {lang: read_lines(work / "gold" / f"gold.{lang}") for lang in ("en", "fr")}
    pairs = {lang: read_lines(work / "data" / f"train.{lang}")[:AGREEMENT_PAIRS] for lang in ("en", "fr")}
    gold = read_links(work / "gold" / "gold.links")
    guided, candidates = choose_guided(work)
    results: dict = {"guided_choice": guided, "guided_candidates": candidates, "kinds": {}}
    for kind in [k.name for k in KINDS] + [guided]:
        runs = {src: work / "runs" / run_name(kind, src, tgt) for src, tgt in DIRECTIONS}
        pair = {src: measure_run(runs[src], src, text, gold) for src in runs}
        readings = joint_readings(pair, gold)
        entry: dict = {
            "symmetrized": every_method(pair["en"].every[readings[0]], pair["fr"].every[readings[1]], gold),
            "symmetrized_readings": [describe(reading) for reading in readings],
            "agreement": agreement(pair, readings, work),
        }
        for src, tgt in DIRECTIONS:
            found = pair[src]
            entry[f"{src}-{tgt}"] = {
                "chosen": describe(found.chosen),
                "scores": found.grid[found.chosen],
                "grid": [describe(r) | g for r, g in found.grid.items()],
                "speed": speed(found, pairs, src),
                "bleu": evaluate_run([runs[src]], "test", None, None, "cpu")["bleu"],
                "train_seconds": float((runs[src] / "trained").read_text()),
            }
        results["kinds"][kind] = entry
    results["diagonal"] = both_ways([diagonal(text["en"], text["fr"], src) for src, _ in DIRECTIONS], gold)
    eflomal = [linked(work / "eflomal" / f"{name}.links")[-447:] for name in ("forward", "reverse")]
    seconds = float((work / "eflomal" / "seconds").read_text())
    results["eflomal"] = both_ways(eflomal, gold) | {"seconds": seconds}
    fixtures = data / "alignment" / "reference-outputs"
    results["fixtures"] = {
        name: scored(linked(fixtures / folder / "test.enfr.grow-diagonal.talp"), gold)
        for name, folder in (("fast_align", "fast_align"), ("GIZA++", "giza"))
    }
    return results


def both_ways(links: Sequence[Sequence[set[Link]]], gold: list[SentenceLinks]) -> dict:
    """The scores of links from English and from French (`links`, English word first), and symmetrized."""
    found = {"en-fr": scored(links[0], gold), "fr-en": scored(links[1], gold)}
    return found | {"symmetrized": every_method(links[0], links[1], gold)}


def linked(path: Path) -> list[set[Link]]:
    """Every link of a links file, sure or possible, by sentence."""
    return [set(line.possible) for line in read_links(path)]


def report(results: dict) -> str:
    """The benchmark's tables in Markdown."""
    kinds, guided, directions = results["kinds"], results["guided_choice"], ("en-fr", "fr-en")
    named = {kind: GUIDED_NAME if kind == guided else kind for kind in kinds}
    systems = [("diagonal (position only)", results["diagonal"], None)]
    systems += [(named[kind], kinds[kind], kind) for kind in kinds]
    systems += [("eflomal (this text, 3 samplers)", results["eflomal"], None)]

    def tail(found: dict) -> list[str]:  # precision and recall on the 347, AER on all 447
        return [f"{found['347'][k]:.1f}" for k in ("precision", "recall")] + [f"{found['447']['aer']:.1f}"]

    overall = []
    for name, entry, kind in systems:
        sym = entry["symmetrized"]["grow-diag"]
        directed = [f"{(entry[d]['scores'] if kind else entry[d])['347']['aer']:.1f}" for d in directions]
        agree = f"{entry['agreement']['aer']:.1f}" if kind else "–"
        bleu = f"{entry['en-fr']['bleu']:.1f} / {entry['fr-en']['bleu']:.1f}" if kind else "–"
        overall.append([name, *directed, f"**{sym['347']['aer']:.1f}**", *tail(sym), agree, bleu])
    for name, found in results["fixtures"].items():
        context = f"{name} (1.1M Hansards pairs: context)"
        overall.append([context, "", "", f"{found['347']['aer']:.1f}", *tail(found), "–", "–"])
    readings, rules, speeds = [], [], []
    for kind, entry in kinds.items():
        for direction in directions:
            found, chosen = entry[direction], entry[direction]["chosen"]
            threshold = "–" if chosen["threshold"] is None else chosen["threshold"]
            hindsight = min(g["347"]["aer"] for g in found["grid"])
            aer = [f"{found['scores'][split]['aer']:.1f}" for split in ("first 100", "347")]
            readings.append([named[kind], direction, *[chosen[k] for k in READING[:3]], threshold, *aer])
            readings[-1].append(f"{hindsight:.1f}")
            best = []
            for rule in LINK_RULES:
                grid = [g for g in found["grid"] if g["rule"] == rule and g["threshold"] is None]
                g = min(grid, key=lambda g: g["first 100"]["aer"])
                best.append(f"{g['347']['aer']:.1f} (layer {g['layer']}, head {g['head']})")
            rules.append([named[kind], direction, *best])
            align, translate = found["speed"]
            speeds.append([named[kind], direction, f"{align:.0f}", f"{translate:.0f}"])
            speeds[-1].append(f"{align / translate:.1f}×")
        both, sym = entry["symmetrized_readings"], entry["symmetrized"]["grow-diag"]
        cells = [" / ".join(str(r[key] if r[key] is not None else "–") for r in both) for key in READING]
        aer = [f"{sym[split]['aer']:.1f}" for split in ("first 100", "347")]
        readings.append([named[kind], "grow-diag of both (en→fr / fr→en)", *cells, *aer, ""])
    methods = [
        [name, *(f"{e['symmetrized'][m]['347']['aer']:.1f}" for m in METHODS)] for name, e, _ in systems
    ]
    candidates = [
        [name, f"{aer['en-fr']:.1f}", f"{aer['fr-en']:.1f}", "yes" if name == guided else ""]
        for name, aer in results["guided_candidates"].items()
    ]
    sections = [
        (
            "AER (%) on the 347 gold pairs after the first 100 (every choice was made on the first 100); "
            "symmetrized with lilt's strict grow-diag.",
            "system | en→fr | fr→en | symmetrized | precision | recall | symmetrized, all 447 | agreement "
            "with eflomal, 1,000 Multi30k pairs | test BLEU en→fr / fr→en",
            overall,
            1,
        ),
        (
            "The reading of each model's attention, chosen by AER on the first 100 pairs (for the "
            "symmetrized links: the two readings whose grow-diag is best there):",
            "model | direction | rule | layer | head | threshold | AER first 100 | AER 347 | "
            "best on the 347 (hindsight)",
            readings,
            3,
        ),
        (
            "Each rule, its layer and head chosen on the first 100 (no threshold), AER on the 347:",
            "model | direction | argmax | shift",
            rules,
            2,
        ),
        ("Symmetrization methods, AER on the 347:", " | ".join(("system", *METHODS)), methods, 1),
        (
            "Guided candidates: validation AER of the supervised attention on the first 100 pairs:",
            "candidate | en→fr | fr→en | chosen",
            candidates,
            1,
        ),
        (
            f"Speed on {AGREEMENT_PAIRS:,} Multi30k training pairs, "
            "sentence pairs a second (one CPU thread):",
            "model | direction | nmt align | greedy nmt translate | align ÷ translate",
            speeds,
            2,
        ),
    ]
    tables = (f"{intro}\n\n{table(head.split(' | '), rows, left)}" for intro, head, rows, left in sections)
    text = "\n\n".join(tables)
    seconds = {k: [e[d]["train_seconds"] for d in directions] for k, e in kinds.items()}
    each = "; ".join(f"{named[k]} {s[0]:.0f} / {s[1]:.0f} s ({STEPS[k]} updates)" for k, s in seconds.items())
    eflomal = f"eflomal {results['eflomal']['seconds']:.0f} s (both directions)"
    return f"{text}\n\nTraining (one CPU thread), seconds per direction, updates: {each}; {eflomal}.\n"


def figure(results: dict, path: Path) -> None:
    """AER on the 347 of every layer × head (and their mean) of the Transformers, for both rules; the
    reading chosen on the first 100 outlined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    guided = results["guided_choice"]
    panels = [(kind, d) for kind in ("Transformer", guided) for d in ("en-fr", "fr-en")]
    fig, axes = plt.subplots(len(panels), 2, figsize=(9, 2.1 * len(panels)), squeeze=False)
    for row, (kind, direction) in enumerate(panels):
        found = results["kinds"][kind][direction]
        grid = [g for g in found["grid"] if g["threshold"] is None]
        layers = sorted({g["layer"] for g in grid})
        heads = list(dict.fromkeys(g["head"] for g in grid))
        for col, rule in enumerate(LINK_RULES):
            values = np.full((len(layers), len(heads)), np.nan)
            for g in grid:
                if g["rule"] == rule:
                    values[layers.index(g["layer"]), heads.index(g["head"])] = g["347"]["aer"]
            ax = axes[row][col]
            ax.imshow(values, cmap="viridis_r", vmin=20, vmax=90, aspect="auto")
            for (i, j), value in np.ndenumerate(values):
                color = "white" if value > 55 else "black"
                ax.text(j, i, f"{value:.0f}", ha="center", va="center", color=color)
            chosen = found["chosen"]
            if chosen["rule"] == rule:
                box = (heads.index(chosen["head"]) - 0.5, layers.index(chosen["layer"]) - 0.5)
                ax.add_patch(plt.Rectangle(box, 1, 1, fill=False, edgecolor="red", linewidth=2))
            ax.set(xticks=range(len(heads)), xticklabels=heads, yticks=range(len(layers)), yticklabels=layers)
            ax.set(xlabel="head", ylabel="layer")
            name = "guided Transformer" if kind == guided else kind
            ax.set_title(f"{name}, {direction}, {rule}", fontsize=10)
    fig.suptitle(
        "AER (%) on the 347 gold pairs per decoder layer × head, no threshold\n"
        "(red: the reading chosen on the first 100)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)


BASE = GUIDED["guided λ2 layer 0 shift, 2 heads"]  # the alignment bench's choice
CHANGES = (  # each name states how its step trains BASE again: eflomal's links its labels are, the copies
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
        found = linked(work / "eflomal" / f"{method}.links")  # English first, the gold text once
        path.write_text(pharaoh_text(english_first(found + found[-GOLD_PAIRS:] * (copies - 1), src)))
    return path


def train_step(work: Path, step: str, src: str, tgt: str) -> Path:
    method: Method = re.search(r"([\w-]+) labels", step)[1]  # type: ignore[assignment,index]
    copies = copies_of(step)
    candidate = (*BASE, *named_settings(step))  # after BASE: the last setting of a key wins
    settings = guided_settings(work, src, tgt, candidate, labels(work, method, copies, src))
    kind = Kind(f"step {step}", "multi30k-cpu-transformer.yaml", GUIDED_STEPS, settings)
    return train(work, kind, src, tgt, with_copies(work, copies))


def test_bleu(runs: dict[str, Path]) -> dict[str, float]:
    """Each direction's test BLEU (beam 5) of its run, by the source language."""
    return {f"{s}-{t}": evaluate_run([runs[s]], "test", None, None, "cpu")["bleu"] for s, t in DIRECTIONS}


def unguided_bleu(work: Path, copies: int) -> dict[str, float]:
    """The test BLEU of the plain Transformer (no guided alignment) trained both ways on the text with
    `copies` of the gold text (once: the alignment bench's own runs), the BLEU a step's compares with."""
    name = f"Transformer, gold text ×{copies}" if copies > 1 else "Transformer"
    plain = dataclasses.replace(KINDS[-1], name=name)
    return test_bleu({s: train(work, plain, s, t, with_copies(work, copies)) for s, t in DIRECTIONS})


def soft_links(weights: dict[str, list[np.ndarray]], threshold: float) -> list[set[Link]]:
    """(English word, French word) pairs whose mean attention of the two directions exceeds `threshold`."""
    found = []
    for en_fr, fr_en in zip(weights["en"], weights["fr"], strict=True):
        mean = (en_fr + fr_en.T) / 2  # (French words, English words)
        found.append({(int(i), int(j)) for j, i in zip(*np.nonzero(mean > threshold), strict=True)})
    return found


def measure_step(work: Path, step: str, text: dict[str, list[str]], gold: list[SentenceLinks]) -> dict:
    """The step trained in both directions (where it was not), then scored: grow-diag, soft symmetrization
    of the chosen readings (its threshold chosen on the first 100) and test BLEU."""
    runs = {src: train_step(work, step, src, tgt) for src, tgt in DIRECTIONS}
    pair = {src: measure_run(runs[src], src, text, gold) for src in runs}
    forward, reverse = joint_readings(pair, gold)
    weights = {src: found.forced.soft(found.chosen) for src, found in pair.items()}  # (target, source words)
    soft = {t: scored(soft_links(weights, t), gold) for t in SOFT_THRESHOLDS}
    threshold = min(SOFT_THRESHOLDS, key=lambda t: soft[t]["first 100"]["aer"])
    return {
        "grow-diag": scored(symmetrized(pair["en"].every[forward], pair["fr"].every[reverse]), gold),
        "soft": {"threshold": threshold, "scores": soft[threshold]},
        "bleu": test_bleu(runs),
    }


def steps_table(results: dict, eflomal: Scores) -> str:
    """Markdown: a row per step (AER, precision, recall on the 347; BLEU), eflomal beside them."""
    rows = []
    for step, found in results.items():
        hard, soft = found["grow-diag"]["347"], found["soft"]["scores"]["347"]
        soft_aer = f"{soft['aer']:.1f} ({found['soft']['threshold']})"
        bleu = bleus(found["bleu"])
        rows.append([step, *aer_precision_recall(hard), soft_aer, *aer_precision_recall(soft)[1:], bleu])
    rows.append(["eflomal, the teacher (grow-diag)", *aer_precision_recall(eflomal["347"]), "", "", "", ""])
    head = "step | grow-diag AER | precision | recall | soft AER (threshold) | precision | recall | test BLEU"
    return table(f"{head} en→fr / fr→en".split(" | "), rows)


def aer_precision_recall(found: dict[str, float]) -> list[str]:
    return [f"{found[key]:.1f}" for key in ("aer", "precision", "recall")]


def bleus(bleu: dict[str, float]) -> str:
    """Test BLEU en→fr / fr→en."""
    return " / ".join(f"{bleu[f'{s}-{t}']:.2f}" for s, t in DIRECTIONS)


SEED = ", seed "  # a step trained again with another seed: "STEP, seed N"


def seed_table(results: dict) -> str:
    """Markdown: for each step also trained with other seeds (STEP, seed N), the mean ± standard deviation
    over all its seeds of AER, precision and recall on the 347, AER on the first 100, and BLEU."""
    rows = []
    for step in results:
        seeds = [results[name] for name in results if name == step or name.startswith(step + SEED)]
        if SEED in step or len(seeds) < 2:
            continue
        hard = [found["grow-diag"]["347"] for found in seeds]
        cells = [spread([h[key] for h in hard]) for key in ("aer", "precision", "recall")]
        cells.append(spread([found["grow-diag"]["first 100"]["aer"] for found in seeds]))
        bleu = [spread([found["bleu"][f"{s}-{t}"] for found in seeds]) for s, t in DIRECTIONS]
        rows.append([f"{step} ({len(seeds)})", *cells, " / ".join(bleu)])
    head = "step (seeds) | grow-diag AER | precision | recall | AER first 100 | test BLEU en→fr / fr→en"
    return table(head.split(" | "), rows)


def steps(work: Path, names: list[str]) -> str:
    """--steps: the chosen guided Transformer trained again for each of `names` (of `CHANGES`), measured once
    (work/steps.json); the tables, then the BLEU of the plain Transformer (no guided alignment) trained on
    each training text (on the benchmark's own once: its runs)."""
    text = {lang: read_lines(work / "gold" / f"gold.{lang}") for lang in ("en", "fr")}
    gold, saved = read_links(work / "gold" / "gold.links"), Results(work / "steps.json")
    results = {s: saved.step("steps", s, lambda s=s: measure_step(work, s, text, gold)) for s in names}
    teacher = scored(linked(work / "eflomal" / "grow-diag.links")[-GOLD_PAIRS:], gold)
    lines = [steps_table(results, teacher), seed_table(results)]
    for n in sorted({copies_of(step) for step in names}):
        bleu = saved.step("unguided", f"gold text ×{n}", lambda n=n: unguided_bleu(work, n))
        lines.append(f"unguided Transformer, gold text ×{n}: test BLEU en→fr / fr→en {bleus(bleu)}")
    return "\n".join(lines)


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--work", type=Path, required=True, help="data, runs and results (kept for reruns)")
    parse.add_argument("--data", type=Path, default=DATA, help="the shared data (multi30k/, alignment/)")
    parse.add_argument("--figure", type=Path, help="also draw the layer × head figure into this PNG")
    parse.add_argument("--steps", nargs="*", choices=CHANGES, help="guided alignment's changes (default all)")
    args = parse.parse_args()
    ready(args.data, args.work)
    run_eflomal(args.work)
    if args.steps is not None:
        print(steps(args.work, args.steps or list(CHANGES)))
        return
    train_all(args.work)
    saved = args.work / "results.json"
    if not saved.exists():
        saved.write_text(json.dumps(measure(args.work, args.data), indent=1) + "\n")
    results = json.loads(saved.read_text())
    print(report(results))
    if args.figure is not None:
        figure(results, args.figure)


if __name__ == "__main__":
    main()
