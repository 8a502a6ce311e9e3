"""Raw sentences → subword ids → search → detokenized translations, in batches sorted by length; streams of
lines are translated a chunk at a time."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Literal, Protocol

import torch
from torch import Tensor

from nmt.config.schema import Config
from nmt.config.sections import SearchConfig
from nmt.data.batching import IntSequence, collate, sorted_groups
from nmt.data.corpus import decode_lines, line_chunks, normalize
from nmt.data.tokenizer import Tokenizers
from nmt.decode.beam import beam_search
from nmt.decode.search import Hypothesis, greedy
from nmt.decode.trained_run import TrainedRun
from nmt.device import autocast
from nmt.errors import UserError
from nmt.models.base import Seq2Seq

log = logging.getLogger(__name__)


def translate_ids(
    model: Seq2Seq,
    sources: Sequence[IntSequence],
    search: SearchConfig,
    max_source_len: int,
    with_attention: bool = False,
    progress: Callable[[int], object] | None = None,
) -> list[list[Hypothesis]]:
    """Hypotheses for each source id list (same order), `search.batch_size` sentences a batch, `progress`
    told how many sentences each batch held; an empty source gives one empty hypothesis (score 0, no
    attention).

    Sources longer than `max_source_len` subwords are cut to it (with a warning), so one overlong line can
    neither crash the model nor exhaust memory; a batch that runs out of GPU memory is retried in halves.
    """
    too_long = sum(len(s) > max_source_len for s in sources)
    if too_long:
        log.warning("%d source lines exceed %d subwords and were truncated", too_long, max_source_len)
    sources = [s[:max_source_len] for s in sources]
    outputs: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in sources]
    nonempty = [i for i, s in enumerate(sources) if len(s)]
    for group in sorted_groups([len(sources[i]) for i in nonempty], search.batch_size):
        indices = [nonempty[g] for g in group]
        hyps = _search_fitting(model, [sources[i] for i in indices], search, with_attention)
        for i, hyp in zip(indices, hyps, strict=True):
            outputs[i] = hyp
        if progress is not None:
            progress(len(indices))
    return outputs


def _search_fitting(
    model: Seq2Seq, sources: Sequence[IntSequence], search: SearchConfig, with_attention: bool
) -> list[list[Hypothesis]]:
    """Search one batch; when it runs out of GPU memory, search each half of it instead (recursively)."""
    try:
        return _search(model, sources, search, with_attention)
    except torch.cuda.OutOfMemoryError as err:
        if len(sources) == 1:
            raise UserError(
                f"out of GPU memory translating one sentence of {len(sources[0])} subwords with beam size "
                f"{search.beam_size}; use a smaller --beam-size or --device cpu"
            ) from err
    torch.cuda.empty_cache()  # outside the except block, where the failed batch's tensors are freed
    half = len(sources) // 2
    log.warning("out of GPU memory decoding %d sentences; retrying in batches of %d", len(sources), half)
    return _search_fitting(model, sources[:half], search, with_attention) + _search_fitting(
        model, sources[half:], search, with_attention
    )


def _search(
    model: Seq2Seq, sources: Sequence[IntSequence], search: SearchConfig, with_attention: bool
) -> list[list[Hypothesis]]:
    """Greedy (beam size 1) or beam search of one batch of sources."""
    batch = collate(sources, [[] for _ in sources], range(len(sources))).to(model.device)
    method = beam_search if search.beam_size > 1 else greedy
    with autocast(model.device):
        return method(model, batch.src, batch.src_mask, search, with_attention)


def max_source_len(cfg: Config) -> int:
    """Longest source (in subwords) to translate: 4× the training limit, and short enough that the longest
    allowed output (a * length + b) still fits the model's positions (a Transformer's)."""
    search, positions = cfg.search, cfg.model.position_limit
    if positions is None:
        return 4 * cfg.data.max_len
    return max(
        1, min(4 * cfg.data.max_len, int((positions - 2 - search.max_len_b) / max(search.max_len_a, 1.0)))
    )


def translate_hypotheses(
    run: TrainedRun,
    sentences: list[str],
    with_attention: bool = False,
    progress: Callable[[int], object] | None = None,
) -> list[list[Hypothesis]]:
    """Search raw sentences with a trained run (settings from `run.cfg.search`): hypotheses per sentence."""
    sources = run.tokenizers.src.encode([normalize(s) for s in sentences])
    limit = max_source_len(run.cfg)
    with torch.inference_mode():
        return translate_ids(run.model, sources, run.cfg.search, limit, with_attention, progress)


def translate(
    run: TrainedRun, sentences: list[str], progress: Callable[[int], object] | None = None
) -> list[str]:
    """Translate raw sentences with a trained run; returns detokenized text, one string per input
    (`progress` is told the sentences of each batch searched)."""
    hypotheses = translate_hypotheses(run, sentences, progress=progress)
    return run.tokenizers.tgt.decode([hyps[0].tokens for hyps in hypotheses])


CHUNK_LINES = 10_000  # lines read, sorted by length and translated at a time
BAD_LINE_HINT = "pass --skip-bad-lines to translate such lines as empty ones"
OutputFormat = Literal["text", "moses", "jsonl"]


class Translator(Protocol):
    """What formatting needs of a translator: its tokenizers (a TrainedRun's, or an export's)."""

    @property
    def tokenizers(self) -> Tokenizers: ...


def format_translations(
    run: Translator, first: int, hypotheses: list[list[Hypothesis]], style: OutputFormat
) -> str:
    """Output lines for the hypotheses of input lines `first`, `first + 1`, … (0-based): `text` is the best
    translation alone; `moses` is one `i ||| translation ||| score` line per hypothesis, best first;
    `jsonl` is one `{"line": i, "hypotheses": [{"text": …, "score": …}, …]}` object per input line."""
    lines = []
    for i, hyps in enumerate(hypotheses, start=first):
        texts = run.tokenizers.tgt.decode([h.tokens for h in hyps])
        if style == "text":
            lines.append(texts[0])
        elif style == "moses":
            lines.extend(f"{i} ||| {text} ||| {h.score:.4f}" for text, h in zip(texts, hyps, strict=True))
        else:
            found = [{"text": text, "score": round(h.score, 4)} for text, h in zip(texts, hyps, strict=True)]
            lines.append(json.dumps({"line": i, "hypotheses": found}, ensure_ascii=False))
    return "".join(line + "\n" for line in lines)


def stream_translations(
    translator: Translator,
    search: Callable[[list[str]], list[list[Hypothesis]]],
    source: BinaryIO,
    name: str,
    out: BinaryIO,
    skip_bad_lines: bool = False,
    interactive: bool = False,
    style: OutputFormat = "text",
) -> int:
    """Translate the lines of `source` (called `name` in errors) with `search` (raw sentences → hypotheses)
    into `out` in the same order, formatted as `style` (`format_translations`), `CHUNK_LINES` at a time
    (each line as soon as it is read when `interactive`), flushing `out` after every chunk: memory does not
    grow with the input. Returns how many lines were not valid UTF-8 and were translated as empty lines (with
    `skip_bad_lines`; otherwise the first one raises UserError).
    """
    first, bad = 1, 0
    for chunk in line_chunks(source, 1 if interactive else CHUNK_LINES):
        sentences, skipped = decode_lines(chunk, name, first, skip_bad_lines, BAD_LINE_HINT)
        text = format_translations(translator, first - 1, search(sentences), style)
        first, bad = first + len(chunk), bad + len(skipped)
        out.write(text.encode("utf-8"))
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
def align(run: TrainedRun, sentence: str) -> Alignment:
    """Translate one sentence, then re-run the decoder teacher-forced on the output to collect the attention
    of every layer and head (search collects only the last layer's mean of heads: `searched_alignments`)."""
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
    ((hyp, *_),) = translate_ids(run.model, [src_ids], run.cfg.search, max_source_len(run.cfg))
    (weights,) = teacher_forced_attention(run.model, src_ids, [hyp.tokens])
    return _alignment(run, src_ids, hyp.tokens, weights)


@torch.inference_mode()
def teacher_forced_attention(model: Seq2Seq, src_ids: list[int], outputs: list[list[int]]) -> list[Tensor]:
    """The encoder-decoder attention of every layer and head that `model` pays producing each of `outputs`
    (target ids without bos/eos) from one source, in one teacher-forced pass: per output
    (layers, heads, len(output) + 1, len(src_ids) + 1), the rows its tokens and eos, the columns the source
    and its eos. Not for an Ensemble (search only: use the attention search collects)."""
    batch = collate([src_ids] * len(outputs), outputs, range(len(outputs))).to(model.device)
    attention = model(batch.src, batch.src_mask, batch.tgt_in, return_attention=True).attention
    attention = attention.float().cpu()  # (outputs, layers, heads, longest + 1, src_len)
    return [attention[i, :, :, : len(tokens) + 1] for i, tokens in enumerate(outputs)]


def searched_alignments(run: TrainedRun, sentences: list[str]) -> list[Alignment | None]:
    """Translations with the attention search collected while producing them, (1, 1, tgt_len, src_len): the
    last layer's mean of heads, no second pass over the model; None for an empty sentence."""
    sources = run.tokenizers.src.encode([normalize(s) for s in sentences])
    limit = max_source_len(run.cfg)
    with torch.inference_mode():
        found = translate_ids(run.model, sources, run.cfg.search, limit, with_attention=True)
    return [
        None
        if hyps[0].attention is None
        else _alignment(run, src[:limit], hyps[0].tokens, hyps[0].attention[None, None])
        for src, hyps in zip(sources, found, strict=True)
    ]


def _alignment(run: TrainedRun, src_ids: list[int], tokens: list[int], weights: Tensor) -> Alignment:
    return Alignment(
        translation=run.tokenizers.tgt.decode([tokens])[0],
        src_pieces=[*run.tokenizers.src.pieces(src_ids), "</s>"],
        tgt_pieces=[*run.tokenizers.tgt.pieces(tokens), "</s>"],
        weights=weights,
    )
