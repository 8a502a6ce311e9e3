"""The `data.terminology` section: training a model to follow terms given inline in its source (Dinu et al.
2019, "Training Neural Machine Translation To Apply Terminology Constraints"; OpenNMT-py's terminology
transform). nmt/data/terminology.py annotates the pairs; nmt/data/glossary.py finds a glossary's terms."""

from __future__ import annotations

from dataclasses import dataclass

from nmt.errors import ConfigError
from nmt.limits import check_settings, setting

KEY = "data.terminology"


@dataclass(frozen=True)
class TerminologyConfig:
    """Trained annotation: in a share of the training pairs, source words aligned to target words are
    followed by those target words between markers, `TERM_START source TRANSLATION_START target TERM_END`,
    so that the model learns to copy a translation given that way; `nmt translate --glossary` then writes a
    glossary's terms into the source alike. The markers become user-defined pieces of the source vocabulary:
    text that holds one is read as the marker."""

    probability: float = setting(0.3, "share of the training pairs annotated", low=0.0, high=1.0)
    max_terms: int = setting(
        3, "most terms annotated in a pair (an annotated pair gets 1 to this many, drawn at random)", low=1
    )
    max_words: int = setting(3, "most words on either side of an annotated term", low=1)
    links: str | None = setting(
        None,
        "word links of the training split (Pharaoh, source-target, from 0, one line per line of the split; "
        "a multilingual run: one file per direction, NAME.SRC-TGT.EXT for NAME.EXT); absent: eflomal "
        "computes them (`pip install eflomal`, run as a program)",
    )
    term_start: str = setting("｟term｠", "the marker before an annotated source term")
    translation_start: str = setting("｟trans｠", "the marker between a source term and its translation")
    term_end: str = setting("｟/term｠", "the marker after the translation")

    def __post_init__(self) -> None:
        check_settings(self, f"{KEY}.")
        for name, marker in zip(("term_start", "translation_start", "term_end"), self.markers, strict=True):
            if not marker or any(char.isspace() for char in marker):
                raise ConfigError(f"{KEY}.{name}={marker!r} must be a non-empty string without spaces")
        if len(set(self.markers)) < 3:
            raise ConfigError(f"{KEY}: term_start, translation_start and term_end must be three markers")

    @property
    def markers(self) -> tuple[str, str, str]:
        return self.term_start, self.translation_start, self.term_end
