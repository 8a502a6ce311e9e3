"""Which attention should a run trained without guided alignment align with? Every reading of each model
family scored as alignment and as tag placement, in one table (docs/alignment.md gives the method):

    taskset -c 0 env OMP_NUM_THREADS=1 python -m benchmarks.alignment_reading --work WORK --timing

WORK is alignment_bench.py's (its data, eflomal's links and, without --run, its three en→fr runs, trained when
absent); results are kept in WORK/reading.json by run name. --timing: seconds to translate the Hansards
sources without links, with search's and with the run's reading.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence

import torch

from benchmarks import alignment_bench, markup_bench
from benchmarks.common import fastest, table
from nmt.align.pharaoh import Link, SentenceLinks
from nmt.align.reading import Reading, attention_layout
from nmt.align.score import score_alignments
from nmt.config.sections import LINK_RULES
from nmt.decode.aligner import force
from nmt.decode.loading import load_trained
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator

TIMED = ("no links", "search's links", "the run's reading")  # the ways --timing translates


def placed(
    samples: Sequence[markup_bench.Sample],
    outputs: Sequence[str],
    links: Sequence[set[Link]],
    truth: Sequence[SentenceLinks],
) -> dict[str, int]:
    """Tags of `samples` placed on `outputs` by `links`: markup_bench's span scores, how many tags have no
    word the links link (`unlinked`: the placement puts them by position) and how many were placed empty."""
    pages = markup_bench.placed_pages(samples, outputs, links)
    unlinked = empty = 0
    for sample, page, linked in zip(samples, pages, links, strict=True):
        reader = markup_bench.read_tags(page)
        empty += sum(reader.word_span(f"t{k}") is None for k in range(len(sample.tags)))
        unlinked += sum(not any(tag.first <= i <= tag.last for i, _ in linked) for tag in sample.tags)
    return markup_bench.span_scores(samples, pages, truth) | {"unlinked": unlinked, "empty": empty}


def measure_run(
    run: TrainedRun,
    sets: dict[str, markup_bench.Pairs],
    samples: dict[str, list[markup_bench.Sample]],
    truths: dict[str, list[SentenceLinks]],
    translated: dict[str, list[str]],
    eflomal: dict[str, list[set[Link]]],
) -> dict[str, dict]:
    """Every reading of one run (each decoder layer's mean of heads, by each rule): AER where a set has human
    links, tags on the references and on the run's translations."""
    layers, _ = attention_layout(run.cfg)
    on_reference = {key: force(run, pairs.sources, pairs.references) for key, pairs in sets.items()}
    on_output = {key: force(run, pairs.sources, translated[key]) for key, pairs in sets.items()}
    results = {}
    for reading in (Reading(layer, None, rule) for layer in range(layers) for rule in LINK_RULES):
        entry: dict = {}
        for key, pairs in sets.items():
            links, of_translation = on_reference[key].links(reading), on_output[key].links(reading)
            if pairs.human is not None:
                entry["aer"] = {
                    split: 100 * score_alignments(links[part], pairs.human[part]).aer
                    for split, part in alignment_bench.SPLITS.items()
                    if pairs.human[part]  # a set of fewer pairs has only some of the splits
                }
            output_truth = markup_bench.as_links(eflomal[key])
            entry[key] = {
                "reference": placed(samples[key], pairs.references, links, truths[key]),
                "translation": placed(samples[key], translated[key], of_translation, output_truth),
            }
        last = " (last)" if reading.layer == layers - 1 > 0 else ""
        results[f"layer {reading.layer}{last}, {reading.rule}"] = entry
    return results


def measure(
    runs: dict[str, TrainedRun], sets: dict[str, markup_bench.Pairs], align: markup_bench.Aligner
) -> dict:
    """Every run's readings on every set; tags injected as markup_bench injects them, the tags' truth on a
    translation (and on a reference without human links) eflomal's links by `align`."""
    plain, on_reference, on_output = markup_bench.translated_and_aligned(runs, sets, align)
    truths = {key: pairs.human or markup_bench.as_links(on_reference[key]) for key, pairs in sets.items()}
    samples = markup_bench.injected(sets)
    return {
        name: measure_run(run, sets, samples, truths, plain[name], on_output[name])
        for name, run in runs.items()
    }


def timing_report(runs: dict[str, TrainedRun], sources: Sequence[str]) -> str:
    """Seconds to translate `sources` (greedy, beam 5) each way of TIMED, the best of three after a warm-up,
    in Markdown ("(search's)" where the run's reading is search's own)."""
    rows = []
    for (name, run), beam in itertools.product(runs.items(), (1, 5)):
        reading = TorchTranslator.of_run(run).with_search(beam_size=beam)
        searching = copy.copy(reading)
        searching.reading = None  # search's own links (the last layer's)
        ways = dict(zip(TIMED, ((reading, False), (searching, True), (reading, True)), strict=True))
        if reading.reading is None:
            del ways["the run's reading"]
        ids = reading.encode(sources)
        cells = (f"{best_of_three(*ways[way], ids):.2f} s" if way in ways else "(search's)" for way in TIMED)
        rows.append([name, f"beam {beam}", *cells])
    return table(["model", "search", *TIMED], rows, left=2) + "\n"


def best_of_three(translator: TorchTranslator, links: bool, ids: list[list[int]]) -> float:
    translator.search(ids[:20], alignments=links)  # warm-up
    return fastest(lambda: translator.decode(ids, translator.search(ids, alignments=links)), 3)[1]


def report(results: dict) -> str:
    """The table in Markdown: per run and reading, AER and the tags on each set."""
    sets = [key for key in next(iter(next(iter(results.values())).values())) if key != "aer"]
    places = [(key, where) for key in sets for where in ("reference", "translation")]
    head = ["model", "reading", *(f"AER {split}" for split in alignment_bench.SPLITS)]
    head += [f"{key}: {where}, exact / overlap ≥ ½ / unlinked / empty" for key, where in places]
    rows = []
    for run_name, found in results.items():
        for reading, entry in found.items():
            aer = entry.get("aer") or {}
            cells = [f"{aer[split]:.1f}" if split in aer else "–" for split in alignment_bench.SPLITS]
            for key, where in places:
                spans = entry[key][where]
                shares = [(spans[n], spans["projectable"]) for n in ("exact", "overlap")]
                shares += [(spans[n], spans["tags"]) for n in ("unlinked", "empty")]
                cells.append(" / ".join(markup_bench.percent(part, whole) for part, whole in shares))
            rows.append([run_name, reading, *cells])
    return table(head, rows, left=2) + "\n"


def main() -> None:
    parse = markup_bench.command_line(__doc__)
    parse.add_argument("--timing", action="store_true", help="also time translating with and without links")
    args = parse.parse_args()
    alignment_bench.ready(args.data, args.work, "alignment reading benchmark")
    paths = markup_bench.named_runs(args.run)
    if not paths:
        alignment_bench.run_eflomal(args.work)
        paths = {
            kind.name: alignment_bench.train(args.work, kind, "en", "fr") for kind in alignment_bench.KINDS
        }
    sets, align = markup_bench.load_sets(args.work, args.sentences), markup_bench.eflomal_aligner(args.work)
    results = markup_bench.kept(args.work / "reading.json", paths, lambda runs: measure(runs, sets, align))
    print(report(results))
    if args.timing:
        runs = {name: load_trained([path], torch.device("cpu")) for name, path in paths.items()}
        print(timing_report(runs, sets[markup_bench.HANSARDS].sources))


if __name__ == "__main__":
    main()
