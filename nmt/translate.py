"""Raw sentences → subword ids → search → detokenized translations, in batches sorted by length; streams of
lines are translated a chunk at a time."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import BinaryIO

import torch
from torch import Tensor

from nmt.config import Config, SearchConfig
from nmt.data.batching import collate, sorted_groups
from nmt.data.corpus import decode_lines, line_chunks, normalize
from nmt.device import autocast
from nmt.errors import UserError
from nmt.models.base import Seq2Seq
from nmt.run_dir import Run
from nmt.search import beam_search, greedy

log = logging.getLogger(__name__)


def translate_ids(
    model: Seq2Seq,
    sources: list[list[int]],
    search: SearchConfig,
    beam_size: int,
    batch_size: int,
    max_source_len: int,
) -> list[list[int]]:
    """Target ids for each source id list (same order); empty sources give empty outputs.

    Sources longer than `max_source_len` subwords are cut to it (with a warning), so one overlong line can
    neither crash the model nor exhaust memory; a batch that runs out of GPU memory is retried in halves.
    """
    too_long = sum(len(s) > max_source_len for s in sources)
    if too_long:
        log.warning("%d source lines exceed %d subwords and were truncated", too_long, max_source_len)
    sources = [s[:max_source_len] for s in sources]
    outputs: list[list[int]] = [[] for _ in sources]
    nonempty = [i for i, s in enumerate(sources) if len(s)]
    for group in sorted_groups([len(sources[i]) for i in nonempty], batch_size):
        indices = [nonempty[g] for g in group]
        hyps = _search_fitting(model, [sources[i] for i in indices], search, beam_size)
        for i, hyp in zip(indices, hyps, strict=True):
            outputs[i] = hyp
    return outputs


def _search_fitting(
    model: Seq2Seq, sources: list[list[int]], search: SearchConfig, beam_size: int
) -> list[list[int]]:
    """Search one batch; when it runs out of GPU memory, search each half of it instead (recursively)."""
    try:
        return _search(model, sources, search, beam_size)
    except torch.cuda.OutOfMemoryError as err:
        if len(sources) == 1:
            raise UserError(
                f"out of GPU memory translating one sentence of {len(sources[0])} subwords with beam size "
                f"{beam_size}; use a smaller --beam-size or --device cpu"
            ) from err
    torch.cuda.empty_cache()  # outside the except block, where the failed batch's tensors are freed
    half = len(sources) // 2
    log.warning("out of GPU memory decoding %d sentences; retrying in batches of %d", len(sources), half)
    return _search_fitting(model, sources[:half], search, beam_size) + _search_fitting(
        model, sources[half:], search, beam_size
    )


def _search(
    model: Seq2Seq, sources: list[list[int]], search: SearchConfig, beam_size: int
) -> list[list[int]]:
    """Greedy (beam size 1) or beam search of one batch of sources."""
    batch = collate(sources, [[] for _ in sources], range(len(sources))).to(model.device)
    with autocast(model.device):
        if beam_size > 1:
            return beam_search(
                model,
                batch.src,
                batch.src_mask,
                beam_size,
                search.length_penalty,
                search.max_len_a,
                search.max_len_b,
                search.cuda_graphs,
            )
        return greedy(
            model, batch.src, batch.src_mask, search.max_len_a, search.max_len_b, search.cuda_graphs
        )


def max_source_len(cfg: Config) -> int:
    """Longest source (in subwords) to translate: 4× the training limit, and short enough that the longest
    allowed output (a * length + b) still fits the model's positions."""
    search, positions = cfg.search, cfg.model.max_positions
    return max(
        1, min(4 * cfg.data.max_len, int((positions - 2 - search.max_len_b) / max(search.max_len_a, 1.0)))
    )


def translate(
    run: Run, sentences: list[str], beam_size: int | None = None, batch_size: int | None = None
) -> list[str]:
    """Translate raw sentences with a trained run; returns detokenized text, one string per input."""
    search = run.cfg.search
    sources = run.tokenizers.src.encode([normalize(s) for s in sentences])
    with torch.inference_mode():
        ids = translate_ids(
            run.model,
            sources,
            search,
            beam_size or search.beam_size,
            batch_size or search.batch_size,
            max_source_len(run.cfg),
        )
    return run.tokenizers.tgt.decode(ids)


CHUNK_LINES = 10_000  # lines read, sorted by length and translated at a time
BAD_LINE_HINT = "pass --skip-bad-lines to translate such lines as empty ones"


def translate_stream(
    run: Run,
    source: BinaryIO,
    name: str,
    out: BinaryIO,
    beam_size: int | None = None,
    batch_size: int | None = None,
    skip_bad_lines: bool = False,
    interactive: bool = False,
) -> int:
    """Translate the lines of `source` (called `name` in errors) into `out`, one line each in the same order,
    `CHUNK_LINES` at a time (each line as soon as it is read when `interactive`), flushing `out` after every
    chunk: memory does not grow with the input. Returns how many lines were not valid UTF-8 and were
    translated as empty lines (with `skip_bad_lines`; otherwise the first one raises UserError).
    """
    first, bad = 1, 0
    for chunk in line_chunks(source, 1 if interactive else CHUNK_LINES):
        sentences, skipped = decode_lines(chunk, name, first, skip_bad_lines, BAD_LINE_HINT)
        first, bad = first + len(chunk), bad + len(skipped)
        translations = translate(run, sentences, beam_size, batch_size)
        out.write("".join(line + "\n" for line in translations).encode("utf-8"))
        out.flush()
    return bad


@dataclass(frozen=True)
class Alignment:
    """A translation with the encoder-decoder attention the model paid while producing it."""

    translation: str
    src_pieces: list[str]  # source subwords + '</s>'
    tgt_pieces: list[str]  # output subwords + '</s>'
    weights: Tensor  # (layers, heads, tgt_len, src_len)


@torch.inference_mode()
def align(run: Run, sentence: str, beam_size: int | None = None) -> Alignment:
    """Translate one sentence, then re-run the decoder teacher-forced on the output to collect attention."""
    src_ids = run.tokenizers.src.encode([normalize(sentence)])[0]
    if not src_ids:
        raise UserError("the text to translate is empty")
    if len(src_ids) > max_source_len(run.cfg):
        log.warning(
            "the text has %d subwords; only the first %d were translated and plotted (the model's limit)",
            len(src_ids),
            max_source_len(run.cfg),
        )
        src_ids = src_ids[: max_source_len(run.cfg)]
    (hyp,) = translate_ids(
        run.model,
        [src_ids],
        run.cfg.search,
        beam_size or run.cfg.search.beam_size,
        1,
        max_source_len(run.cfg),
    )
    batch = collate([src_ids], [hyp], [0]).to(run.model.device)
    output = run.model(batch.src, batch.src_mask, batch.tgt_in, return_attention=True)
    return Alignment(
        translation=run.tokenizers.tgt.decode([hyp])[0],
        src_pieces=[*run.tokenizers.src.pieces(src_ids), "</s>"],
        tgt_pieces=[*run.tokenizers.tgt.pieces(hyp), "</s>"],
        weights=output.attention[0].float().cpu(),
    )
