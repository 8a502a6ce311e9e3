"""`nmt align`, `nmt score-alignments` and `nmt symmetrize`: word alignments."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from nmt.cli.options import (
    BatchTokens,
    Checkpoint,
    Device,
    RunDirArgument,
    SrcLang,
    TgtLang,
    checked_choice,
    search_overrides,
)
from nmt.errors import UserError

if TYPE_CHECKING:
    from nmt.decode.trained_run import TrainedRun


def align(
    run_dir: RunDirArgument,
    src: Annotated[Path, typer.Option(help="Source sentences, whitespace-tokenized, one a line.")],
    tgt: Annotated[
        Path, typer.Option(help="Their target sentences (references, not translations), line by line.")
    ],
    layer: Annotated[
        int | None,
        typer.Option(
            help="Decoder layer, from 0 (negative: from the last); default: the layer guided alignment "
            "trained, else the last."
        ),
    ] = None,
    head: Annotated[
        str | None,
        typer.Option(
            help="Head N, heads N,M,… (their mean) or 'mean' (of all); default: the heads guided alignment "
            "trained, else the mean."
        ),
    ] = None,
    rule: Annotated[
        str | None,
        typer.Option(
            help="argmax: the attention of the step that predicts each target subword; shift: of the step "
            "that reads it (Shift-Att). Default: the rule guided alignment trained, else argmax."
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(help="Link every source subword with at least this weight (none, or several) instead."),
    ] = None,
    null_slot: Annotated[
        bool | None,
        typer.Option(
            "--null-slot/--no-null-slot",
            help="Leave a target subword unlinked when it attends the source's </s> most. Default: as guided "
            "alignment trained (train.alignment.null_slot), else off.",
        ),
    ] = None,
    soft: Annotated[
        bool,
        typer.Option(help="Write JSON lines of weights instead: per target word, one per source word."),
    ] = False,
    reverse_run: Annotated[
        Path | None,
        typer.Option(help="A run of the other direction: its links are symmetrized with RUN's."),
    ] = None,
    symmetrize: Annotated[
        str | None,
        typer.Option(
            "--symmetrize",
            help="With --reverse-run: intersection, union, grow-diag (strict), grow-diag-moses or "
            "grow-diag-final-and (the default); see `nmt symmetrize`.",
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default stdout).")] = None,
    src_lang: SrcLang = None,
    tgt_lang: TgtLang = None,
    batch_tokens: BatchTokens = None,
    device: Device = "auto",
    checkpoint: Checkpoint = None,
) -> None:
    """Word-align sentence pairs with a trained model's attention, teacher-forced on the given target: one
    Pharaoh line per pair (0-based source-target word links, `</s>` dropped), a word pair linked when any of
    their subwords are. Each word is encoded on its own, its subwords kept. A multilingual run aligns the
    direction --src-lang → --tgt-lang (its --reverse-run, which may be the same run, the other way); its
    language tag is never linked."""
    from nmt.align.symmetrize import METHODS
    from nmt.atomic_files import write_output
    from nmt.config.sections import LINK_RULES
    from nmt.decode.aligner import Request, align_files
    from nmt.decode.loading import load_trained
    from nmt.device.choice import resolve_device

    if symmetrize is not None and reverse_run is None:
        raise UserError("--symmetrize combines two directions: give the other one's run with --reverse-run")
    overrides = search_overrides(batch_tokens=batch_tokens)

    def load(path: Path) -> TrainedRun:
        return load_trained([path], resolve_device(device), checkpoint, overrides)

    asked = Request(
        layer=layer,
        heads=_heads(head),
        rule=None if rule is None else checked_choice("--rule", rule, LINK_RULES),
        threshold=threshold,
        null=null_slot,
        soft=soft,
        reverse=None if reverse_run is None else load(reverse_run),
        method=checked_choice("--symmetrize", symmetrize or "grow-diag-final-and", METHODS),
        src_lang=src_lang,
        tgt_lang=tgt_lang,
    )
    text = align_files(load(run_dir), src, tgt, asked)
    write_output(out, lambda handle: handle.write(text.encode("utf-8")))


def _heads(head: str | None) -> tuple[int, ...] | Literal["mean"] | None:
    """--head: None (the run's default), 'mean' (every head), N or N,M,…."""
    if head is None:
        return None
    if head == "mean":
        return "mean"
    try:
        return tuple(int(part) for part in head.split(","))
    except ValueError:
        raise UserError(f"--head {head}: expected mean, a head number N or numbers N,M,…") from None


SourceText = Annotated[
    Path | None,
    typer.Option(
        "--src",
        help="The source sentences the links index, whitespace-tokenized, one a line: with --tgt, every "
        "index is checked against its sentence.",
    ),
]
TargetText = Annotated[
    Path | None, typer.Option("--tgt", help="Their target sentences, line by line (with --src).")
]


def score_alignments(
    hypothesis: Annotated[
        Path, typer.Argument(help="Pharaoh file of links to score (i-j, one line a pair).")
    ],
    gold: Annotated[Path, typer.Argument(help="Gold Pharaoh file: i-j sure, ipj or i?j possible links.")],
    hyp_one_based: Annotated[bool, typer.Option(help="HYPOTHESIS counts words from 1.")] = False,
    gold_one_based: Annotated[bool, typer.Option(help="GOLD counts words from 1.")] = False,
    hyp_reverse: Annotated[
        bool, typer.Option(help="HYPOTHESIS names the target word first (i-j: target i, source j).")
    ] = False,
    gold_reverse: Annotated[bool, typer.Option(help="GOLD names the target word first.")] = False,
    src: SourceText = None,
    tgt: TargetText = None,
) -> None:
    """Score word alignments against gold links: the alignment error rate of Och & Ney (2003),
    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|) with sure links S and possible links P ⊇ S, precision |A∩P| / |A|
    and recall |A∩S| / |S|, each count summed over the corpus, in percent; and the link counts. A file that
    looks misread (1-based read from 0, target-first read source-first, an index past its sentence) is
    refused in one line naming the option to change."""
    from nmt.align.link_files import LinkFile, text_lengths
    from nmt.align.score import score_files

    lengths, text = text_lengths(src, tgt)
    found = LinkFile(hypothesis, hyp_one_based, hyp_reverse, "--hyp-one-based", "--hyp-reverse")
    reference = LinkFile(gold, gold_one_based, gold_reverse, "--gold-one-based", "--gold-reverse")
    typer.echo(score_files(found, reference, lengths, text).describe())


def symmetrize(
    forward: Annotated[Path, typer.Argument(help="Pharaoh links of the source → target direction.")],
    reverse: Annotated[Path, typer.Argument(help="Pharaoh links of the target → source direction.")],
    method: Annotated[
        str,
        typer.Option(
            help="intersection, union, grow-diag (lilt/alignment-scripts' strict grow-diagonal: a neighbour "
            "joins when both its words are unaligned), grow-diag-moses (Moses' grow-diag: either word) or "
            "grow-diag-final-and (Moses')."
        ),
    ] = "grow-diag-final-and",
    swap_reverse: Annotated[
        bool, typer.Option(help="REVERSE names the target word first (an aligner run on the swapped corpus).")
    ] = False,
    one_based: Annotated[
        bool, typer.Option(help="FORWARD and REVERSE count words from 1 (the output counts from 0).")
    ] = False,
    src: SourceText = None,
    tgt: TargetText = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Output file (default stdout).")] = None,
) -> None:
    """Combine the word links of two directions, line by line, into one Pharaoh file (0-based,
    source-target), e.g. the -f and -r files of `eflomal-align` into the links of train.alignment.links. A
    file that looks misread (1-based read from 0, target-first read source-first, an index past its sentence)
    is refused in one line naming the option to change."""
    from nmt.align.link_files import LinkFile, text_lengths
    from nmt.align.symmetrize import METHODS, symmetrize_files
    from nmt.atomic_files import write_output

    chosen = checked_choice("--method", method, METHODS)
    lengths, text = text_lengths(src, tgt)
    in_turn = "--swap-reverse with the two files in the other order"  # FORWARD target-first: given in turn?
    first = LinkFile(forward, one_based, False, "--one-based", in_turn)
    second = LinkFile(reverse, one_based, swap_reverse, "--one-based", "--swap-reverse")
    text_out = symmetrize_files(first, second, chosen, lengths, text)
    write_output(out, lambda handle: handle.write(text_out.encode("utf-8")))
