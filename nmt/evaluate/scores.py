"""Corpus-level sacreBLEU BLEU and chrF of detokenized hypotheses against raw references."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sacrebleu.metrics import BLEU, CHRF


@dataclass(frozen=True)
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    sentences: int

    def as_dict(self) -> dict[str, float | str | int]:
        return asdict(self)


def score(hypotheses: list[str], references: list[str]) -> Scores:
    """BLEU (13a tokenization, mixed case) and chrF with their signatures."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return Scores(
        bleu=round(bleu_score.score, 2),
        chrf=round(chrf_score.score, 2),
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
        sentences=len(hypotheses),
    )
