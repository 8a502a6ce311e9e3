"""`nmt translate` and `nmt plot-attention`: translating with trained runs (or exports); `nmt evaluate` is in
evaluating.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO

import typer

from nmt.cli.options import (
    BeamSize,
    Checkpoint,
    Device,
    FromLang,
    Glossary,
    Int8,
    IntoLang,
    PivotLang,
    RunDirArgument,
    RunDirs,
    ZeroShot,
    asked_direction,
    checked_choice,
    checked_search,
    search_overrides,
    with_search_flags,
)
from nmt.errors import UserError

if TYPE_CHECKING:
    from nmt.data.terminology import TermWriter
    from nmt.decode.languages import Translates
    from nmt.decode.outputs import OutputFormat
    from nmt.evaluate.plots import Scale


@with_search_flags
def translate(
    run_dirs: RunDirs,
    input: Annotated[
        Path | None, typer.Option("--input", "-i", help="One sentence per line (default stdin).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Translations (default stdout).")
    ] = None,
    scores: Annotated[bool, typer.Option(help="Write `i ||| translation ||| score` lines.")] = False,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="text; jsonl: one JSON object of hypotheses per line; html: the input is one HTML page, "
            "written back translated, its inline tags placed by the word alignment.",
        ),
    ] = "text",
    split_sentences: Annotated[
        bool, typer.Option(help="Translate each line sentence by sentence: for lines that hold paragraphs.")
    ] = False,
    alignments: Annotated[
        bool,
        typer.Option(
            help="Append each translation's word alignment, ` ||| i-j …` (source word i, output word j, from "
            "0), from the attention the run aligns with (a guided run's supervised heads, else the "
            "penultimate layer's mean of heads)."
        ),
    ] = False,
    src_lang: FromLang = None,
    tgt_lang: IntoLang = None,
    zero_shot: ZeroShot = False,
    pivot: PivotLang = None,
    device: Device = "auto",
    checkpoint: Checkpoint = None,
    skip_bad_lines: Annotated[
        bool, typer.Option(help="Translate lines that are not valid UTF-8 as empty lines instead of failing.")
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            help="auto: ctranslate2 for a directory written by `nmt export`, torch for run directories."
        ),
    ] = "auto",
    int8: Int8 = False,
    glossary: Glossary = None,
    glossary_mode: Annotated[
        str,
        typer.Option(
            "--glossary-mode",
            help="auto: annotated for a run trained with data.terminology, else constrained; constrained: "
            "constrained beam search makes each output hold the glossary's target terms (torch engine, any "
            "run); annotated: terms written into the source (a run trained with data.terminology).",
        ),
    ] = "auto",
    interactive: Annotated[
        bool | None,
        typer.Option(
            "--interactive/--no-interactive",
            help="Answer each line as soon as it is read (default: when standard input is a terminal); "
            "otherwise input is read 10,000 lines at a time, whatever --batch-tokens.",
        ),
    ] = None,
    *,
    search: dict[str, Any],
) -> None:
    """Translate raw sentences, one per line, keeping the line order (empty lines stay empty).

    The search is the run's (its config's search section) but for the options given: beam search, or
    --sampling (a line with the same --seed and settings samples the same output wherever it stands; the
    seed is 0 unless given), or diverse beam search (--diverse-groups), with n-gram blocking and a minimum
    length where asked. An option the search does not read is refused.

    With --nbest N > 1 or --scores, each input line i (counted from 0) gives Moses-style lines
    `i ||| translation ||| score`, best first; with --format jsonl, one line
    `{"line": i, "hypotheses": [{"text": …, "score": …}, …]}`. Scores are length-normalised
    log-probabilities at every beam size: with the torch engine (a run directory), the summed log-probability
    of the tokens and eos divided by ((5 + length) / 6) ** A, A the length penalty (an imported model's
    run: by length ** A, as transformers divides; search.length_normalization); with the ctranslate2
    engine (an export), CTranslate2's own, divided by (length + 1) ** A. The input is read and translated in
    chunks, written as they are done (to --output only when complete).

    With --format html the input is one HTML page, written back with the text of its blocks translated
    sentence by sentence, its inline tags (b, i, a, span, …) placed around the output words linked to the
    words they wrapped (docs/serving.md says what is left as it is) and its `lang` the target language.

    With --split-sentences (always, for html) each sentence of a line is translated alone; a warning counts
    the lines whose translation lacks sentences (jsonl: both counts, each line). See docs/running-text.md.

    With --alignments each translation is followed by ` ||| 0-0 1-2 …`: each output word linked to the source
    words its subwords attended most (with --format jsonl: an "alignment" field of [i, j] pairs); an empty
    translation, which has no links, stays an empty line.

    With --glossary each source's glossary terms are translated as the glossary says: written into the source
    as the run was trained to read them (--glossary-mode annotated, for a run trained with data.terminology),
    or by constrained beam search, which makes each output hold the target terms (--glossary-mode
    constrained, torch engine); auto chooses annotated where the run was trained so. With --format jsonl each
    hypothesis then names the target terms it lacks ("unmet_terms"). In an HTML page a term is written in
    where no tag begins or ends inside it, so it stays inside its tags.

    A multilingual model translates into --tgt-lang: from --src-lang, a direction it was trained on (or any
    of its languages with --zero-shot), or through a third language with --pivot (the scores and n-best
    lists are then those of the second step).
    """
    from nmt.atomic_files import check_writable, write_output
    from nmt.decode.languages import into_direction
    from nmt.decode.loading import choose_engine, load_translator
    from nmt.decode.outputs import read_input, stream_translations
    from nmt.decode.terminology import Annotating, glossary_translator
    from nmt.decode.terminology import glossary_mode as chosen_mode
    from nmt.device.choice import resolve_device

    if format not in ("text", "jsonl", "html"):
        raise UserError(f"--format {format}: expected text, jsonl or html")
    nbest = search.get("nbest", 1)
    if format == "html" and (scores or alignments or nbest > 1 or pivot):
        raise UserError(
            "--format html writes the page, its tags placed by the word links of one translation: drop "
            "--scores, --alignments, --nbest and --pivot"
        )
    if glossary is not None and pivot:
        raise UserError("--glossary translates in one step: drop --pivot")
    style: OutputFormat = "jsonl" if format == "jsonl" else "moses" if scores or nbest > 1 else "text"
    checked_search(run_dirs[0], search)
    check_writable(output)  # before any work: a translation is never lost to a bad --output
    if glossary is None and glossary_mode != "auto":
        raise UserError(f"--glossary-mode {glossary_mode} reads a glossary: give --glossary FILE")
    mode = None
    if glossary is not None:  # refused before loading
        mode = chosen_mode(run_dirs[0], glossary_mode, choose_engine(engine, run_dirs, checkpoint), glossary)
        if mode == "annotated" and alignments:
            raise UserError("--glossary-mode annotated writes terms into the source: drop --alignments")
    loaded = load_translator(run_dirs, engine, resolve_device(device), checkpoint, search, int8)
    translator = into_direction(loaded, asked_direction(src_lang, tgt_lang, zero_shot, pivot))
    terms = (
        translator
        if mode is None or glossary is None
        else glossary_translator(translator, run_dirs[0], glossary, mode)
    )
    if format == "html":
        if isinstance(terms, Annotating):  # terms written into the lines, each inside its tags
            _translate_page(translator, input, output, terms.writer)
        else:  # under constraints, or without a glossary
            _translate_page(terms, input, output, None)
        return
    bad = 0
    with read_input(input) as (source, name, terminal):
        if terminal:  # the model is loaded: a user at the keyboard learns when to type, and how to stop
            logging.getLogger(__name__).info("ready: type a sentence and press Enter; Ctrl-D ends")

        def write(out: BinaryIO) -> None:
            nonlocal bad
            live = terminal if interactive is None else interactive
            bad = stream_translations(
                terms, source, name, out, skip_bad_lines, live, style, alignments, split_sentences
            )

        write_output(output, write)
    if bad:
        typer.echo(f"nmt: {bad} lines that are not valid UTF-8 translated as empty lines", err=True)


def _translate_page(
    translator: Translates, input: Path | None, output: Path | None, terms: TermWriter | None
) -> None:
    """The HTML page of `input` (or stdin) translated to `output` (or stdout), with a glossary's `terms`
    written into its lines where given."""
    from nmt.atomic_files import write_output
    from nmt.decode.markup import translated_page
    from nmt.decode.outputs import read_input

    with read_input(input) as (source, name, _):
        data = source.read()
    try:
        page = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(
            f"{name} is not valid UTF-8 (byte {data[err.start]:#04x} at {err.start}); convert the page to "
            f"UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from err
    translated = translated_page(translator, page, terms)
    write_output(output, lambda out: out.write(translated.encode("utf-8")))


def plot_attention(
    run_dir: RunDirArgument,
    text: Annotated[str, typer.Option(help="Source sentence to translate and plot.")],
    out: Annotated[Path, typer.Option(help="Image file: .png, .svg or .pdf.")],
    layer: Annotated[int, typer.Option(help="Decoder layer, from 0; negative counts from the last.")] = -1,
    head: Annotated[str, typer.Option(help="Attention head (from 0) or 'mean'.")] = "mean",
    all_heads: Annotated[
        bool, typer.Option(help="Draw every head of the layer in a grid (one colour scale for all).")
    ] = False,
    scale: Annotated[
        str,
        typer.Option(
            help="figure: colours from 0 to the largest weight drawn (weak attention stays visible); "
            "fixed: 0 to 1 (comparable across figures)."
        ),
    ] = "figure",
    beam_size: BeamSize = None,
    src_lang: FromLang = None,
    tgt_lang: IntoLang = None,
    zero_shot: ZeroShot = False,
    device: Device = "auto",
    checkpoint: Checkpoint = None,
) -> None:
    """Draw the encoder-decoder attention of one translation as a heatmap (output rows, source columns);
    a multilingual run's into --tgt-lang."""
    from nmt.decode.loading import load_trained
    from nmt.decode.translator import TorchTranslator
    from nmt.device.choice import resolve_device
    from nmt.evaluate.plots import check_output_path, check_plottable, save_attention

    check_output_path(out)
    colours: Scale = checked_choice("--scale", scale, ("figure", "fixed"))
    run = load_trained([run_dir], resolve_device(device), checkpoint, search_overrides(beam_size=beam_size))
    translator = TorchTranslator.of_run(run).toward(tgt_lang, src_lang, zero_shot)
    check_plottable(len(translator.encode([text])[0]))  # before translating: empty, or too long to draw
    (translated,) = translator.translated([text], attention=True)
    save_attention(translated, out, run.cfg.model, layer, head, all_heads, colours)
    typer.echo(f"{translated.best.text}\nwrote {out}")
