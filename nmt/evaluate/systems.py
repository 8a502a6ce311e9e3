"""Any system's output scored, and what `nmt evaluate` adds to a system's scores: a paired test against a
baseline (another run, which translates the same sources, or a file of hypotheses of the same test set) and
COMET.

`score_files` scores a hypotheses file against a references file with no run at all (the outputs of OPUS-MT,
of a commercial system, of another toolkit): the same metrics and intervals as a run's, and the same
comparisons. Files are read as text everywhere in nmt is (UTF-8, a byte order mark and CR line ends
accepted: nmt/data/corpus.py `read_lines`), and files that cannot be scored together are refused in one line
before anything is scored: an empty file, files of different line counts, or outputs of another test set of
the same length (Multi30k's test2016 and test2017 both have 1,000 lines): outputs whose lines share no more
words with their own references than with the references half the file away (`matches_references`).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.data.corpus import read_lines
from nmt.errors import UserError
from nmt.evaluate.comet import check_comet, comet_score
from nmt.evaluate.paired import TEST_NAMES, Test, paired_test
from nmt.evaluate.scores import score

# the baseline run's translations of the sources, and the file they are kept in
TranslateBaseline = Callable[[Path, list[str]], tuple[list[str], Path]]
MATCH_LINES = 20  # fewer lines than this are too few to tell another test set from a poor system
MATCH_Z = 3.0  # how many standard errors the words shared with their own references must exceed the others'


@dataclass(frozen=True)
class Judging:
    """What is added to a system's scores: a paired `test` against a baseline — the run at `baseline`
    (translating the same sources) or the hypotheses at `baseline_hypotheses` — and COMET with the model at
    `comet`; each where given."""

    baseline: Path | None = None
    baseline_hypotheses: Path | None = None
    test: Test = "bs"
    comet: Path | None = None

    def __post_init__(self) -> None:
        if self.baseline is not None and self.baseline_hypotheses is not None:
            raise UserError("--baseline and --baseline-hypotheses: give one baseline")

    @property
    def anything(self) -> bool:
        return self.baseline is not None or self.baseline_hypotheses is not None or self.comet is not None

    def check(self) -> None:
        """Refuse, before anything is translated or scored, a baseline file that is not there and a COMET
        model that cannot be loaded (no checkpoint, or no unbabel-comet package)."""
        path = self.baseline_hypotheses
        if path is not None and not path.is_file():
            raise UserError(f"--baseline-hypotheses {path}: no such file")
        if self.comet is not None:
            check_comet(self.comet)


def read_outputs(path: Path, option: str) -> list[str]:
    """The lines of a file given as `option`; a UserError for an empty one."""
    lines = read_lines(path)
    if not lines:
        raise UserError(f"{option} {path} is empty: nothing to score")
    return lines


def check_count(lines: list[str], option: str, path: Path, expected: int, of: str) -> None:
    """A UserError where a file given as `option` has not the `expected` lines, those of `of`."""
    if len(lines) != expected:
        raise UserError(
            f"{option} {path} has {len(lines)} lines but {of} has {expected}: the files must hold the same "
            f"test set, line for line"
        )


def _shared_words(hypothesis: str, reference: str) -> float:
    """The share of `hypothesis`' words (lowercased, with their counts) that `reference` holds too."""
    words = Counter(hypothesis.lower().split())
    return sum((words & Counter(reference.lower().split())).values()) / max(1, words.total())


def matches_references(hypotheses: list[str], references: list[str]) -> bool:
    """Whether `hypotheses` translate the sentences of `references`, line for line: whether each line shares
    more words with its own reference than with the one half the file away, by over MATCH_Z standard errors
    of the mean difference (a test of the same length scores about 0; a real system, however poor, far more).
    True for files of under MATCH_LINES lines, too few to tell."""
    count = len(references)
    if count < MATCH_LINES:
        return True
    gains = [
        _shared_words(line, references[i]) - _shared_words(line, references[(i + count // 2) % count])
        for i, line in enumerate(hypotheses)
    ]
    mean = statistics.fmean(gains)
    return mean > 0 and mean > MATCH_Z * statistics.stdev(gains) / math.sqrt(count)


def check_outputs(lines: list[str], option: str, path: Path, references: list[str], of: str) -> None:
    """A UserError where a file of outputs given as `option` is not of the test set of `references` (those
    of `of`): it has not as many lines, or its lines do not match them (`matches_references`)."""
    check_count(lines, option, path, len(references), of)
    if not matches_references(lines, references):
        raise UserError(
            f"{option} {path} does not translate {of} line for line: its lines share no more words with "
            f"their references than with other lines' (outputs of another test set, or of none?)"
        )


def baseline_of(
    judging: Judging,
    sources: list[str] | None,
    references: list[str],
    of: str,
    translate_baseline: TranslateBaseline,
) -> tuple[list[str], Path] | None:
    """The baseline's hypotheses and their file, where `judging` names one: read and checked to be outputs
    of the test set of `references` (those of `of`, named in errors), or translated from `sources` (None: not
    known) by the baseline run. A UserError first where the comparisons asked for need sources that are not
    known."""
    if sources is None:
        for option, given in (("--comet", judging.comet), ("--baseline RUN", judging.baseline)):
            if given is not None:
                raise UserError(f"{option} reads the source sentences: give --source FILE")
    if judging.baseline_hypotheses is not None:
        path = judging.baseline_hypotheses
        lines = read_outputs(path, "--baseline-hypotheses")
        check_outputs(lines, "--baseline-hypotheses", path, references, of)
        return lines, path
    if judging.baseline is None or sources is None:
        return None
    return translate_baseline(judging.baseline, sources)


def judged(
    hypotheses: list[str],
    references: list[str],
    sources: list[str] | None,
    judging: Judging,
    baseline: tuple[list[str], Path] | None,
) -> dict[str, Any]:
    """The comparisons `judging` asks for, of `hypotheses` of `sources` against `references`: `baseline`
    (the paired test against the `baseline_of` hypotheses) and `comet`."""
    found: dict[str, Any] = {}
    if baseline is not None:
        lines, path = baseline
        tested = paired_test(hypotheses, lines, references, judging.test)
        found["baseline"] = {
            "hypotheses": str(path),
            "test": TEST_NAMES[judging.test],
            "metrics": {name: comparison.rounded() for name, comparison in tested.items()},
        }
    if judging.comet is not None and sources is not None:
        found["comet"] = comet_score(judging.comet, sources, hypotheses, references)
    return found


def score_files(
    hypotheses: Path,
    references: Path,
    source: Path | None,
    judging: Judging,
    translate_baseline: TranslateBaseline,
) -> dict[str, Any]:
    """`hypotheses` scored against `references` (of `source`, where given), with the comparisons `judging`
    asks for."""
    hyps = read_outputs(hypotheses, "--hypotheses")
    refs = read_outputs(references, "--references")
    of = f"--references {references}"
    check_outputs(hyps, "--hypotheses", hypotheses, refs, of)
    sources = None if source is None else read_outputs(source, "--source")
    if source is not None and sources is not None:
        check_count(sources, "--source", source, len(refs), of)
    files = {"hypotheses": str(hypotheses), "references": str(references), "source": source and str(source)}
    baseline = baseline_of(judging, sources, refs, of, translate_baseline)
    return score(hyps, refs).as_dict() | files | judged(hyps, refs, sources, judging, baseline)
