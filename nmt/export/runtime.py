"""Translating with a directory written by `nmt export --to ctranslate2` (`nmt translate EXPORT_DIR`, which
recognises one): the export's own sentencepiece models and search settings, `ctranslate2.Translator` for
search, n-best lists with CTranslate2's scores.

Greedy search gives our greedy output token for token: the same banned outputs (padding, bos), no minimum
length, and each sentence cut at our limit a * (source length + 1) + b. Beam search is CTranslate2's own, with
the same beam size and length-penalty alpha but its own length normalisation, so it may differ slightly.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nmt.config.sections import SearchConfig
from nmt.data.corpus import normalize
from nmt.data.special_tokens import BOS, PAD
from nmt.data.tokenizer import Tokenizers, load_tokenizers
from nmt.decode.search import Hypothesis
from nmt.errors import UserError
from nmt.export.ctranslate2 import META, import_ctranslate2


def output_limit(src_len: int, search: SearchConfig) -> int:
    """Most output tokens before eos for a source of `src_len` subwords (eos added), computed in float32
    as nmt.search.output_limits does."""
    limit = np.float32(src_len + 1) * np.float32(search.max_len_a) + np.float32(search.max_len_b)
    return max(1, int(limit))


@dataclass
class Exported:
    """A loaded export: the CTranslate2 translator, tokenizers and the run's search settings."""

    translator: Any  # ctranslate2.Translator
    tokenizers: Tokenizers
    search: SearchConfig
    max_source_len: int
    languages: tuple[str, str] | None = None  # source, target (exports of nmt 0.1.0 before serving: None)

    def translate_ids(
        self, sources: list[list[int]], beam_size: int | None = None, batch_size: int | None = None
    ) -> list[list[int]]:
        """Target ids for each source id list (same order); empty sources give empty outputs, sources longer
        than the run's limit are cut to it."""
        return [hyps[0].tokens for hyps in self.hypotheses(sources, beam_size, batch_size)]

    def hypotheses(
        self,
        sources: list[list[int]],
        beam_size: int | None = None,
        batch_size: int | None = None,
        nbest: int = 1,
    ) -> list[list[Hypothesis]]:
        """The `nbest` best hypotheses of each source id list (same order), best first, with CTranslate2's
        scores (no attention); an empty source gives one empty hypothesis (score 0), sources longer than the
        run's limit are cut to it."""
        sources = [s[: self.max_source_len] for s in sources]
        outputs: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in sources]
        nonempty = [i for i, s in enumerate(sources) if s]
        if not nonempty:
            return outputs
        src, tgt = self.tokenizers.src, self.tokenizers.tgt
        limits = [output_limit(len(sources[i]), self.search) for i in nonempty]
        results = self.translator.translate_batch(
            [src.pieces(sources[i]) for i in nonempty],
            max_batch_size=batch_size or self.search.batch_size,
            beam_size=max(beam_size or self.search.beam_size, nbest),
            num_hypotheses=nbest,
            return_scores=True,
            length_penalty=self.search.length_penalty,
            max_input_length=0,
            max_decoding_length=max(limits),
            min_decoding_length=0,
            suppress_sequences=[[piece] for piece in tgt.pieces([PAD, BOS])],
        )
        for i, limit, result in zip(nonempty, limits, results, strict=True):
            outputs[i] = [
                Hypothesis([tgt.sp.piece_to_id(piece) for piece in pieces[:limit]], score)
                for pieces, score in zip(result.hypotheses, result.scores, strict=True)
            ]
        return outputs

    def translate(
        self, sentences: list[str], beam_size: int | None = None, batch_size: int | None = None
    ) -> list[str]:
        """Detokenized translations of raw sentences, one per input."""
        sources = self.tokenizers.src.encode([normalize(s) for s in sentences])
        return self.tokenizers.tgt.decode(self.translate_ids(sources, beam_size, batch_size))

    def translate_sentences(self, sentences: list[str]) -> list[list[Hypothesis]]:
        """The `search.nbest` best hypotheses of each raw sentence, with the export's search settings."""
        sources = self.tokenizers.src.encode([normalize(s) for s in sentences])
        return self.hypotheses(sources, nbest=self.search.nbest)

    def with_search(self, overrides: dict[str, Any]) -> Exported:
        """This export with other search settings (`beam_size`, `nbest`, … as SearchConfig names them); a
        value out of range is a ConfigError."""
        return dataclasses.replace(self, search=dataclasses.replace(self.search, **overrides))


def is_export(path: Path) -> bool:
    """Whether `path` is a directory written by `nmt export` (it holds nmt-export.json)."""
    return (path / META).is_file()


def choose_engine(engine: str, paths: list[Path], checkpoint: str | None) -> str:
    """The engine that decodes with `paths`: 'torch' (run directories) or 'ctranslate2' (exports of
    `nmt export`), as `engine` names it, or for 'auto' as the directories are; a choice that cannot work
    with them (or with `checkpoint`, which only runs have several of) is a UserError."""
    exports = [path for path in paths if is_export(path)]
    if engine == "auto":
        engine = "ctranslate2" if exports else "torch"
    if engine not in ("torch", "ctranslate2"):
        raise UserError(f"--engine {engine}: unknown; use auto, torch or ctranslate2")
    if engine == "ctranslate2" and checkpoint is not None:
        raise UserError("--checkpoint: an export holds one checkpoint; choose it at `nmt export`")
    if engine == "torch" and exports:
        raise UserError(
            f"{exports[0]} is a CTranslate2 export (written by `nmt export`), not a run "
            f"directory; use it without --engine torch"
        )
    return engine


def load_export(
    path: Path, device: str = "auto", threads: int = 0, compute_type: str = "default"
) -> Exported:
    """Open an export directory; `threads` = 0 lets CTranslate2 choose, `compute_type` 'default' keeps the
    quantization the weights were exported with."""
    meta_path = path / META
    if not is_export(path):
        raise UserError(
            f"{path} is not a directory written by `nmt export` (no {META}); "
            f"make one with `nmt export RUN_DIR --to ctranslate2 {path}`"
        )
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    ctranslate2 = import_ctranslate2()
    try:
        translator = ctranslate2.Translator(
            str(path), device=device, intra_threads=threads, compute_type=compute_type
        )
    except (RuntimeError, ValueError) as err:
        raise UserError(f"CTranslate2 cannot load {path}: {err}") from err
    tokenizers = load_tokenizers(path, meta["joint_vocabulary"])
    languages = tuple(meta["languages"]) if "languages" in meta else None
    return Exported(translator, tokenizers, SearchConfig(**meta["search"]), meta["max_source_len"], languages)
