"""Translating with a directory written by `nmt export --to ctranslate2` (`nmt translate EXPORT_DIR`, which
recognises one): the export's own sentencepiece models and search settings, `ctranslate2.Translator` for
search, n-best lists with CTranslate2's scores.

Greedy search gives our greedy output token for token: the same banned outputs (padding, bos, language tags),
each sentence cut at our limit a * (source length + 1) + b, and a multilingual model's tags where ours go (an
encoder tag first in the source pieces, a decoder tag as CTranslate2's `target_prefix`). Beam search is
CTranslate2's own, with the same beam size and length-penalty alpha but its own length normalisation, so it
may differ slightly. The search parts CTranslate2 has a knob for are mapped onto it (`ctranslate2_search`:
n-gram blocking, a minimum length, sampling); one it has none for (diverse beam search) is refused in one
line. Sampling seeds CTranslate2's generators with the seed: the same input and seed give the same samples in
a new process, but CTranslate2 cannot promise a line the same sample wherever it stands, as nmt's own search
does (its generators are per thread, and setting the seed does not restart them: CTranslate2 issue 1757).
Each hypothesis' mean log-probability (nmt/decode/confidence.py) undoes CTranslate2's normalisation, which
divides the summed log-probability of the output and eos by (length + 1) ** alpha even in greedy search, the
length counting a forced decoder tag, whose own log-probability the score leaves out.
Alignments come from the attention CTranslate2 returns (`return_attention`, with the end token's row): the
export sets it to the attention the run's translations align with (nmt/align/reading.py), the last decoder
layer's mean of heads (`ALIGNMENT`) or a guided run's supervised layer and heads, read by the run's rule and
null slot as the torch engine reads them; as there, no output token aligns to a language tag (nor has a row
for a forced decoder tag).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from nmt.align.attention import attended_subwords
from nmt.align.reading import SEARCH_READING, Reading
from nmt.config.multilingual import Direction
from nmt.config.sections import SearchConfig
from nmt.config.yaml_file import from_dict
from nmt.data.language_tags import LanguageTags
from nmt.data.special_tokens import EOS
from nmt.data.target_vocabulary import load_target_vocabularies
from nmt.data.tokenizer import Tokenizers, load_tokenizers
from nmt.decode.confidence import mean_log_prob
from nmt.decode.search import Hypothesis, SearchOptions
from nmt.decode.translator import Translator
from nmt.errors import ConfigError, UserError
from nmt.rules.beam import BeamSearch, Greedy
from nmt.rules.contract import Part, SearchRule
from nmt.rules.diverse_beam import DiverseBeamSearch
from nmt.rules.min_length import MinLength
from nmt.rules.no_repeat_ngram import NoRepeatNGram
from nmt.rules.registry import processors_of, rule_of
from nmt.rules.sampling import Sampling
from nmt.rules.target_vocabulary import TargetVocabulary

META = "nmt-export.json"  # what `nmt export` writes beside the model: its run, search settings and languages
VOCABULARY_MAP = "vmap.txt"  # CTranslate2's vocabulary map: the target-language vocabularies, by encoder tag
ALIGNMENT = "last decoder layer, mean of heads"  # the attention CTranslate2 returns, as nmt's search pays it


def import_ctranslate2() -> ModuleType:
    """The ctranslate2 package, or a UserError saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise UserError("ctranslate2 is not installed; install it with `pip install 'nmt[export]'`") from None
    return ctranslate2


def output_limit(src_len: int, options: SearchOptions | SearchConfig) -> int:
    """Most output tokens before eos for a source of `src_len` subwords (eos added), computed in float32
    as nmt/decode/search.py `output_limits` does."""
    limit = np.float32(src_len + 1) * np.float32(options.max_len_a) + np.float32(options.max_len_b)
    return max(1, int(limit))


class ExportedTranslator(Translator):
    """A loaded export: the CTranslate2 translator, the export's tokenizers and the run's search settings;
    n-best lists with CTranslate2's scores."""

    has_attention = False
    engine = "ctranslate2"
    constrains = False  # CTranslate2 has no lexically constrained search

    def __init__(
        self,
        translator: Any,  # ctranslate2.Translator
        tokenizers: Tokenizers,
        settings: SearchConfig,
        max_source_len: int,
        tags: LanguageTags | None = None,
        directions: tuple[Direction, ...] = (),  # exports of nmt 0.1.0 before serving: none
        has_alignments: bool = True,  # False: an export written before its attention was set (ALIGNMENT)
        vocabularies: dict[str, list[int]] | None = None,  # where the export has a VOCABULARY_MAP
        reading: Reading | None = None,  # a guided run's: what its attention holds, read so
    ) -> None:
        super().__init__(tokenizers, settings, max_source_len, tags, directions, vocabularies, reading)
        self.translator = translator
        self.has_alignments = has_alignments

    def refuse_unsupported(self, settings: SearchConfig) -> None:
        """A UserError where CTranslate2 has no knob for the settings' rule or one of their processors."""
        for part in (rule_of(settings), *processors_of(settings)):
            ctranslate2_knobs(part, 0)

    def search_batch(
        self, sources: list[list[int]], rule: SearchRule, options: SearchOptions
    ) -> list[list[Hypothesis]]:
        """A decoder tag is CTranslate2's `target_prefix`: forced, counted in its length limit and returned
        with each hypothesis, from which it is cut. The batch is nmt's (Translator.search, the server's
        batcher: `search_cost` within `search.batch_tokens`), handed over whole (`max_batch_size` examples).
        CTranslate2's own unit, `batch_type="tokens"`, counts examples × the longest source as given (no
        eos, no beam); a batch of width w within nmt's budget B (count × (L + 1) × w ≤ B) is within
        CTranslate2's ⌊B / w⌋ tokens (count × L < ⌊B / w⌋), so that budget would never split it further."""
        settings = ctranslate2_search(rule, options)
        src, tgt = self.tokenizers.src, self.tokenizers.tgt
        if isinstance(rule, Sampling):
            import_ctranslate2().set_random_seed(rule.seed % 2**32)  # CTranslate2's seed has 32 bits
            settings["sampling_topk"] = min(rule.top_k, len(tgt))  # a larger k: all of it, as in torch
        limits = [output_limit(len(ids), options) for ids in sources]
        forced = len(options.prefix)
        longest = max(limits) + forced
        shortest = min(settings["min_decoding_length"], longest)  # CTranslate2 refuses a longer minimum
        prefix = {"target_prefix": [tgt.pieces(list(options.prefix))] * len(sources)} if forced else {}
        results = self.translator.translate_batch(
            [src.pieces(ids) for ids in sources],
            max_batch_size=len(sources),
            num_hypotheses=options.nbest,
            return_scores=True,
            max_input_length=0,
            max_decoding_length=longest,
            suppress_sequences=[[piece] for piece in tgt.pieces(list(options.banned))],
            return_attention=options.alignments,
            return_end_token=options.alignments,  # its attention row: Shift-Att reads it
            **prefix,
            **(settings | {"min_decoding_length": shortest}),
        )
        found = []
        for ids, limit, result in zip(sources, limits, results, strict=True):
            hyps = []
            for k, (pieces, score) in enumerate(zip(result.hypotheses, result.scores, strict=True)):
                output = tgt.ids(pieces[forced:])
                ended = output[-1:] == [EOS]  # returned only with alignments
                tokens = output[: len(output) - ended][:limit]
                attended = (
                    self._attended(result.attention[k][forced:], ids, len(tokens), options.unaligned)
                    if options.alignments
                    else None
                )
                total = len(output) - ended + forced  # CTranslate2 divides by (total + 1) ** alpha
                per_token = mean_log_prob(score, total - forced, (total + 1) ** rule.length_penalty)
                hyps.append(Hypothesis(tokens, score, alignment=attended, mean_log_prob=per_token))
            found.append(hyps)
        return found

    def _attended(
        self, attention: list[list[float]], source: list[int], tokens: int, unaligned: tuple[int, ...]
    ) -> list[int | None]:
        """The source position of `source` each of the first `tokens` output tokens aligns to, under the
        export's reading (default: argmax), from CTranslate2's attention (a row per output token and the end
        token, a column per token of `source`; eos has what the row leaves): never eos nor an `unaligned`
        id."""
        if tokens == 0:
            return []
        paid = np.asarray(attention, dtype=np.float32)[: tokens + 1, : len(source)]  # (tokens + 1, source)
        if len(paid) == tokens:  # cut at the length limit before its end: its last row stands in
            paid = np.concatenate([paid, paid[-1:]])
        weights = np.hstack([paid, 1.0 - paid.sum(axis=1, keepdims=True)])  # (tokens + 1, source + 1)
        reading = self.reading or SEARCH_READING
        return attended_subwords(weights, reading.rule, reading.null, np.isin(source, unaligned))


def ctranslate2_search(rule: SearchRule, options: SearchOptions) -> dict[str, Any]:
    """CTranslate2's `translate_batch` settings for a search rule and its processors; a UserError names a part
    it has no knob for."""
    forced = len(options.prefix)  # CTranslate2 counts a target prefix in its lengths
    found: dict[str, Any] = {"length_penalty": rule.length_penalty, "min_decoding_length": 0}
    for part in (rule, *options.processors):
        found |= ctranslate2_knobs(part, forced)
    return found


def ctranslate2_knobs(part: Part, forced: int) -> dict[str, Any]:
    """The `translate_batch` settings of one search part."""
    match part:
        case Sampling():
            knobs = {"sampling_topk": part.top_k, "sampling_topp": part.top_p}
            return knobs | {"sampling_temperature": part.temperature, "beam_size": 1}
        case DiverseBeamSearch():
            pass  # a BeamSearch too: refused below
        case BeamSearch():
            return {"beam_size": part.beam_size}
        case Greedy():
            return {"beam_size": 1}
        case NoRepeatNGram():
            return {"no_repeat_ngram_size": part.no_repeat_ngram_size}
        case MinLength():
            return {"min_decoding_length": part.min_length + forced}
        case TargetVocabulary():  # bound only where the export has a vocabulary map
            return {"use_vmap": True}
    raise UserError(
        f"the ctranslate2 engine (an export) has no {type(part).__name__} search; use the run directory it "
        f"was exported from instead"
    )


def is_export(path: Path) -> bool:
    """Whether `path` is a directory written by `nmt export` (it holds nmt-export.json)."""
    return (path / META).is_file()


def export_meta(path: Path) -> dict[str, Any]:
    """What `nmt export` wrote of an export directory's run (META): its name (`run`; an earlier nmt wrote
    the exporting machine's path, `run_dir`), checkpoint, search settings, languages, attention, domain."""
    if not is_export(path):
        raise UserError(
            f"{path} is not a directory written by `nmt export` (no {META}); "
            f"write one there with `nmt export` from a run directory"
        )
    meta: dict[str, Any] = json.loads((path / META).read_text(encoding="utf-8"))
    return meta


def exported_run(meta: dict[str, Any]) -> str | None:
    """The name of the run an export was written from (None where its META names none)."""
    if "run" in meta:
        return str(meta["run"])
    return Path(meta["run_dir"]).name if "run_dir" in meta else None


def load_export(
    path: Path, device: str = "auto", threads: int = 0, compute_type: str = "default"
) -> ExportedTranslator:
    """Open an export directory; `threads` = 0 lets CTranslate2 choose, `compute_type` 'default' keeps the
    quantization the weights were exported with."""
    meta = export_meta(path)
    ctranslate2 = import_ctranslate2()
    try:
        translator = ctranslate2.Translator(
            str(path), device=device, intra_threads=threads, compute_type=compute_type
        )
    except (RuntimeError, ValueError) as err:
        raise UserError(f"CTranslate2 cannot load {path}: {err}") from err
    vocabulary, markers = meta.get("vocabulary", "sentencepiece"), meta.get("terminology") or ()
    tokenizers = load_tokenizers(path, meta["joint_vocabulary"], vocabulary, markers)
    settings = exported_search(path, meta)
    tags = None if meta.get("tags") is None else LanguageTags(tokenizers.src.tag_ids, meta["tags"])
    alignment = meta.get("alignment")
    reading = exported_reading(alignment) if isinstance(alignment, dict) else None
    vocabularies = load_target_vocabularies(path) if (path / VOCABULARY_MAP).is_file() else {}
    return ExportedTranslator(
        translator,
        tokenizers,
        settings,
        meta["max_source_len"],
        tags,
        export_directions(meta),
        alignment == ALIGNMENT or reading is not None,
        vocabularies,
        reading,
    )


def exported_search(path: Path, meta: dict[str, Any]) -> SearchConfig:
    """The search settings an export's META holds; one this nmt does not know (`search.batch_size`, which
    `search.batch_tokens` replaced) is a one-line UserError naming the fix."""
    try:
        return from_dict(SearchConfig, meta["search"], "search.")
    except ConfigError as err:
        raise UserError(f"{path / META}: {err}; export the run again with this nmt") from err


def export_directions(meta: dict[str, Any]) -> tuple[Direction, ...]:
    """The directions an export's run was trained on, as its nmt-export.json names them: `directions`, or
    the `languages` pair of older exports (none in the oldest)."""
    if "directions" in meta:
        return tuple(Direction.parse(name) for name in meta["directions"])
    return (Direction(*meta["languages"]),) if "languages" in meta else ()


def exported_reading(alignment: dict[str, Any]) -> Reading:
    """The reading an export's nmt-export.json holds (`alignment`: layer, heads, rule, null), as `nmt export`
    writes it for a guided run (nmt/export/ctranslate2.py `alignment_meta`)."""
    heads = alignment["heads"]
    return Reading(
        alignment["layer"],
        None if heads is None else tuple(heads),
        alignment["rule"],
        None,
        alignment["null"],
    )
