"""What decoding returns (`Translator.decode`): each source line's hypotheses as text, subwords, scores and,
when asked, attention and word links."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from nmt.align.pharaoh import Link
from nmt.decode.confidence import Suspicion


@dataclass(frozen=True)
class DecodedHypothesis:
    """One hypothesis, decoded: its text, score, token ids, subwords ending with '</s>' (none for an empty
    source) and, when asked, its attention (layers, heads, len(pieces), len(source pieces)) and its word
    alignment: (source word, output word) links, from 0, sorted, each output subword linked to the source
    subword it attended most under the translator's `reading` (`SearchOptions.alignments`); the words are
    those of the source line and `text`. `mean_log_prob` and `suspect`: how far to trust it
    (nmt/decode/confidence.py: its mean log-probability per token, and why it looks degenerate, if it
    does). `unmet_terms`: under constrained search, the glossary's target terms it lacks (None: searched
    without a glossary's terms)."""

    text: str
    score: float
    tokens: list[int]
    pieces: list[str]
    attention: Tensor | None = None
    alignment: list[Link] | None = None
    mean_log_prob: float | None = None
    suspect: tuple[Suspicion, ...] = ()
    unmet_terms: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DecodedLine:
    """One source line: its subwords ending with '</s>' (none for an empty line) and its hypotheses, best
    first."""

    source_pieces: list[str]
    hypotheses: list[DecodedHypothesis]

    @property
    def best(self) -> DecodedHypothesis:
        return self.hypotheses[0]
