"""Symmetrization: one alignment from the links of two directional aligners (or models) of a sentence pair.

`forward` holds the links of the source → target direction (each target word aligned to at most one source
word, for a statistical aligner), `reverse` those of target → source, both as (source word, target word). The
methods:

- `intersection`, `union`: of the two sets.
- `grow-diag`: the strict "grow-diagonal" of lilt/alignment-scripts (`combine_bidirectional_alignments.py`),
  the variant behind the published AERs of fast_align and GIZA++ that nmt compares with: start from the
  intersection; scan the cells source word by source word, target word by target word, and beside each link
  add a neighbour (of the 8 around it) that the union holds when **both** its words are still unaligned;
  repeat until nothing is added. (Only diagonal neighbours can ever qualify: a horizontal or vertical one
  shares a word with the link it grows from.)
- `grow-diag-moses`: Moses' `grow-diag` (Koehn et al., symal.cpp): the same growth, but a neighbour is added
  when **either** of its words is unaligned, the links visited in Moses' order (by target, then source word;
  neighbours left, up, right, down, then the diagonals).
- `grow-diag-final-and`: Moses' `grow-diag-final-and`: `grow-diag-moses`, then every union link whose two
  words are both still unaligned, first those only the forward direction holds, then those only the reverse
  one holds (each in Moses' order).

On the fixture of fast_align's En–Fr links the strict `grow-diag` scores AER 10.5 (the published figure),
`grow-diag-moses` 14.6 and `grow-diag-final-and` 15.2.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from typing import Literal, get_args

from nmt.align.link_files import LinkFile, read_pair
from nmt.align.pharaoh import Link, pharaoh_text

Method = Literal["intersection", "union", "grow-diag", "grow-diag-moses", "grow-diag-final-and"]
METHODS: tuple[Method, ...] = get_args(Method)

# The order in which lilt's script tried the neighbours when it wrote the published outputs: its set of
# (source, target) offsets as CPython before 3.8 iterated it (3.8 changed the hash of tuples, and so the
# order; this one reproduces the stored grow-diagonal files line for line).
_STRICT_NEIGHBOURS = ((0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, 0), (1, -1), (1, 1))
# Moses' symal.cpp, as (target, source) offsets: left, up, right, down, then the diagonals.
_MOSES_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def symmetrize(forward: Iterable[Link], reverse: Iterable[Link], method: Method) -> set[Link]:
    """The links of one sentence pair that `method` keeps of the two directions' (see the module)."""
    forward, reverse = set(forward), set(reverse)
    match method:
        case "intersection":
            return forward & reverse
        case "union":
            return forward | reverse
        case "grow-diag":
            return _grow_diag_strict(forward, reverse)
        case "grow-diag-moses":
            return _grow_diag_moses(forward, reverse, final_and=False)
        case "grow-diag-final-and":
            return _grow_diag_moses(forward, reverse, final_and=True)
    raise ValueError(f"unknown symmetrization {method!r}; expected one of {METHODS}")


def _grow_diag_strict(forward: set[Link], reverse: set[Link]) -> set[Link]:
    """lilt/alignment-scripts' grow_diag: cells in source-major order over the union's extent, a neighbour
    added when both its words are unaligned."""
    union, links = forward | reverse, forward & reverse
    if not union:
        return links
    src_len, tgt_len = max(i for i, _ in union) + 1, max(j for _, j in union) + 1
    src_aligned, tgt_aligned = {i for i, _ in links}, {j for _, j in links}
    grown = True
    while grown:
        grown = False
        for i, j in itertools.product(range(src_len), range(tgt_len)):
            if (i, j) not in links:
                continue
            for di, dj in _STRICT_NEIGHBOURS:
                new_i, new_j = i + di, j + dj
                if new_i not in src_aligned and new_j not in tgt_aligned and (new_i, new_j) in union:
                    links.add((new_i, new_j))
                    src_aligned.add(new_i)
                    tgt_aligned.add(new_j)
                    grown = True
    return links


def _grow_diag_moses(forward: set[Link], reverse: set[Link], final_and: bool) -> set[Link]:
    """Moses' symal.cpp `printgrow` with diagonal neighbours (and `final` with `both`): points kept as
    (target, source), sorted as its std::set keeps them; a point added during a scan is visited in the same
    scan when it sorts after the current one, as a std::set iterator does."""
    union = {(j, i) for i, j in forward | reverse}  # (target, source)
    points = sorted((j, i) for i, j in forward & reverse)
    tgt_aligned, src_aligned = {j for j, _ in points}, {i for _, i in points}

    def add(point: tuple[int, int]) -> None:
        bisect.insort(points, point)
        tgt_aligned.add(point[0])
        src_aligned.add(point[1])

    grown = True
    while grown:
        grown = False
        k = 0
        while k < len(points):
            j, i = current = points[k]
            for dj, di in _MOSES_NEIGHBOURS:
                point = (j + dj, i + di)
                if point in union and not (point[0] in tgt_aligned and point[1] in src_aligned):
                    add(point)
                    grown = True
            k = bisect.bisect_right(points, current)
    if final_and:
        for direction, other in ((forward, reverse), (reverse, forward)):
            for j, i in sorted((j, i) for i, j in direction - other):
                if j not in tgt_aligned and i not in src_aligned:
                    add((j, i))
    return {(i, j) for j, i in points}


def symmetrize_files(
    forward: LinkFile,
    reverse: LinkFile,
    method: Method,
    lengths: Sequence[Link] | None = None,
    text: str = "",
) -> str:
    """The Pharaoh text (0-based, source-target) of two directional Pharaoh files symmetrized line by line,
    each read and checked as nmt/align/link_files.py does (against the words of each sentence pair of `text`,
    `lengths`, when given)."""
    advice = f"{reverse.other_way()} if {reverse.path} names the target word first"
    forward_links, reverse_links = read_pair(forward, reverse, lengths, text, advice)
    pairs = zip(forward_links, reverse_links, strict=True)
    return pharaoh_text(symmetrize(f.possible, r.possible, method) for f, r in pairs)
