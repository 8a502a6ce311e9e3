"""Running text: paragraphs translated whole, sentence by sentence and as HTML pages, beside the same
sentences one per line; and the sentence splitters on those paragraphs' boundaries (docs/running-text.md).

    python -m benchmarks.running_text --run RUN_DIR --data DIR

DIR holds Multi30k's test2016.{de,en,fr,cs}; RUN_DIR is a de→en run.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import itertools
import random
import re
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import sacrebleu
import torch

from benchmarks import markup_bench
from benchmarks.common import fastest, machine, parser, table
from nmt.data.sentences import Span, sentence_spans
from nmt.decode.loading import load_trained
from nmt.decode.markup import read_page, translated_page
from nmt.decode.running_text import segment, translate_paragraphs
from nmt.decode.translator import TorchTranslator, Translator
from tests.markup_checks import keeps_every_tag, read_tags

LANGUAGES = ("de", "en", "fr", "cs")
LOW, HIGH, SEED = 2, 5, 0  # the sentences of a paragraph: 2 to 5, drawn with seed 0
REPEATS = 3  # runs of each way of translating (the fastest counts)
FINAL = re.compile(r"[.!?…][\"'”’“‘»)\]]*$")
HARD_CASES = [  # (language, the sentences of a paragraph as a reader takes them; the paragraph: them joined)
    ("de", "Das kostet z. B. 3,50 Euro.", "Dann gehen wir."),
    ("de", "Am 3. Mai war es kalt.", "Es schneite."),
    ("de", "Dr. Müller kam um 9 Uhr.", "Er war müde."),
    ("de", "Er fragte: „Kommst du?“", "Sie nickte."),
    ("de", "Der Preis stieg um 2.5 Prozent.", "Das ist viel."),
    ("de", "Hunde, Katzen usw. sind Tiere.", "Vögel auch."),
    ("de", "Er wohnt in der Hauptstr. 5 in Berlin.", "Sie nicht."),
    ("en", "Mr. Smith came at 5 p.m. yesterday.", "He was late."),
    ("en", "It costs $3.50 today.", "It was $4.00 before."),
    ("en", 'She said, "Stop!"', "Then she left."),
    ("en", "He finished 1st.", "Then he rested."),
    ("en", "I met Dr. Jones, i.e. the dentist.", "We talked."),
    ("en", "The U.S. economy grew.", "Prices rose."),
    ("en", "Wait...", "What happened?", "Nobody knew."),
    ("fr", "M. Dupont est arrivé.", "Il était tard."),
    ("fr", "Il a dit : « Bonjour ! »", "Puis il est parti."),
    ("fr", "Le prix est de 3,5 euros.", "C'est cher."),
    ("fr", "C'est le 1er mai.", "Il fait beau."),
    ("fr", "Il habite au 12, av. Foch.", "Elle non."),
    ("fr", "Quelle heure est-il ?", "Il est 10 h."),
    ("cs", "Např. pes běží.", "Kočka spí."),
    ("cs", "Dne 3. května pršelo.", "Bylo zima."),
    ("cs", "Cena je 3,50 Kč.", "To je levné."),
    ("cs", "Řekl: „Pojď!“", "Pak odešel."),
    ("cs", "Ing. Novák přišel.", "Byl unavený."),
    ("cs", "Bydlí v ul. Národní 5.", "Je tam hezky."),
]
Splitter = Callable[[str, str], list[str]]  # (paragraph, language) → its sentences


@dataclass(frozen=True)
class Paragraphs:
    """Consecutive sentences grouped into paragraphs: each group's line numbers."""

    groups: list[list[int]]

    @classmethod
    def drawn(cls, count: int, low: int, high: int, seed: int) -> Paragraphs:
        rng, groups, at = random.Random(seed), [], 0
        while at < count:
            size = min(rng.randint(low, high), count - at)
            groups.append(list(range(at, at + size)))
            at += size
        return cls(groups)

    def texts(self, sentences: Sequence[str]) -> list[str]:
        return [" ".join(sentences[i] for i in group) for group in self.groups]

    def boundaries(self, sentences: Sequence[str], words: bool = False) -> list[set[int]]:
        """Where each paragraph's sentences but the last end: the character offset after each, or (`words`)
        the number of its last word, from 0."""
        sizes = [len(s.split()) if words else len(s) + 1 for s in sentences]
        return [
            {end - 1 for end in itertools.accumulate(sizes[i] for i in group[:-1])} for group in self.groups
        ]


def punctuated(sentence: str) -> str:
    return sentence if FINAL.search(sentence) else f"{sentence}."


def splitters() -> dict[str, Splitter]:
    """nmt's rules, and the libraries installed of sentencex and pysbd (pysbd has no Czech)."""
    found: dict[str, Splitter] = {
        "nmt rules": lambda text, lang: [text[a:b] for a, b in sentence_spans(text, lang)]
    }
    if importlib.util.find_spec("sentencex"):
        import sentencex

        name = f"sentencex {importlib.metadata.version('sentencex')}"
        found[name] = lambda text, lang: list(sentencex.segment(lang, text))
    if importlib.util.find_spec("pysbd"):
        import pysbd

        segmenter = functools.cache(lambda lang: pysbd.Segmenter(language=lang, clean=False))

        def pysbd_split(text: str, lang: str) -> list[str]:
            if lang == "cs":
                raise LookupError("pysbd has no Czech")
            return list(segmenter(lang).segment(text))

        found[f"pysbd {importlib.metadata.version('pysbd')}"] = pysbd_split
    return found


def spans_of(text: str, sentences: list[str]) -> list[Span]:
    """Where each sentence a splitter returned lies in `text`, in order (white space around it left out)."""
    spans, at = [], 0
    for sentence in filter(None, (s.strip() for s in sentences)):
        start = text.find(sentence, at)
        if start < 0:
            raise ValueError(f"a splitter changed the text: {sentence[:40]!r}")
        at = start + len(sentence)
        spans.append((start, at))
    return spans


def boundary_accuracy(split: Splitter, lang: str, texts: list[str], known: list[set[int]]) -> float:
    """Boundaries found ÷ (known boundaries + wrong splits), in percent."""
    right = wrong = total = 0
    for text, ends in zip(texts, known, strict=True):
        found = {end for _, end in spans_of(text, split(text, lang))[:-1]}
        right, wrong, total = right + len(found & ends), wrong + len(found - ends), total + len(ends)
    return 100 * right / (total + wrong)


def splitter_rows(data: Path, paragraphs: Paragraphs) -> list[list[object]]:
    """Each splitter on each language: the paragraphs' boundaries found, with full stops added and as written,
    the hard cases split right, and paragraphs a second."""
    rows: list[list[object]] = []
    for (name, split), lang in itertools.product(splitters().items(), LANGUAGES):
        written = (data / f"test2016.{lang}").read_text(encoding="utf-8").splitlines()
        full = [punctuated(s) for s in written]
        try:
            split("Warm up. Now.", lang)
        except LookupError:
            rows.append([name, lang, *["n/a"] * 5])
            continue
        texts, known = paragraphs.texts(full), paragraphs.boundaries(full)
        accuracy, seconds = fastest(functools.partial(boundary_accuracy, split, lang, texts, known), 1)
        as_written = boundary_accuracy(split, lang, paragraphs.texts(written), paragraphs.boundaries(written))
        cases = [sentences for found, *sentences in HARD_CASES if found == lang]
        right = sum([s.strip() for s in split(" ".join(c), lang) if s.strip()] == c for c in cases)
        bare = sum(not FINAL.search(s) for s in written)
        cells = [f"{accuracy:.2f}%", f"{as_written:.2f}% ({bare} unpunctuated)", f"{right} / {len(cases)}"]
        rows.append([name, lang, sum(map(len, known)), *cells, f"{len(texts) / seconds:,.0f}"])
    return rows


@dataclass
class Translated:
    """One way of translating the paragraphs: each paragraph's translation, the sentences lacking (the guard's
    count), and pages well-formed with every tag (html only)."""

    texts: list[str]
    lacking: int
    well_formed: str = "n/a"


class Recording:
    """A translator whose answers to `translated` are kept (the pieces a page's blocks were translated in)."""

    def __init__(self, translator: Translator) -> None:
        self.translator = translator
        self.found: list = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.translator, name)

    def translated(self, texts: Sequence[str], alignments: bool = False) -> list:
        self.found = self.translator.translated(texts, alignments)
        return self.found


def tagged_page(sentences: list[str], paragraphs: Paragraphs) -> tuple[str, int]:
    """The paragraphs as one page, a `<p>` each, with markup_bench's tags (1 to 3 on spans of 1 to 4 words,
    nested or apart); and how many tags cross a sentence boundary."""
    rng, blocks, crossing = random.Random(SEED), [], 0
    last_words = paragraphs.boundaries(sentences, words=True)
    for text, ends in zip(paragraphs.texts(sentences), last_words, strict=True):
        sample = markup_bench.inject(text.split(), rng)
        crossing += sum(any(tag.first <= end < tag.last for end in ends) for tag in sample.tags)
        blocks.append(f"<p>{sample.page}</p>")
    return "<html><body>\n" + "\n".join(blocks) + "\n</body></html>", crossing


def translations(
    translator: Translator, sentences: list[str], paragraphs: Paragraphs
) -> dict[str, tuple[Translated, float]]:
    """Each way of translating the paragraphs and the seconds of its fastest run, after a warm-up."""
    texts = paragraphs.texts(sentences)
    page, crossing = tagged_page(sentences, paragraphs)

    def one_per_line() -> Translated:
        found = translator.translate(sentences)
        return Translated(paragraphs.texts(found), sum(not sentence_spans(t, "en") for t in found))

    def paragraph_by_paragraph(split: bool) -> Translated:
        found = translate_paragraphs(translator, texts, split)
        return Translated([p.joined.best.text for p in found], sum(p.dropped for p in found))

    def html() -> Translated:
        recording = Recording(translator)
        written = translated_page(recording, page)  # type: ignore[arg-type]
        whole = keeps_every_tag(page, written)
        blocks = [" ".join(read_tags(b).words) for b in re.findall(r"<p>(.*?)</p>", written, re.DOTALL)]
        pieces = segment(read_page(page).lines, translator, split=True).translations(recording.found, "en")
        well_formed = f"{int(whole)} / 1 page ({crossing} tags across)"
        return Translated(blocks, sum(p.dropped for p in pieces), well_formed)

    ways = {
        "one sentence a line": one_per_line,
        "each paragraph whole (one line)": lambda: paragraph_by_paragraph(False),
        "each paragraph sentence by sentence (text)": lambda: paragraph_by_paragraph(True),
        "each paragraph sentence by sentence (html, inline tags)": html,
    }
    for work in ways.values():
        work()  # warm-up
    return {name: fastest(work, REPEATS) for name, work in ways.items()}


def main() -> None:
    parse = parser(__doc__)
    parse.add_argument("--run", type=Path, required=True, help="a de→en run directory")
    parse.add_argument("--data", type=Path, required=True, help="the folder of test2016.{de,en,fr,cs}")
    parse.add_argument("--sentences", type=int, default=0, help="the first N sentences only (0: all)")
    args = parse.parse_args()
    read = {
        lang: (args.data / f"test2016.{lang}").read_text(encoding="utf-8").splitlines()
        for lang in ("de", "en")
    }
    count = args.sentences or len(read["de"])
    paragraphs = Paragraphs.drawn(count, LOW, HIGH, SEED)
    print(f"{len(paragraphs.groups)} paragraphs of {LOW} to {HIGH} of the first {count} test2016 sentences")
    print(f"machine: {machine('torch', 'sacrebleu')}; {torch.get_num_threads()} torch threads\n")
    head = ["splitter", "language", "boundaries", "found (full stops added)", "found (as written)"]
    rows = splitter_rows(args.data, Paragraphs.drawn(len(read["de"]), LOW, HIGH, SEED))
    print(table([*head, "hard cases", "paragraphs/s"], rows, left=2))
    translator = TorchTranslator.of_run(load_trained([args.run], torch.device("cpu")))
    found = translations(translator, [punctuated(s) for s in read["de"][:count]], paragraphs)
    references = [paragraphs.texts(read["en"][:count])]
    base, base_seconds = found["one sentence a line"]
    rows = []
    base_bleu = sacrebleu.corpus_bleu(base.texts, references).score
    print(f"\nbeam {translator.settings.beam_size}, batches within {translator.settings.batch_tokens} tokens")
    for name, (result, seconds) in found.items():
        bleu = sacrebleu.corpus_bleu(result.texts, references).score
        cells = [f"{bleu:.2f}", f"{bleu - base_bleu:+.2f}", f"{result.lacking} of {count}"]
        speed = [f"{count / seconds:.1f}", f"{base_seconds / seconds:.2f}×"]
        rows.append([name, *cells, result.well_formed, *speed])
    head = ["de→en", "BLEU", "vs one a line", "sentences lacking", "well-formed, every tag", "sentences/s"]
    print(table([*head, "vs one a line"], rows))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory {peak:.0f} MiB")


if __name__ == "__main__":
    main()
