"""eflomal as an outside program: both directions and their symmetrization on a corpus whose alignment is
known (skipped where `pip install eflomal` has not installed it), and the one line when it is missing."""

import shutil

import pytest

from nmt.align import eflomal
from nmt.align.eflomal import align_with_eflomal
from nmt.align.pharaoh import SentenceLinks
from nmt.align.score import score_alignments
from nmt.data.synthetic import reordering_pairs
from nmt.errors import UserError


def installed() -> bool:
    try:
        eflomal.eflomal_program()
    except UserError:
        return False
    return True


@pytest.mark.skipif(not installed(), reason="eflomal is not installed (pip install eflomal)")
def test_eflomal_finds_the_known_alignment() -> None:
    """The target translates each source word and reverses their order: source word i is target word n-1-i."""
    src, tgt = reordering_pairs(400, 30, 2, 7, seed=3)
    src[5], tgt[5] = src[5] + " extra", tgt[5]  # one source word without a partner: indices stay in range
    found = align_with_eflomal(src, tgt, "grow-diag")
    truth = []
    for sentence in tgt:
        n = len(sentence.split())
        links = frozenset((i, n - 1 - i) for i in range(n))
        truth.append(SentenceLinks(links, links))
    for links in (found.forward, found.reverse, found.symmetrized):
        assert len(links) == len(src)
        assert score_alignments(links, truth).aer < 0.1


def test_a_missing_eflomal_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(UserError) as err:
        align_with_eflomal(["a"], ["b"])
    message = str(err.value)
    assert "pip install eflomal" in message and "GPL-3" in message and "\n" not in message
