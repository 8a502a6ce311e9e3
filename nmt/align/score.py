"""The alignment error rate of Och & Ney (2003), "A Systematic Comparison of Various Statistical Alignment
Models", section 5: hypothesis links A against gold sure links S and possible links P (P ⊇ S),

    precision = |A∩P| / |A|,   recall = |A∩S| / |S|,   AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|),

each count summed over the corpus before dividing (as lilt/alignment-scripts' aer.py does)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from nmt.align.link_files import LinkFile, read_pair
from nmt.align.pharaoh import Link, SentenceLinks
from nmt.errors import UserError


@dataclass(frozen=True)
class AlignmentScores:
    """AER, precision and recall (fractions, 0..1) and the link counts they come from."""

    aer: float
    precision: float
    recall: float
    links: int  # |A|
    sure: int  # |S|
    possible: int  # |P|, the sure links included
    sentences: int

    def describe(self) -> str:
        """One line, in percent: `AER 10.5  precision 90.8  recall 87.8  (5374 links; gold …)`."""
        percent = (
            f"AER {100 * self.aer:.1f}  precision {100 * self.precision:.1f}  recall {100 * self.recall:.1f}"
        )
        counts = (
            f"{self.links} links; gold {self.sure} sure, {self.possible} possible; {self.sentences} pairs"
        )
        return f"{percent}  ({counts})"


def score_alignments(hypotheses: Sequence[Iterable[Link]], gold: Sequence[SentenceLinks]) -> AlignmentScores:
    """Score the links of each sentence pair against its gold links (the same number of pairs). A corpus
    without hypothesis links has precision 0; one without sure links recall 0."""
    if len(hypotheses) != len(gold):
        raise ValueError(f"{len(hypotheses)} hypothesis lines but {len(gold)} gold lines")
    found = sure = possible = hit_sure = hit_possible = 0
    for links, reference in zip(hypotheses, gold, strict=True):
        hypothesis = set(links)
        found += len(hypothesis)
        sure += len(reference.sure)
        possible += len(reference.possible | reference.sure)
        hit_sure += len(hypothesis & reference.sure)
        hit_possible += len(hypothesis & (reference.possible | reference.sure))
    if found + sure == 0:
        raise UserError("neither the hypothesis nor the gold holds a link: there is nothing to score")
    return AlignmentScores(
        aer=1.0 - (hit_sure + hit_possible) / (found + sure),
        precision=hit_possible / found if found else 0.0,
        recall=hit_sure / sure if sure else 0.0,
        links=found,
        sure=sure,
        possible=possible,
        sentences=len(gold),
    )


def score_files(
    hypothesis: LinkFile, gold: LinkFile, lengths: Sequence[Link] | None = None, text: str = ""
) -> AlignmentScores:
    """Score a Pharaoh file against a gold one (`p`/`?` links possible, `-` sure; in the hypothesis every link
    counts, whatever its mark), each read and checked as nmt/align/link_files.py does (against the words of
    each sentence pair of `text`, `lengths`, when given)."""
    advice = (
        f"{hypothesis.other_way()} if {hypothesis.path} names the target word first "
        f"({gold.other_way()} if {gold.path} does)"
    )
    found, reference = read_pair(hypothesis, gold, lengths, text, advice)
    return score_alignments([line.possible for line in found], reference)
