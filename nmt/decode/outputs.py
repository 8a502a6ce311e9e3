"""What `nmt translate` reads (`read_input`: a file or standard input) and writes: streams of lines translated
a chunk at a time, as plain text, Moses-style n-best lines or JSON lines, each translation with its word
alignment when asked (` ||| i-j …` as fairseq and OpenNMT-py append it: source word i, output word j, from 0);
each line sentence by sentence where asked (nmt/decode/running_text.py), and its sentences counted in the
source and the translation: JSON lines say both, and the log says how many lines' translations hold fewer."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Literal

from nmt.align.pharaoh import format_links
from nmt.data.corpus import decode_lines, line_chunks
from nmt.decode.decoded import DecodedHypothesis
from nmt.decode.languages import Translates
from nmt.decode.running_text import TranslatedParagraph, translate_paragraphs
from nmt.errors import UserError

log = logging.getLogger(__name__)

CHUNK_LINES = 10_000  # lines read, sorted by length and translated at a time
BAD_LINE_HINT = "pass --skip-bad-lines to translate such lines as empty ones"
OutputFormat = Literal["text", "moses", "jsonl"]


@contextlib.contextmanager
def read_input(path: Path | None) -> Iterator[tuple[BinaryIO, str, bool]]:
    """The bytes to translate (a file, or stdin), their name for errors, and whether they come from a terminal
    (then each line is answered as soon as it is entered); a UserError where they cannot be read."""
    if path is None:
        if sys.stdin is None:  # closed, as under cron with <&-
            raise UserError("standard input is closed; pass --input FILE")
        yield sys.stdin.buffer, "standard input", sys.stdin.isatty()
        return
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}") from err
    with handle:
        yield handle, str(path), False


def format_translations(
    first: int, translated: list[TranslatedParagraph], style: OutputFormat, alignments: bool = False
) -> str:
    """Output lines for input lines `first`, `first + 1`, … (0-based): `text` is the best translation alone;
    `moses` is one `i ||| translation ||| score` line per hypothesis, best first; `jsonl` is one
    `{"line": i, "hypotheses": [{"text": …, "score": …, "mean_log_prob": …, "suspect": […]}, …],
    (with a glossary translated by constrained search, each hypothesis' "unmet_terms": […] too)
    "source_sentences": n, "translated_sentences": m}` object per input line (m < n: the best translation
    lacks a sentence). With `alignments` each translation's links follow as ` ||| 0-0 1-2` (jsonl: an
    `"alignment": [[0, 0], [1, 2]]` field), but in `text` an empty translation (a blank line's, which has no
    links) stays an empty line."""
    lines = []
    for i, paragraph in enumerate(translated, start=first):
        line = paragraph.joined
        if style == "text":
            lines.append(line.best.text and line.best.text + _links(line.best, alignments))
        elif style == "moses":
            lines.extend(
                f"{i} ||| {h.text} ||| {h.score:.4f}{_links(h, alignments)}" for h in line.hypotheses
            )
        else:
            found = [_hypothesis(h, alignments) for h in line.hypotheses]
            counts = {"source_sentences": paragraph.source_sentences}
            counts["translated_sentences"] = paragraph.translated_sentences
            lines.append(json.dumps({"line": i, "hypotheses": found, **counts}, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def _links(translation: DecodedHypothesis, alignments: bool) -> str:
    """` ||| i-j …` with `alignments`, else nothing."""
    return f" ||| {format_links(translation.alignment or [])}" if alignments else ""


def _hypothesis(translation: DecodedHypothesis, alignments: bool) -> dict[str, object]:
    """A hypothesis as a JSON line holds it: its text, score, mean log-probability per token and what makes it
    suspect (nmt/decode/confidence.py), and its word links when asked."""
    found: dict[str, object] = {"text": translation.text, "score": round(translation.score, 4)}
    if translation.mean_log_prob is not None:
        found["mean_log_prob"] = round(translation.mean_log_prob, 4)
    found["suspect"] = list(translation.suspect)
    if translation.unmet_terms is not None:
        found["unmet_terms"] = list(translation.unmet_terms)
    if alignments:
        found["alignment"] = [list(link) for link in translation.alignment or []]
    return found


def stream_translations(
    translator: Translates,
    source: BinaryIO,
    name: str,
    out: BinaryIO,
    skip_bad_lines: bool = False,
    interactive: bool = False,
    style: OutputFormat = "text",
    alignments: bool = False,
    split: bool = False,
) -> int:
    """Translate the lines of `source` (called `name` in errors) into `out` in the same order, formatted as
    `style` (`format_translations`; with word links when `alignments`), each line sentence by sentence with
    `split`, `CHUNK_LINES` at a time (each line as soon as it is read when `interactive`), flushing `out`
    after every chunk: memory does not grow with the input. Logs how many lines' translations hold fewer
    sentences than their source, and (under constrained search) how many lack a glossary's target term.
    Returns how many lines were not valid UTF-8 and were translated as empty lines (with `skip_bad_lines`;
    otherwise the first one raises UserError).
    """
    first, bad, short, dropped, lacking = 1, 0, 0, 0, 0
    for chunk in line_chunks(source, 1 if interactive else CHUNK_LINES):
        lines, skipped = decode_lines(chunk, name, first, skip_bad_lines, BAD_LINE_HINT)
        translated = translate_paragraphs(translator, lines, split, alignments)
        text = format_translations(first - 1, translated, style, alignments)
        first, bad = first + len(chunk), bad + len(skipped)
        short += sum(paragraph.dropped > 0 for paragraph in translated)
        dropped += sum(paragraph.dropped for paragraph in translated)
        lacking += sum(bool(paragraph.joined.best.unmet_terms) for paragraph in translated)
        out.write(text.encode("utf-8"))
        out.flush()
    if short:
        log.warning(
            "the translations of %d lines hold fewer sentences than their source (%d sentences in all)%s",
            short,
            dropped,
            "" if split else "; --split-sentences translates each sentence of a line alone",
        )
    if lacking:
        log.warning(
            "the translations of %d lines lack a glossary term: the output length limit came first "
            "(--format jsonl names them: unmet_terms)",
            lacking,
        )
    return bad
