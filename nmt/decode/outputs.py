"""What `nmt translate` writes: streams of lines translated a chunk at a time, as plain text, Moses-style
n-best lines or JSON lines, each translation with its word alignment when asked (` ||| i-j …` as fairseq and
OpenNMT-py append it: source word i, output word j, from 0)."""

from __future__ import annotations

import json
from typing import BinaryIO, Literal

from nmt.align.pharaoh import format_links
from nmt.data.corpus import decode_lines, line_chunks
from nmt.decode.languages import Translates
from nmt.decode.translator import Translated, Translation

CHUNK_LINES = 10_000  # lines read, sorted by length and translated at a time
BAD_LINE_HINT = "pass --skip-bad-lines to translate such lines as empty ones"
OutputFormat = Literal["text", "moses", "jsonl"]


def format_translations(
    first: int, translated: list[Translated], style: OutputFormat, alignments: bool = False
) -> str:
    """Output lines for input lines `first`, `first + 1`, … (0-based): `text` is the best translation alone;
    `moses` is one `i ||| translation ||| score` line per hypothesis, best first; `jsonl` is one
    `{"line": i, "hypotheses": [{"text": …, "score": …, "mean_log_prob": …, "suspect": […]}, …]}` object per
    input line. With `alignments`
    each translation's links follow as ` ||| 0-0 1-2` (jsonl: an `"alignment": [[0, 0], [1, 2]]` field), but
    in `text` an empty translation (a blank line's, which has no links) stays an empty line."""
    lines = []
    for i, line in enumerate(translated, start=first):
        if style == "text":
            lines.append(line.best.text and line.best.text + _links(line.best, alignments))
        elif style == "moses":
            lines.extend(
                f"{i} ||| {h.text} ||| {h.score:.4f}{_links(h, alignments)}" for h in line.hypotheses
            )
        else:
            found = [_hypothesis(h, alignments) for h in line.hypotheses]
            lines.append(json.dumps({"line": i, "hypotheses": found}, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def _links(translation: Translation, alignments: bool) -> str:
    """` ||| i-j …` with `alignments`, else nothing."""
    return f" ||| {format_links(translation.alignment or [])}" if alignments else ""


def _hypothesis(translation: Translation, alignments: bool) -> dict[str, object]:
    """A hypothesis as a JSON line holds it: its text, score, mean log-probability per token and what makes it
    suspect (nmt/decode/confidence.py), and its word links when asked."""
    found: dict[str, object] = {"text": translation.text, "score": round(translation.score, 4)}
    if translation.mean_log_prob is not None:
        found["mean_log_prob"] = round(translation.mean_log_prob, 4)
    found["suspect"] = list(translation.suspect)
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
) -> int:
    """Translate the lines of `source` (called `name` in errors) into `out` in the same order, formatted as
    `style` (`format_translations`; with word links when `alignments`), `CHUNK_LINES` at a time (each line as
    soon as it is read when `interactive`), flushing `out` after every chunk: memory does not grow with the
    input. Returns how many
    lines were not valid UTF-8 and were translated as empty lines (with `skip_bad_lines`; otherwise the
    first one raises UserError).
    """
    first, bad = 1, 0
    for chunk in line_chunks(source, 1 if interactive else CHUNK_LINES):
        sentences, skipped = decode_lines(chunk, name, first, skip_bad_lines, BAD_LINE_HINT)
        text = format_translations(first - 1, translator.translated(sentences, alignments), style, alignments)
        first, bad = first + len(chunk), bad + len(skipped)
        out.write(text.encode("utf-8"))
        out.flush()
    return bad
