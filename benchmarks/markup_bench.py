"""Tags through a translation: are they all kept, and on the right words? Three placements side by side
(docs/serving.md, "Tags kept and placed, measured", which gives the method).

    taskset -c 0 env OMP_NUM_THREADS=1 python -m benchmarks.markup_bench --work /tmp/nmt-align-bench \
        --run NAME=RUN_DIR [--run NAME=RUN_DIR …]

--work is benchmarks/alignment_bench.py's (its data and eflomal's links reused, made when absent); each en→fr
run is measured once (work/markup.json, by name).
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks import alignment_bench
from benchmarks.common import parser, table
from nmt.align.eflomal import align_with_eflomal
from nmt.align.pharaoh import Link, SentenceLinks, read_lines, read_links
from nmt.align.reading import default_reading
from nmt.decode.aligner import force
from nmt.decode.loading import load_trained
from nmt.decode.markup import translate_page, translated_page
from nmt.decode.trained_run import TrainedRun
from nmt.decode.translator import TorchTranslator
from nmt.evaluate.scores import score
from tests.markup_checks import keeps_every_tag, read_tags

SEED = 1
NESTED = 0.35  # the chance that a sentence's next tag goes inside one of its tags
START_TAGS = {  # each injected tag's start tag, `{k}` its number in the sentence
    "b": '<b id="t{k}">',
    "i": '<i id="t{k}">',
    "a": '<a href="/page/{k}" id="t{k}">',
    "span": '<span class="note" id="t{k}">',
}
HANSARDS, MULTI30K = "Hansards (447, human links)", "Multi30k test2016 (eflomal's links)"
PLACEMENTS = ("nmt (attention's word links)", "text nodes (Argos Translate's way)", "eflomal's links")
CEILING = "the human sure links (the measure's ceiling)"  # where a set has human links
Aligner = Callable[[list[tuple[list[str], list[str]]]], list[list[set[Link]]]]  # pair lists → their links


@dataclass(frozen=True)
class Tag:
    """An injected tag: its name and the source words it wraps, `first` to `last`."""

    name: str
    first: int
    last: int


@dataclass(frozen=True)
class Sample:
    """A source sentence with tags injected: the page and its tags (tag k has id `tk`)."""

    page: str
    tags: list[Tag]


def inject(words: Sequence[str], rng: random.Random) -> Sample:
    """One to three tags around random spans of 1 to 4 of `words`; a span lies inside another or apart
    from it, never across or on the same words."""
    tags: list[Tag] = []
    for _ in range(rng.randint(1, 3)):
        for _ in range(20):  # tries for a span that fits
            parent = rng.choice(tags) if tags and rng.random() < NESTED else None
            low, high = (parent.first, parent.last) if parent else (0, len(words) - 1)
            length = rng.randint(1, min(4, high - low + 1))
            first = rng.randint(low, high - length + 1)
            tag = Tag(rng.choice(list(START_TAGS)), first, first + length - 1)
            if all(_nests(tag, other) for other in tags):
                tags.append(tag)
                break
    return Sample(render(words, tags), tags)


def _nests(one: Tag, other: Tag) -> bool:
    """Whether two spans are apart or one inside the other (not the same words)."""
    spans = {(one.first, one.last), (other.first, other.last)}
    union = (min(one.first, other.first), max(one.last, other.last))
    return one.last < other.first or other.last < one.first or (len(spans) == 2 and union in spans)


def render(words: Sequence[str], tags: Sequence[Tag]) -> str:
    """The words, escaped, one space apart, with the tags around their spans (outer ones outside)."""
    written = []
    for i, word in enumerate(words):
        opening = sorted((k for k, t in enumerate(tags) if t.first == i), key=lambda k: -tags[k].last)
        closing = sorted((k for k, t in enumerate(tags) if t.last == i), key=lambda k: -tags[k].first)
        starts = "".join(START_TAGS[tags[k].name].format(k=k) for k in opening)
        ends = "".join(f"</{tags[k].name}>" for k in closing)
        written.append(starts + html.escape(word, quote=False) + ends)
    return " ".join(written)


def projected(tag: Tag, links: SentenceLinks) -> tuple[int, int] | None:
    """The target words the tag's words are linked to, first to last: by sure links, or by possible ones
    when they have no sure link; None when they have none."""
    for kind in (links.sure, links.possible):
        targets = [j for i, j in kind if tag.first <= i <= tag.last]
        if targets:
            return min(targets), max(targets)
    return None


def pages_of(samples: Sequence[Sample], write: Callable[[str], str]) -> list[str]:
    """The samples as one page, a `<p>` a line, written by `write`; each line again, without its `p` tags."""
    lines = write("".join(f"<p>{sample.page}</p>\n" for sample in samples)).splitlines()
    if len(lines) != len(samples):
        raise RuntimeError(f"{len(samples)} paragraphs written as {len(lines)} lines")
    return [line.removeprefix("<p>").removesuffix("</p>") for line in lines]


def placed_pages(samples: Sequence[Sample], outputs: Sequence[str], links: Sequence[set[Link]]) -> list[str]:
    """Each sample's page written on its output (a translation or the reference) with its tags placed by
    nmt's placement through `links` (source word, output word)."""
    given: list[tuple[str, Sequence[Link]]] = [
        (out, sorted(found)) for out, found in zip(outputs, links, strict=True)
    ]
    return pages_of(samples, lambda page: translate_page(page, lambda lines: given))


def text_node_pages(pages: Sequence[str], translate: Callable[[list[str]], list[str]]) -> list[str]:
    """Each page with each text between its tags translated alone (all of them in one call of
    `translate`), its whitespace and tags kept as they are."""
    split = [re.split(r"(<[^>]*>)", page) for page in pages]  # text, tag, text, … (tags hold no `>`)
    texts = [html.unescape(piece).strip() for parts in split for piece in parts[::2] if piece.strip()]
    found = iter(translate(texts) if texts else [])
    written = []
    for parts in split:
        for k in range(0, len(parts), 2):
            if parts[k].strip():
                lead, trail = re.match(r"\s*", parts[k])[0], re.search(r"\s*$", parts[k])[0]  # type: ignore[index]
                parts[k] = lead + html.escape(next(found), quote=False) + trail
        written.append("".join(parts))
    return written


def span_scores(samples: Sequence[Sample], pages: Sequence[str], truth: Sequence[SentenceLinks]) -> dict:
    """How many tags with a projected span were placed on exactly it, and overlapping it by at least half
    their union."""
    exact = overlap = projectable = 0
    for sample, page, links in zip(samples, pages, truth, strict=True):
        reader = read_tags(page)
        for k, tag in enumerate(sample.tags):
            want = projected(tag, links)
            if want is None:
                continue
            projectable += 1
            got = reader.word_span(f"t{k}")
            if got is None:
                continue
            common = min(got[1], want[1]) - max(got[0], want[0]) + 1
            union = max(got[1], want[1]) - min(got[0], want[0]) + 1
            exact += got == want
            overlap += 2 * max(common, 0) >= union
    tags = sum(len(sample.tags) for sample in samples)
    return {"tags": tags, "projectable": projectable, "exact": exact, "overlap": overlap}


@dataclass(frozen=True)
class Pairs:
    """A set: source and reference sentences (words one space apart), and the human links (None: none)."""

    sources: list[str]
    references: list[str]
    human: list[SentenceLinks] | None


def as_links(found: Sequence[set[Link]]) -> list[SentenceLinks]:
    return [SentenceLinks(frozenset(line), frozenset(line)) for line in found]


def measure_set(
    run: TrainedRun, pairs: Pairs, samples: list[Sample], plain: list[str], eflomal: list[list[set[Link]]]
) -> dict:
    """Every figure of one run on one set, `eflomal` holding its links of the (source, reference) and the
    (source, `plain` translation) pairs. The set's human links project the tags (where it has none, eflomal's
    links of the reference) and also place them by their sure links alone (`CEILING`): possible links project
    the tags whose words have no sure link, so even the human's own sure links miss some spans."""
    references, translator = pairs.references, TorchTranslator.of_run(run)
    truth = pairs.human or as_links(eflomal[0])
    reading = default_reading(run.cfg, None, None, str(run.directory.path))
    attention = force(run, pairs.sources, references).links(reading)  # the links `nmt align` reads
    pages = {
        PLACEMENTS[0]: pages_of(samples, lambda page: translated_page(translator, page)),
        PLACEMENTS[1]: text_node_pages([s.page for s in samples], translator.translate),
        PLACEMENTS[2]: placed_pages(samples, plain, eflomal[1]),
    }
    on_reference = {
        PLACEMENTS[0]: placed_pages(samples, references, attention),
        PLACEMENTS[2]: placed_pages(samples, references, eflomal[0]),
    }
    plain_bleu = score(plain, list(references)).bleu
    results = {}
    for placement, written in pages.items():
        reference = on_reference.get(placement)
        stripped = [" ".join(read_tags(page).words) for page in written]
        results[placement] = well_formed(samples, *(w for w in (written, reference) if w)) | {
            "bleu_stripped": score(stripped, list(references)).bleu,
            "bleu_plain": plain_bleu,
            "on_reference": span_scores(samples, reference, truth) if reference else None,
        }
    if pairs.human:
        written = placed_pages(samples, references, [set(links.sure) for links in truth])
        results[CEILING] = well_formed(samples, written) | {
            "bleu_stripped": None,
            "bleu_plain": None,
            "on_reference": span_scores(samples, written, truth),
        }
    return results


def well_formed(samples: Sequence[Sample], *written: list[str]) -> dict[str, int]:
    """How many pages were written, and how many keep every tag of their sample, well-formed."""
    found = [keeps_every_tag(s.page, p) for pages in written for s, p in zip(samples, pages, strict=True)]
    return {"pages": len(found), "kept": sum(found)}


def eflomal_aligner(work: Path) -> Aligner:
    """Links of lists of pairs by one eflomal run (alignment_bench's options, grow-diag-final-and) over the
    training text and all of them, so that short lists are aligned with the corpus' statistics."""

    def align(lists: list[tuple[list[str], list[str]]]) -> list[list[set[Link]]]:
        en, fr = (read_lines(work / "data" / f"train.{lang}") for lang in ("en", "fr"))
        for src, tgt in lists:
            en, fr = en + src, fr + tgt
        found = align_with_eflomal(en, fr, "grow-diag-final-and", alignment_bench.EFLOMAL_OPTIONS).symmetrized
        ends = [len(found) - sum(len(src) for src, _ in lists[k:]) for k in range(len(lists) + 1)]
        return [found[start:end] for start, end in itertools.pairwise(ends)]

    return align


def injected(sets: dict[str, Pairs]) -> dict[str, list[Sample]]:
    """Each set's sources with tags injected, seeded with `SEED`: the same pages for every run measured."""
    rng = random.Random(SEED)
    return {name: [inject(s.split(), rng) for s in pairs.sources] for name, pairs in sets.items()}


def translated_and_aligned(runs: dict[str, TrainedRun], sets: dict[str, Pairs], align: Aligner) -> tuple:
    """Each run's translations of each set's sources, by run and set; the links by `align` (one call) of each
    set's (source, reference) pairs, by set; and those of each run's (source, translation) pairs."""
    plain = {
        name: {key: TorchTranslator.of_run(run).translate(pairs.sources) for key, pairs in sets.items()}
        for name, run in runs.items()
    }
    lists = [(pairs.sources, pairs.references) for pairs in sets.values()]
    lists += [(sets[key].sources, found[key]) for found in plain.values() for key in sets]
    links = iter(align(lists))
    on_reference = {key: next(links) for key in sets}
    return plain, on_reference, {name: {key: next(links) for key in sets} for name in runs}


def measure(runs: dict[str, TrainedRun], sets: dict[str, Pairs], align: Aligner) -> dict:
    """Every run on every set, by run and set; tags injected with `SEED`, the same for every run."""
    samples = injected(sets)
    plain, on_reference, on_output = translated_and_aligned(runs, sets, align)
    results: dict = {}
    for (name, run), (key, pairs) in itertools.product(runs.items(), sets.items()):
        eflomal = [on_reference[key], on_output[name][key]]
        results.setdefault(name, {})[key] = measure_set(run, pairs, samples[key], plain[name][key], eflomal)
    return results


def load_sets(work: Path, sentences: int) -> dict[str, Pairs]:
    """The gold pairs with their human links, and the first `sentences` Multi30k test2016 pairs."""
    gold = work / "gold"
    human = read_links(gold / "gold.links")
    m30k = [read_lines(work / "data" / f"test2016.{lang}")[:sentences] for lang in ("en", "fr")]
    return {
        HANSARDS: Pairs(read_lines(gold / "gold.en"), read_lines(gold / "gold.fr"), human),
        MULTI30K: Pairs(m30k[0], m30k[1], None),
    }


def named_runs(given: Sequence[str]) -> dict[str, Path]:
    """The runs of --run's NAME=RUN_DIR values, by name."""
    return {name: Path(path) for name, path in (one.split("=", 1) for one in given)}


def kept(saved: Path, paths: dict[str, Path], measure: Callable[[dict[str, TrainedRun]], dict]) -> dict:
    """The results of the runs at `paths`, by name: those `saved` holds are kept, the others loaded,
    measured and added to it."""
    results = json.loads(saved.read_text()) if saved.exists() else {}
    missing = {name: path for name, path in paths.items() if name not in results}
    if missing:
        results |= measure(
            {name: load_trained([path], torch.device("cpu")) for name, path in missing.items()}
        )
        saved.write_text(json.dumps(results, indent=1) + "\n")
    return {name: results[name] for name in paths}


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}" if whole else "–"


def placement_cells(name: str, placement: str, found: dict) -> list[str]:
    """A placement's cells: pages keeping every tag, tags on their projected span, BLEU stripped and plain."""
    spans, stripped, plain = found["on_reference"], found["bleu_stripped"], found["bleu_plain"]
    on_span = ["n/a", "n/a"]
    if spans is not None:
        on_span = [percent(spans[key], spans["projectable"]) for key in ("exact", "overlap")]
    if spans is not None and name == MULTI30K and placement == PLACEMENTS[2]:
        on_span = ["(its own links)"] * 2
    bleu = ["n/a"] * 3 if plain is None else [f"{stripped:.2f}", f"{plain:.2f}", f"{stripped - plain:+.2f}"]
    return [f"{found['kept']} / {found['pages']}", *on_span, *bleu]


def report(results: dict) -> str:
    """The table in Markdown: per set, run and placement; then the tags injected in each set."""
    rows = [
        [name, run_name, placement, *placement_cells(name, placement, found)]
        for run_name, sets in results.items()
        for name, placements in sets.items()
        for placement, found in placements.items()
    ]
    head = "set | model | placement | well-formed, every tag kept | tags on the projected span: exact | "
    head += "overlap ≥ ½ | BLEU, tags stripped | BLEU, plain | difference"
    first = next(iter(results.values())).items()
    spans = [(name, placements[PLACEMENTS[0]]["on_reference"]) for name, placements in first]
    counts = "; ".join(
        f"{name} {s['tags']:,} ({s['projectable']:,} with a projected span)" for name, s in spans
    )
    return f"{table(head.split(' | '), rows, left=3)}\n\nTags injected: {counts}.\n"


def command_line(doc: str | None) -> argparse.ArgumentParser:
    """The options this benchmark and benchmarks/alignment_reading.py share: alignment_bench's --work and
    --data, the Multi30k pairs measured, and the runs."""
    parse = parser(doc)
    parse.add_argument("--work", type=Path, required=True, help="alignment_bench's work folder (kept)")
    parse.add_argument("--data", type=Path, default=alignment_bench.DATA, help="the shared data")
    parse.add_argument("--sentences", type=int, default=500, help="Multi30k test2016 pairs measured")
    run = "an en→fr run to measure as NAME (repeat)"
    parse.add_argument("--run", action="append", default=[], metavar="NAME=RUN_DIR", help=run)
    return parse


def main() -> None:
    parse = command_line(__doc__)
    args = parse.parse_args()
    alignment_bench.ready(args.data, args.work, "markup benchmark")
    if not args.run:
        parse.error("no run to measure: give --run NAME=RUN_DIR, once a run")
    sets, align = load_sets(args.work, args.sentences), eflomal_aligner(args.work)
    results = kept(args.work / "markup.json", named_runs(args.run), lambda runs: measure(runs, sets, align))
    print(report(results))


if __name__ == "__main__":
    main()
