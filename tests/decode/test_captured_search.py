"""Search with its steps replayed from captured graphs, on a CPU: the recorder (nmt/device/capture.py) stands
in for CUDA graphs, so the host's side of `search.cuda_graphs` — the checks every few steps, batches that
shrink to a few sizes, graphs keyed by the rule's settings and the buffers' shapes, replays into the captured
buffers — runs for every rule and option, every model family and an ensemble. Replayed steps must give what
the same steps give eagerly, and a second search of the same batch must capture nothing."""

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

from nmt.data.special_tokens import EOS
from nmt.decode.search import (
    CHECK_EVERY,
    MIN_STATIC_SENTENCES,
    Hypothesis,
    SearchOptions,
    search,
    sentences_kept,
)
from nmt.decode.step_graphs import StepGraphs
from nmt.device.capture import Recorder, emulating
from nmt.models.base import Memory, Seq2Seq, State, Step, hypothesis_rows
from nmt.models.ensemble import Ensemble
from nmt.rules.beam import BeamSearch, Greedy
from nmt.rules.constrained import ConstrainedBeamSearch
from nmt.rules.contract import Extensions, SearchRule, StepView
from nmt.rules.diverse_beam import DiverseBeamSearch
from nmt.rules.min_length import MinLength
from nmt.rules.no_repeat_ngram import NoRepeatNGram
from nmt.rules.sampling import Sampling
from nmt.rules.target_vocabulary import TargetVocabulary
from tests.decode.test_search import random_model

SENTENCES = 36  # more than 2 × MIN_STATIC_SENTENCES: the batch shrinks under captured steps
TAG = 7  # a token forced after bos, as a decoder-tag model's target tag


class Ending(Seq2Seq):
    """A model whose hypotheses end at all sorts of steps (a random model's run to their length limits): eos
    is forbidden until a hypothesis has taken its goal of 2 to `longest` steps (from its sentence and its
    row), then favoured. It counts its decoding steps (a recorder's capture runs one too)."""

    def __init__(self, model: Seq2Seq, longest: int = 12) -> None:
        super().__init__()
        self.model, self.steps, self.longest = model, 0, longest

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        return self.model.encode(src, src_mask) | {"sentences": src_mask.new_zeros(src_mask.size(0))}

    def init_state(self, memory: Memory, max_len: int, hypotheses: int = 1) -> State:
        state = self.model.init_state(memory, max_len, hypotheses)
        sentences = memory["sentences"]
        rows = torch.arange(sentences.size(0) * hypotheses, device=sentences.device)
        goal = 2 + (7 * (rows // hypotheses) + 3 * (rows % hypotheses)) % (self.longest - 1)  # (rows,)
        return state | {"goal": goal, "taken": torch.zeros_like(goal)}

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        self.steps += 1
        inner = {name: t for name, t in state.items() if name not in ("goal", "taken")}
        step = self.model.decode_step(tokens, memory, inner)
        taken = state["taken"] + 1
        log_probs = step.log_probs.clone()  # (rows, vocab)
        log_probs[:, EOS] += torch.where(taken >= state["goal"], 20.0, -20.0)
        return Step(log_probs, step.state | {"goal": state["goal"], "taken": taken}, step.attention)

    def reorder_state(self, state: State, parents: Tensor) -> State:
        inner = {name: t for name, t in state.items() if name not in ("goal", "taken")}
        own = {name: state[name].index_select(0, parents) for name in ("goal", "taken")}
        return self.model.reorder_state(inner, parents) | own

    def select_sentences(self, memory: Memory, state: State, sentences: Tensor) -> tuple[Memory, State]:
        hypotheses = state["goal"].size(0) // memory["sentences"].size(0)
        inner = {name: t for name, t in state.items() if name not in ("goal", "taken")}
        kept_memory, kept = self.model.select_sentences(memory, inner, sentences)
        rows = hypothesis_rows(sentences, hypotheses)
        own = {name: state[name].index_select(0, rows) for name in ("goal", "taken")}
        return kept_memory | {"sentences": memory["sentences"].index_select(0, sentences)}, kept | own


def model_of(family: str) -> Seq2Seq:
    if family == "ensemble":
        return Ensemble([random_model("transformer", 3), random_model("rnn-luong", 4)]).eval()
    return random_model(family, 3)


def sources(count: int = SENTENCES) -> tuple[Tensor, Tensor]:
    """`count` random sources of 2–7 subwords (ids 4–11) and their mask."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, 12, (count, 7), generator=generator)
    lengths = torch.randint(2, 8, (count,), generator=generator)
    src[torch.arange(7) >= lengths.unsqueeze(1)] = 0
    return src, (src != 0).unsqueeze(1)


@dataclass(frozen=True)
class Case:
    rule: Callable[[], SearchRule]
    options: SearchOptions


LIMITS = {"max_len_a": 1.5, "max_len_b": 4, "cuda_graphs": True}
TERMS = tuple(  # each sentence's terms for constrained search: none, one, a term twice, two of two subwords
    ((), ((7,),), ((9, 5),), ((10,), (10,)), ((4, 6), (8, 11)))[i % 5] for i in range(SENTENCES)
)
CASES = {
    "greedy": Case(Greedy, SearchOptions(**LIMITS)),
    "greedy, alignments and attention": Case(
        Greedy, SearchOptions(attention=True, alignments=True, **LIMITS)
    ),
    "beam 3, 3-best": Case(
        lambda: BeamSearch(beam_size=3, length_penalty=0.6), SearchOptions(nbest=3, **LIMITS)
    ),
    "beam 3, alignments, a prefix": Case(
        lambda: BeamSearch(beam_size=3),
        SearchOptions(alignments=True, prefix=(TAG,), banned=(0, 2, TAG), **LIMITS),
    ),
    "greedy, a prefix, attention": Case(
        Greedy, SearchOptions(attention=True, prefix=(TAG,), banned=(0, 2, TAG), **LIMITS)
    ),
    "diverse beam, 2 groups": Case(
        lambda: DiverseBeamSearch(beam_size=4, diverse_groups=2), SearchOptions(nbest=4, **LIMITS)
    ),
    "diverse beam, 3 groups finishing apart, 2-best": Case(
        lambda: DiverseBeamSearch(beam_size=6, diverse_groups=3, diversity_strength=2.0),
        SearchOptions(nbest=2, attention=True, **LIMITS),
    ),
    "beam 3, n-gram blocking, a minimum length": Case(
        lambda: BeamSearch(beam_size=3),
        SearchOptions(
            processors=(NoRepeatNGram(no_repeat_ngram_size=2), MinLength(min_length=3)), nbest=2, **LIMITS
        ),
    ),
    "beam 3, a target-language vocabulary": Case(
        lambda: BeamSearch(beam_size=3),
        SearchOptions(processors=(TargetVocabulary().forbidding((5, 6, 8, 11), 12),), nbest=3, **LIMITS),
    ),
    "constrained beam 3, 2-best": Case(
        lambda: ConstrainedBeamSearch(beam_size=3, terms=TERMS),
        SearchOptions(nbest=2, attention=True, **LIMITS),
    ),
    "constrained greedy, n-gram blocking": Case(
        lambda: ConstrainedBeamSearch(beam_size=1, terms=TERMS),
        SearchOptions(processors=(NoRepeatNGram(no_repeat_ngram_size=3),), **LIMITS),
    ),
    "sampling, 2 samples": Case(
        lambda: Sampling(samples=2, top_k=5, seed=3), SearchOptions(nbest=2, **LIMITS)
    ),
}


def same(found: list[list[Hypothesis]], expected: list[list[Hypothesis]]) -> None:
    """The same hypotheses, field by field, bit for bit."""
    assert [[h.tokens for h in hyps] for hyps in found] == [[h.tokens for h in hyps] for hyps in expected]
    assert [[h.score for h in hyps] for hyps in found] == [[h.score for h in hyps] for hyps in expected]
    assert [[h.alignment for h in hyps] for hyps in found] == [
        [h.alignment for h in hyps] for hyps in expected
    ]
    for hyps, others in zip(found, expected, strict=True):
        for h, other in zip(hyps, others, strict=True):
            assert (h.attention is None) == (other.attention is None)
            if h.attention is not None:
                torch.testing.assert_close(h.attention, other.attention, rtol=0, atol=0)


@pytest.mark.parametrize("family", ["transformer", "rnn-bahdanau", "rnn-luong", "ensemble"])
@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_replayed_steps_give_the_eager_hypotheses(family: str, case: Case) -> None:
    """Under the recorder, the same search with its steps eager (`cuda_graphs` off: the same checks and the
    same batch sizes) and replayed: the same hypotheses; each step replayed once, each distinct step
    captured once (a sampling rule is never captured)."""
    model, (src, mask) = Ending(model_of(family)), sources()
    recorder = Recorder()
    with torch.inference_mode(), emulating(recorder):
        eager = search(
            model, src, mask, case.rule(), SearchOptions(**{**vars(case.options), "cuda_graphs": False})
        )
        steps, model.steps = model.steps, 0
        replayed = search(model, src, mask, case.rule(), case.options)
    same(replayed, eager)
    graphs = getattr(model, "decoding_graphs", None)
    if case.rule().graph_safe:
        loop_steps = steps - len(case.options.prefix)  # a forced prefix is read before the loop
        assert isinstance(graphs, StepGraphs) and len(graphs.graphs) == recorder.captures >= 1
        assert recorder.replays == loop_steps and model.steps == steps + recorder.captures  # capture runs
    else:
        assert recorder.captures == recorder.replays == 0 and graphs is None


def test_a_rule_s_settings_key_its_graphs() -> None:
    """Two beam searches that differ in one setting capture a graph each: a graph captured for one setting
    never replays for the other."""
    model, (src, mask) = random_model("transformer", 3), sources(8)
    options = SearchOptions(**LIMITS)
    recorder = Recorder()
    with torch.inference_mode(), emulating(recorder):
        first = search(model, src, mask, BeamSearch(beam_size=3, length_penalty=0.0), options)
        captured = recorder.captures
        second = search(model, src, mask, BeamSearch(beam_size=3, length_penalty=2.0), options)
    assert recorder.captures == 2 * captured
    eager = search(
        model,
        src,
        mask,
        BeamSearch(beam_size=3, length_penalty=2.0),
        SearchOptions(**{**LIMITS, "cuda_graphs": False}),
    )
    scores = [h.score for hyps in second for h in hyps]
    assert scores == pytest.approx([h.score for hyps in eager for h in hyps])
    assert first != second


def test_one_graph_serves_every_target_vocabulary() -> None:
    """Two target languages' vocabularies are one kind of step: the second search replays the first one's
    graph of the full batch with its own forbidden ids copied in (those the model outputs when free), and
    gives what it gives eagerly, none of them output."""
    model, (src, mask) = Ending(random_model("transformer", 3)), sources(8)
    rule, recorder = BeamSearch(beam_size=3), Recorder()
    eager = SearchOptions(**{**LIMITS, "cuda_graphs": False})
    free = {token for hyps in search(model, src, mask, rule, eager) for token in hyps[0].tokens}
    forbidden = tuple(sorted(free - {EOS})[:3])
    first = TargetVocabulary().forbidding(tuple(i for i in range(4, 12) if i not in forbidden), 12)
    second = TargetVocabulary().forbidding(forbidden, 12)
    assert first.kind == second.kind and forbidden
    with torch.inference_mode(), emulating(recorder):
        search(model, src, mask, rule, SearchOptions(processors=(first,), **LIMITS))
        before = recorder.captures
        replayed = search(model, src, mask, rule, SearchOptions(processors=(second,), **LIMITS))
        after = recorder.captures
        del model.decoding_graphs  # the same search with no graph captured before
        search(model, src, mask, rule, SearchOptions(processors=(second,), **LIMITS))
        assert after - before < recorder.captures - after  # the full batch's graph was the first one's
        same(
            replayed,
            search(model, src, mask, rule, SearchOptions(**{**vars(eager), "processors": (second,)})),
        )
    outputs = {token for hyps in replayed for h in hyps for token in h.tokens}
    assert outputs and not outputs & set(forbidden)


@dataclass(frozen=True, kw_only=True)
class Penalised(Greedy):
    """A graph-safe rule with a setting of its own that its step bakes in."""

    bonus: float = 0.0

    def extend(self, log_probs: Tensor, scores: Tensor, view: StepView) -> Extensions:
        return super().extend(log_probs + self.bonus, scores, view)


def test_a_rule_s_kind_holds_every_setting() -> None:
    assert Penalised(bonus=0.0).kind != Penalised(bonus=1.0).kind
    assert Penalised(bonus=1.0).kind == Penalised(bonus=1.0).kind
    assert (
        BeamSearch(beam_size=4, length_penalty=0.6).kind
        != BeamSearch(beam_size=4).kind
        != BeamSearch(beam_size=5).kind
    )


@pytest.mark.parametrize(
    ("left", "active", "static", "kept"),
    [
        (3, 40, False, 3),  # eager: the searched ones, once a quarter are done
        (30, 40, False, 30),
        (31, 40, False, 40),  # fewer than a quarter done: they ride along
        (21, 40, True, 40),  # more than half searched: no shrink
        (17, 40, True, 40),  # a power of two that holds them is more than half
        (9, 40, True, MIN_STATIC_SENTENCES),
        (3, 1000, True, MIN_STATIC_SENTENCES),
        (100, 1000, True, 128),
        (5, 16, True, 16),
    ],
)
def test_a_static_batch_shrinks_to_few_sizes(left: int, active: int, static: bool, kept: int) -> None:
    assert sentences_kept(left, active, static) == kept


def test_a_static_search_checks_every_few_steps_and_shrinks_to_few_sizes() -> None:
    """The loop ends at a check (every CHECK_EVERY steps); the batch shrinks to a power of two sentences, no
    fewer than 16, once at most half of them are searched: few sizes, all kept with the model, so that a
    second search of the batch captures nothing. (Shrinking to the count of sentences left captured a size
    per check, more than a model keeps: each search captured them all again.)"""
    model, (src, mask) = Ending(random_model("transformer", 3), longest=64), sources(100)
    options = SearchOptions(max_len_a=1.0, max_len_b=70, cuda_graphs=True)
    recorder = Recorder()
    with torch.inference_mode(), emulating(recorder):
        first = search(model, src, mask, Greedy(), options)
        steps, captures = model.steps, recorder.captures
        assert search(model, src, mask, Greedy(), options) == first
    assert recorder.captures == captures and model.steps == 2 * steps - captures
    assert (steps - captures) % CHECK_EVERY == 0 and max(len(h[0].tokens) for h in first) > 50
    graphs = getattr(model, "decoding_graphs", None)
    assert isinstance(graphs, StepGraphs) and recorder.captures == len(graphs.graphs)
    sizes = {shape for _, _, shapes in graphs.graphs for name, shape, _ in shapes if name == "sentence.index"}
    assert sizes == {(100,), (32,), (MIN_STATIC_SENTENCES,)}
