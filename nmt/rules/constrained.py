"""Lexically constrained beam search with dynamic beam allocation (Post & Vilar 2018), vectorised over the
batch as Hu et al. (2019) do, and as fairseq's `LexicallyConstrainedBeamSearch` ranks candidates: a glossary's
target terms (each the subwords the target tokenizer writes for it after a space) must appear in an output.

A term is met each time its subwords appear in a row (a term given twice must appear twice); eos is forbidden
while one is unmet, until the output length limit ends the search (nmt/decode/search.py `at_limits`), and
`unmet` names the terms an output lacks. Each step the candidates are the beam's 2k best continuations, each
hypothesis' best one and, for every unmet term, the token that continues (or starts) it; a candidate's
*bank* is the number of term subwords it has produced (those of the terms met and the longest term prefix the
output ends with). The new beam takes the best of the highest bank, then the best of the next, … then each
bank's second, and so on (fairseq's striping), so that hypotheses on their way through a term keep a place
beside those that score best. With no terms it ranks as beam search.

The rule's state moves with its hypotheses (`hyp.ConstrainedBeamSearch.*`): each sentence's terms (padded),
their lengths and how often each must appear, and how often each has appeared, counted at the start of each
step for the token the last step chose. Every step has the same shapes and no host read: it replays from a
captured graph.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nmt.errors import UserError
from nmt.rules.beam import BeamSearch, Greedy
from nmt.rules.contract import Extensions, SearchRule, StepView

if TYPE_CHECKING:
    from torch import Tensor

log = logging.getLogger(__name__)

Terms = tuple[tuple[int, ...], ...]  # one sentence's target terms, as subword ids, in the order found


@dataclass(frozen=True)
class TargetTerm:
    """A term an output must hold: its text (as an unmet term is reported) and its target subword ids."""

    text: str
    ids: tuple[int, ...]


BANK_SPAN = 1 << 20  # more subwords than a sentence's terms hold: ranks banks within one sort key


@dataclass(frozen=True, kw_only=True)
class ConstrainedBeamSearch(BeamSearch):
    """Beam search whose outputs must hold each sentence's `terms` (one tuple per sentence of the batch; see
    the module). With a beam of 1 it is greedy search under the same rule."""

    terms: tuple[Terms, ...] = field(default=(), compare=False)  # per search: the graph keys its shapes

    title = "constrained beam search"

    def buffers(self, src: Tensor, width: int) -> dict[str, Tensor]:
        """Per hypothesis: `terms` (rows, C, L) each distinct term's subwords (0-padded), `lengths` and `need`
        (rows, C) its subword count and how often it must appear (0: a padding slot), `met` (rows, C) how
        often it has appeared so far."""
        import torch

        distinct = [
            sorted({term: sentence.count(term) for term in sentence}.items()) for sentence in self.terms
        ]
        slots = max(1, max(len(d) for d in distinct))
        longest = max([1, *(len(term) for d in distinct for term, _ in d)])
        terms = torch.zeros(len(distinct), slots, longest, dtype=torch.long)
        lengths = torch.ones(len(distinct), slots, dtype=torch.long)
        need = torch.zeros(len(distinct), slots, dtype=torch.long)
        for i, sentence in enumerate(distinct):
            for c, (term, count) in enumerate(sentence):
                terms[i, c, : len(term)] = torch.tensor(term)
                lengths[i, c], need[i, c] = len(term), count
        found = {"terms": terms, "lengths": lengths, "need": need, "met": torch.zeros_like(need)}
        return {name: t.to(src.device).repeat_interleave(width, dim=0) for name, t in found.items()}

    def extend(self, log_probs: Tensor, scores: Tensor, view: StepView) -> Extensions:
        import torch

        state = view.state
        terms, lengths, need, met = state["terms"], state["lengths"], state["need"], state["met"]
        n, k = scores.shape
        ends = suffix_matches(last_tokens(view, terms.size(2)), terms)  # (rows, C, L)
        met += ends.gather(2, (lengths - 1).unsqueeze(2)).squeeze(2).long()  # the last step's token
        eos = log_probs[:, view.eos]  # (rows,), a view: filled in place
        eos.masked_fill_((met < need).any(dim=1), float("-inf"))
        before = torch.cat([torch.ones_like(ends[:, :, :1]), ends[:, :, :-1]], dim=2)  # p − 1 tokens matched
        beam = BeamSearch.extend(self, log_probs, scores, view)  # the 2k best continuations
        assert beam.parents is not None
        best_score, best_token = log_probs.max(dim=1)  # (rows,): each hypothesis' best continuation
        term_tokens, term_scores = self.term_continuations(log_probs, before, terms, lengths, met < need)
        own = torch.arange(k, device=scores.device).expand(n, k)
        extra = torch.cat([own, own.repeat_interleave(terms.size(1), dim=1)], dim=1)  # (n, k + k·C)
        added = torch.cat([best_score.view(n, k), term_scores.view(n, -1)], dim=1) + scores.gather(1, extra)
        parents = torch.cat([beam.parents, extra], dim=1)  # (n, M)
        tokens = torch.cat([beam.tokens, best_token.view(n, k), term_tokens.view(n, -1)], dim=1)
        candidates = torch.cat([beam.scores, added], dim=1)
        candidates = without_repeats(candidates, parents, tokens, log_probs.size(1))
        rows = parents + torch.arange(n, device=scores.device).view(n, 1) * k  # (n, M)
        banks = self.banks(before[rows], terms[rows], lengths[rows], need[rows], met[rows], tokens)
        order = striped(candidates, banks)
        return Extensions(candidates.gather(1, order), tokens.gather(1, order), parents.gather(1, order))

    @staticmethod
    def term_continuations(
        log_probs: Tensor, before: Tensor, terms: Tensor, lengths: Tensor, unmet: Tensor
    ) -> tuple[Tensor, Tensor]:
        """For each hypothesis and unmet term, the token that continues the longest prefix of the term its
        output ends with (its first token where none), and that token's log-probability (-inf for a term
        met or a padding slot). (rows, C) each"""
        import torch

        positions = torch.arange(1, terms.size(2) + 1, device=terms.device)  # prefix lengths p
        open_ = before & (positions <= lengths.unsqueeze(2))  # (rows, C, L)
        longest = (open_ * positions).amax(dim=2)  # (rows, C): ≥ 1, the first token always continues
        token = terms.gather(2, (longest - 1).unsqueeze(2)).squeeze(2)  # (rows, C)
        found = log_probs.gather(1, token)  # (rows, C)
        return token, found.masked_fill(~unmet, float("-inf"))

    @staticmethod
    def banks(
        before: Tensor, terms: Tensor, lengths: Tensor, need: Tensor, met: Tensor, tokens: Tensor
    ) -> Tensor:
        """The bank of each candidate: the term subwords its output holds once it takes its token — of the
        terms met (each as often as needed) and the longest prefix it ends with of a term still unmet.
        before, terms (n, M, C, L); lengths, need, met (n, M, C) of the parent; tokens (n, M) → (n, M)"""
        import torch

        positions = torch.arange(1, terms.size(3) + 1, device=terms.device)
        within = positions <= lengths.unsqueeze(3)  # (n, M, C, L)
        hits = before & within & (terms == tokens.view(*tokens.shape, 1, 1))  # the token extends prefix p
        complete = hits.gather(3, (lengths - 1).unsqueeze(3)).squeeze(3)  # (n, M, C)
        after = met + complete.long()
        done = (torch.minimum(after, need) * lengths).sum(dim=2)  # (n, M)
        partial = (hits & (positions < lengths.unsqueeze(3))) * positions  # (n, M, C, L)
        partial = partial.amax(dim=3).masked_fill(after >= need, 0).amax(dim=2)  # (n, M)
        return done + partial


def last_tokens(view: StepView, width: int) -> Tensor:
    """The last `width` tokens each hypothesis output (-1 where it output fewer). (rows, width)"""
    import torch

    positions = view.step - width + 1 + torch.arange(width, device=view.step.device)  # (width,)
    found = view.tokens.index_select(1, positions.clamp(min=0))  # (rows, width)
    return found.masked_fill(positions < 1, -1)


def suffix_matches(window: Tensor, terms: Tensor) -> Tensor:
    """Whether each output ends with the first p subwords of each term, p = 1 … L: window (rows, L) the last
    L tokens, terms (rows, C, L) → (rows, C, L) bool, entry p − 1 for prefix length p."""
    import torch

    size = window.size(1)
    p = torch.arange(1, size + 1, device=window.device).view(size, 1)  # prefix lengths
    j = torch.arange(size, device=window.device).view(1, size)  # positions within the prefix
    aligned = window[:, (size - p + j).clamp(max=size - 1)]  # (rows, L(p), L(j)): prefix p's tokens
    equal = aligned.unsqueeze(1) == terms.unsqueeze(2)  # (rows, C, L(p), L(j))
    return (equal | (j >= p)).all(dim=3)


def without_repeats(scores: Tensor, parents: Tensor, tokens: Tensor, vocab: int) -> Tensor:
    """The candidates' scores with every repeat of a (hypothesis, token) pair at -inf but its best (a term's
    token at -inf, for a term met, may repeat a live one). (n, M)"""
    import torch

    by_score = scores.argsort(dim=1, descending=True, stable=True)
    keys = (parents * vocab + tokens).gather(1, by_score)  # (n, M), best first
    ranked, order = keys.sort(dim=1, stable=True)
    repeat = torch.cat(
        [torch.zeros_like(ranked[:, :1], dtype=torch.bool), ranked[:, 1:] == ranked[:, :-1]], 1
    )
    where = by_score.gather(1, order)  # each ranked key's candidate
    return scores.masked_fill(torch.zeros_like(repeat).scatter(1, where, repeat), float("-inf"))


def striped(scores: Tensor, banks: Tensor) -> Tensor:
    """The candidates' order: each bank's best, highest bank first, then each bank's second, …; candidates
    at -inf last. scores, banks (n, M) → (n, M) indices"""
    import torch

    by_score = scores.argsort(dim=1, descending=True, stable=True)
    by_bank = banks.gather(1, by_score).argsort(dim=1, stable=True)
    order = by_score.gather(1, by_bank)  # by bank, then by score
    bank = banks.gather(1, order)
    position = torch.arange(bank.size(1), device=bank.device).expand_as(bank)
    first = torch.cat([torch.ones_like(bank[:, :1], dtype=torch.bool), bank[:, 1:] != bank[:, :-1]], dim=1)
    rank = position - torch.where(first, position, 0).cummax(dim=1).values  # within its bank
    key = rank * BANK_SPAN + (BANK_SPAN - 1 - bank)
    key = key.masked_fill(~torch.isfinite(scores.gather(1, order)), BANK_SPAN * BANK_SPAN)
    return order.gather(1, key.argsort(dim=1, stable=True))


def unmet(output: Sequence[int], terms: Terms) -> list[int]:
    """The indices of `terms` (in their order) an output lacks, counted as the search counts them: each
    position where the output ends with a term's subwords is one appearance of it; a term given m times needs
    m."""
    appearances = {
        term: sum(tuple(output[end - len(term) : end]) == term for end in range(len(term), len(output) + 1))
        for term in set(terms)
    }
    missing = []
    for i, term in enumerate(terms):
        if appearances[term] > 0:
            appearances[term] -= 1
        else:
            missing.append(i)
    return missing


def unmet_texts(output: Sequence[int], terms: Sequence[TargetTerm]) -> tuple[str, ...]:
    """The texts of the `terms` an output lacks."""
    return tuple(terms[i].text for i in unmet(output, tuple(term.ids for term in terms)))


def constrained(rule: SearchRule, terms: Sequence[Sequence[TargetTerm]]) -> SearchRule:
    """The rule that searches a batch whose sentences must hold `terms`: `rule` itself where none does,
    else constrained beam search of its width and length penalty."""
    if not any(terms):
        return rule
    ids = tuple(tuple(term.ids for term in own) for own in terms)
    penalty, normalization = rule.length_penalty, rule.length_normalization
    return ConstrainedBeamSearch(
        beam_size=rule.width, length_penalty=penalty, length_normalization=normalization, terms=ids
    )


def checked_terms(
    terms: Sequence[Sequence[TargetTerm]] | None, rule: SearchRule, count: int, refused: str | None
) -> list[Sequence[TargetTerm]]:
    """Each of `count` sources' terms (none where `terms` is None); a UserError where the engine (`refused`
    names one without constrained search) or the rule cannot search under them, a warning for sentences
    with more terms than the beam has hypotheses."""
    if terms is None:
        return [() for _ in range(count)]
    if len(terms) != count:
        raise ValueError(f"{len(terms)} lists of terms for {count} sources")
    if any(terms) and refused:
        raise UserError(
            f"constrained search (a glossary for a run trained without annotation) runs on the torch "
            f"engine, not the {refused} one: translate with the run directory"
        )
    if any(terms) and type(rule) not in (BeamSearch, Greedy):
        raise UserError(
            f"a glossary's constrained search is beam search, not {rule.title}: drop --sampling and "
            f"--diverse-groups"
        )
    crowded = sum(len(own) > rule.width for own in terms)
    if crowded:
        log.warning(
            "%d sentences hold more glossary terms than the beam's %d hypotheses: some of their terms may go "
            "unmet (a wider --beam-size holds more)",
            crowded,
            rule.width,
        )
    return list(terms)
