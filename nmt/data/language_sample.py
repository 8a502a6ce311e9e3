"""A balanced sample of a multilingual training split for its one joint sentencepiece model: every language
contributes the same number of sentences (`tokenizer.max_sentences` shared out equally; all of a language's
sentences when it has fewer), drawn uniformly with a fixed seed (nmt/data/sample.py `sample_indices`), so that
a large language does not crowd a small one out of the vocabulary."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt.config.sections import TokenizerConfig
from nmt.data.corpus import CHUNK_LINES, decode_lines, line_chunks
from nmt.data.language_files import LanguageSplit, SplitCounts, jsonl_records
from nmt.data.sample import TextLines, sample_indices
from nmt.errors import UserError


def write_language_sample(
    split: LanguageSplit, counts: SplitCounts, cfg: TokenizerConfig, directory: Path
) -> tuple[TextLines, int]:
    """Write the sample to `directory`/sample.txt (language after language); returns it and its size."""
    languages = sorted(counts.languages)
    budget = cfg.max_sentences // len(languages)  # 0 stays 0: every sentence
    chosen = {lang: sample_indices(counts.languages[lang], budget) for lang in languages}
    path, written = directory / "sample.txt", 0
    with open(path, "w", encoding="utf-8") as out:
        for lang in languages:
            if split.jsonl:
                sentences = _jsonl_sentences(split.jsonl, lang, chosen[lang])
            else:
                sentences = _file_sentences(split.files[lang], chosen[lang])
            out.writelines(sentence + "\n" for sentence in sentences)
            written += len(sentences)
    if not written:
        raise UserError(f"the {split.name} split holds no text in {', '.join(languages)}")
    return TextLines(path), written


def _file_sentences(path: Path, rows: np.ndarray) -> list[str]:
    """The non-empty cleaned lines of `path` at `rows` (sorted); a line that is not valid UTF-8 is skipped."""
    found, first = [], 0
    with open(path, "rb") as handle:
        for chunk in line_chunks(handle, CHUNK_LINES):
            lo, hi = np.searchsorted(rows, [first, first + len(chunk)])
            picked = [chunk[row - first] for row in rows[lo:hi].tolist()]
            text, _ = decode_lines(picked, str(path), 1, skip_bad_lines=True)
            found += [sentence for sentence in text if sentence]
            first += len(chunk)
    return found


def _jsonl_sentences(path: Path, lang: str, rows: np.ndarray) -> list[str]:
    """The non-empty sentences of `lang` at `rows` (sorted) among the records of a JSON Lines file that hold
    it."""
    wanted, found, seen = set(rows.tolist()), [], 0
    for records, _ in jsonl_records(path, skip_bad_lines=True):
        for record in records:
            if record is not None and lang in record:
                if seen in wanted and record[lang]:
                    found.append(record[lang])
                seen += 1
    return found
