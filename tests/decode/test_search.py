"""The search loop under the greedy and beam rules, against a scripted model whose best answers are worked out
by hand and against reference searches written plainly."""

import dataclasses
import math
from collections.abc import Callable, Mapping

import pytest
import torch
from torch import Tensor
from torch.profiler import ProfilerActivity, profile

from nmt.config.sections import SearchConfig
from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.decode.search import CHECK_EVERY, Hypothesis, length_penalty, output_limits, search, trim
from nmt.decode.translator import search_options
from nmt.device.capture import Recorder, emulating
from nmt.errors import ConfigError
from nmt.models.base import Memory, Seq2Seq, State, Step, Wanted
from nmt.models.config import ModelConfig, RNNConfig, TransformerConfig
from nmt.models.rnn import RNNSeq2Seq
from nmt.models.transformer import TransformerSeq2Seq
from nmt.rules.beam import BeamSearch, Greedy

A, B, TAG = 4, 5, 6
# next-token probabilities after each prefix; anything unlisted ends with eos
SCRIPT = {
    (): {A: 0.6, B: 0.4},  # TAG has probability 0: forced, it must not count
    (A,): {A: 0.4, B: 0.3, EOS: 0.3},
    (B,): {EOS: 0.9, A: 0.1},
    (A, A): {EOS: 1.0},
    (TAG,): {B: 0.5, A: 0.4, EOS: 0.1},  # after the forced TAG, another language: B first
    (TAG, B): {B: 0.6, EOS: 0.4},
}


Script = Mapping[tuple[int, ...], Mapping[int, float]]


class ScriptedModel(Seq2Seq):
    """Log-probabilities come from a script (SCRIPT unless given); the state carries the tokens fed so far
    (bos first) in a row of fixed size, and how many there are."""

    def __init__(self, script: Script = SCRIPT) -> None:
        super().__init__()
        self.script = script

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        return {"src_mask": src_mask}

    def init_state(self, memory: Memory, max_len: int, hypotheses: int = 1) -> State:
        rows = memory["src_mask"].size(0) * hypotheses
        return {
            "fed": torch.zeros(rows, max_len, dtype=torch.long),
            "count": torch.zeros(rows, dtype=torch.long),
        }

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        fed = state["fed"].scatter(1, state["count"].unsqueeze(1), tokens.unsqueeze(1))  # (rows, max_len)
        count = state["count"] + 1
        log_probs = torch.full((tokens.size(0), 8), float("-inf"))
        for row, (seq, length) in enumerate(zip(fed.tolist(), count.tolist(), strict=True)):
            for token, p in self.script.get(tuple(seq[1:length]), {EOS: 1.0}).items():
                log_probs[row, token] = math.log(p)
        return Step(log_probs, {"fed": fed, "count": count})


def settings(beam: int, alpha: float, a: float, b: int, nbest: int = 1) -> SearchConfig:
    return SearchConfig(beam_size=beam, length_penalty=alpha, max_len_a=a, max_len_b=b, nbest=nbest)


def greedy(
    model: Seq2Seq, src: Tensor, mask: Tensor, cfg: SearchConfig, with_attention: bool = False
) -> list[list[Hypothesis]]:
    """The search loop under the greedy rule (the config's beam size is not read)."""
    return search(
        model, src, mask, Greedy(length_penalty=cfg.length_penalty), search_options(cfg, with_attention)
    )


def beam_search(
    model: Seq2Seq, src: Tensor, mask: Tensor, cfg: SearchConfig, with_attention: bool = False
) -> list[list[Hypothesis]]:
    """The search loop under the beam rule of the config's beam size."""
    rule = BeamSearch(beam_size=cfg.beam_size, length_penalty=cfg.length_penalty)
    return search(model, src, mask, rule, search_options(cfg, with_attention))


def tokens(found: list[list[Hypothesis]]) -> list[list[int]]:
    """The best hypothesis' tokens of each sentence."""
    return [hyps[0].tokens for hyps in found]


def one_sentence() -> tuple[Tensor, Tensor]:
    src = torch.tensor([[6, 7, EOS]])
    return src, src != 0


def test_greedy_follows_the_locally_best_token() -> None:
    src, mask = one_sentence()
    (hyp,) = greedy(ScriptedModel(), src, mask.unsqueeze(1), settings(1, 0.0, 2.0, 5))[0]
    assert hyp.tokens == [A, A] and hyp.score == pytest.approx(math.log(0.24))  # p = 0.6 * 0.4 * 1.0


def test_beam_search_finds_the_better_hypothesis() -> None:
    src, mask = one_sentence()
    found = beam_search(ScriptedModel(), src, mask.unsqueeze(1), settings(2, 0.0, 2.0, 5))
    assert tokens(found) == [[B]]  # p = 0.4 * 0.9 = 0.36


def test_beam_search_returns_the_n_best_sorted_by_score() -> None:
    src, mask = one_sentence()
    (found,) = beam_search(ScriptedModel(), src, mask.unsqueeze(1), settings(2, 0.0, 2.0, 5, nbest=2))
    assert [h.tokens for h in found] == [[B], [A, A]]  # p = 0.36, then 0.24 (before [A] at 0.18)
    assert [h.score for h in found] == pytest.approx([math.log(0.36), math.log(0.24)])


def test_beam_one_equals_greedy_on_the_script() -> None:
    src, mask = one_sentence()
    assert tokens(beam_search(ScriptedModel(), src, mask.unsqueeze(1), settings(1, 1.0, 2.0, 5))) == [[A, A]]


def forced(beam: int, a: float = 2.0, b: int = 5, alpha: float = 0.0, nbest: int = 1) -> list[Hypothesis]:
    """The one sentence searched with TAG forced after bos, by greedy (beam 1) or beam search."""
    src, mask = one_sentence()
    cfg = settings(beam, alpha, a, b, nbest)
    options = dataclasses.replace(search_options(cfg), prefix=(TAG,))
    rule = Greedy(length_penalty=alpha) if beam == 1 else BeamSearch(beam_size=beam, length_penalty=alpha)
    return search(ScriptedModel(), src, mask.unsqueeze(1), rule, options)[0]


def test_greedy_reads_the_forced_prefix_which_is_no_part_of_the_output() -> None:
    (hyp,) = forced(beam=1)
    assert hyp.tokens == [B, B] and hyp.score == pytest.approx(math.log(0.3))  # TAG's probability 0 not in it
    (limited,) = forced(beam=1, a=0.0, b=1)  # the limit counts the tokens after the prefix: one, then eos
    assert limited.tokens == [B] and limited.score == pytest.approx(math.log(0.5))


def test_beam_search_reads_the_forced_prefix() -> None:
    found = forced(beam=2, nbest=2)
    assert [h.tokens for h in found] == [[A], [B, B]]  # 0.4 × 1.0 beats greedy's 0.5 × 0.6
    assert [h.score for h in found] == pytest.approx([math.log(0.4), math.log(0.3)])


def test_the_length_penalty_counts_the_tokens_after_the_prefix() -> None:
    (hyp,) = forced(beam=2, alpha=1.0)
    assert hyp.tokens == [A] and hyp.score == pytest.approx(math.log(0.4) / length_penalty(2, 1.0))


def test_a_prefix_reads_like_a_teacher_forced_token() -> None:
    """Search after a forced prefix continues as if the decoder had been fed bos and the prefix; its
    attention rows are the hypothesis' tokens and eos, without the prefix's."""
    model, (src, mask) = random_transformer(10), random_batch(10)
    cfg = settings(3, 1.0, 1.5, 3)
    options = dataclasses.replace(search_options(cfg, True), prefix=(7,))
    limits = output_limits(mask, 1.5, 3).tolist()
    with torch.inference_mode():
        found = search(model, src, mask, BeamSearch(beam_size=3), options)
        for i, (hyp,) in enumerate(found):
            tgt_in = torch.tensor([[BOS, 7, *hyp.tokens]])
            out = model(src[i : i + 1], mask[i : i + 1], tgt_in, Wanted(attention=True))
            log_probs = out.logits.log_softmax(-1)[0, 1:]  # (len(tokens) + 1, vocab): after the prefix
            chosen = log_probs.gather(1, torch.tensor([*hyp.tokens, EOS]).unsqueeze(1)).squeeze(1)
            expected = chosen.sum() if len(hyp.tokens) < limits[i] else chosen[:-1].sum()  # eos forced: 0
            assert hyp.score == pytest.approx(float(expected) / length_penalty(len(hyp.tokens) + 1, 1.0))
            weights = out.attention[0, -1].mean(dim=0)[1:, : int(mask[i].sum())]  # the prefix's row dropped
            torch.testing.assert_close(hyp.attention, weights, atol=1e-5, rtol=1e-4)


def random_transformer(seed: int) -> TransformerSeq2Seq:
    torch.manual_seed(seed)
    arch = TransformerConfig(d_model=16, heads=2, ff_dim=32)
    cfg = ModelConfig(encoder_layers=1, decoder_layers=2, dropout=0.0, transformer=arch)
    return TransformerSeq2Seq(cfg, 12, 12, joint_vocab=True, pad=PAD).eval()


def random_batch(seed: int) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, 12, (6, 7), generator=generator)
    src[2, 4:] = 0
    src[4, 2:] = 0
    return src, (src != 0).unsqueeze(1)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_one_equals_greedy_on_random_models(seed: int, alpha: float) -> None:
    """Also in score: one definition (length-normalised) at every beam size, so scores compare."""
    model, (src, mask) = random_transformer(seed), random_batch(seed)
    beam, best = (
        beam_search(model, src, mask, settings(1, alpha, 1.5, 3)),
        greedy(model, src, mask, settings(1, alpha, 1.5, 3)),
    )
    assert tokens(beam) == tokens(best)
    assert [h[0].score for h in beam] == pytest.approx([h[0].score for h in best])


@pytest.mark.parametrize("beam", [2, 4])
def test_batched_beam_search_equals_one_sentence_at_a_time(beam: int) -> None:
    """Sentences finishing early leave the batch; that must not change anyone's result."""
    model, (src, mask) = random_transformer(3), random_batch(3)
    search = settings(beam, 1.0, 1.5, 3, nbest=beam)
    batched = beam_search(model, src, mask, search)
    alone = [beam_search(model, src[i : i + 1], mask[i : i + 1], search)[0] for i in range(src.size(0))]
    assert [[h.tokens for h in hyps] for hyps in batched] == [[h.tokens for h in hyps] for hyps in alone]
    for hyps in batched:
        assert len(hyps) == beam and [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_outputs_respect_the_length_limit() -> None:
    model, (src, mask) = random_transformer(4), random_batch(4)
    limits = output_limits(mask, 0.5, 1).tolist()
    for found in (
        greedy(model, src, mask, settings(1, 1.0, 0.5, 1)),
        beam_search(model, src, mask, settings(3, 1.0, 0.5, 1)),
    ):
        hyps = tokens(found)
        assert all(len(h) <= limit for h, limit in zip(hyps, limits, strict=True))
        assert all(EOS not in h for h in hyps)


def test_length_penalty_is_gnmt() -> None:
    assert length_penalty(1, 0.0) == 1.0
    assert length_penalty(7, 1.0) == pytest.approx(2.0)


# --- the search before it avoided host syncs, kept as a reference: outputs must not change ---------------


def banned_tokens(device: torch.device) -> Tensor:
    return torch.tensor([PAD, BOS], device=device)


def allowed(log_probs: Tensor, banned: Tensor) -> Tensor:
    return log_probs.index_fill(1, banned, float("-inf"))


def only_eos(log_probs: Tensor) -> Tensor:
    forced = torch.full_like(log_probs, float("-inf"))
    forced[:, EOS] = 0.0
    return forced


def reference_greedy(model: Seq2Seq, src: Tensor, mask: Tensor, a: float, b: int) -> list[list[int]]:
    """Greedy search that checks `finished.all()` after every step."""
    memory, limits = model.encode(src, mask), output_limits(mask, a, b)
    steps, banned = int(limits.max()) + 1, banned_tokens(src.device)
    state, token = model.init_state(memory, steps), src.new_full((src.size(0),), BOS)
    finished, outputs = torch.zeros_like(token, dtype=torch.bool), []
    for t in range(steps):
        step = model.decode_step(token, memory, state)
        token = (
            allowed(step.log_probs, banned)
            .argmax(-1)
            .masked_fill(limits <= t, EOS)
            .masked_fill(finished, EOS)
        )
        outputs.append(token)
        state, finished = step.state, finished | (token == EOS)
        if finished.all():
            break
    return trim(torch.stack(outputs, dim=1))


def reference_beam(model: Seq2Seq, src: Tensor, mask: Tensor, k: int, alpha: float, a: float, b: int) -> list:
    """Beam search that drops finished sentences from the batch after every step (`nonzero`)."""
    batch, limits = src.size(0), output_limits(mask, a, b)
    steps, banned = int(limits.max()) + 1, banned_tokens(src.device)
    memory = model.encode(src, mask)
    state, active = model.init_state(memory, steps, k), torch.arange(batch)
    scores = torch.zeros(batch, k)
    scores[:, 1:] = float("-inf")
    tokens, best_scores = src.new_full((batch * k, 1), BOS), torch.full((batch,), float("-inf"))
    best, count = src.new_full((batch, steps + 1), EOS), torch.zeros(batch, dtype=torch.long)
    for t in range(steps):
        n, step = active.size(0), model.decode_step(tokens[:, -1], memory, state)
        vocab = step.log_probs.size(-1)
        at_limit = (limits[active] <= t).repeat_interleave(k).unsqueeze(1)
        log_probs = torch.where(at_limit, only_eos(step.log_probs), allowed(step.log_probs, banned))
        top_scores, top_index = (scores.unsqueeze(-1) + log_probs.view(n, k, vocab)).view(n, -1).topk(2 * k)
        rows = top_index // vocab + torch.arange(n).unsqueeze(1) * k
        top_token, is_eos = top_index % vocab, top_index % vocab == EOS
        finished = is_eos & torch.isfinite(top_scores)
        finished[:, k:] = False
        for i in range(n):  # record the best finished hypothesis, sentence by sentence
            normalised = (top_scores[i] / length_penalty(t + 1, alpha)).masked_fill(
                ~finished[i], float("-inf")
            )
            if normalised.max() > best_scores[active[i]]:
                best_scores[active[i]] = normalised.max()
                prefix = tokens[rows[i, normalised.argmax()]]
                best[active[i], : t + 1], best[active[i], t + 1] = prefix, EOS
        count.index_add_(0, active, finished.sum(dim=1))
        scores, live = top_scores.masked_fill(is_eos, float("-inf")).topk(k, dim=1)
        live_rows = rows.gather(1, live).view(-1)
        tokens = torch.cat([tokens[live_rows], top_token.gather(1, live).view(-1, 1)], dim=1)
        state = model.reorder_state(step.state, live_rows)
        keep = (count[active] < k).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        keep_rows = (keep.unsqueeze(1) * k + torch.arange(k)).view(-1)
        active, scores, tokens = active[keep], scores[keep], tokens[keep_rows]
        memory, state = model.select_sentences(memory, state, keep)
    return trim(best[:, 1:])


def random_model(kind: str, seed: int) -> Seq2Seq:
    if kind == "transformer":
        return random_transformer(seed)
    torch.manual_seed(seed)
    rnn = RNNConfig(embedding_size=16, hidden_size=12)
    cfg = ModelConfig(type=kind, encoder_layers=1, decoder_layers=1, dropout=0.0, rnn=rnn)
    return RNNSeq2Seq(cfg, 12, 12, joint_vocab=True, pad=PAD).eval()


@pytest.mark.parametrize("kind", ["transformer", "rnn-bahdanau", "rnn-luong"])
@pytest.mark.parametrize("seed", [5, 6])
def test_search_gives_the_reference_outputs(kind: str, seed: int) -> None:
    """Random models finish their sentences at all sorts of steps, before, at and after the checks."""
    model, (src, mask) = random_model(kind, seed), random_batch(seed)
    with torch.inference_mode():
        assert tokens(greedy(model, src, mask, settings(1, 1.0, 3.0, 9))) == reference_greedy(
            model, src, mask, 3.0, 9
        )
        for beam in (2, 4):
            expected = reference_beam(model, src, mask, beam, 1.0, 3.0, 9)
            assert tokens(beam_search(model, src, mask, settings(beam, 1.0, 3.0, 9))) == expected


class NeverEnding(Seq2Seq):
    """A random RNN that never chooses eos: search runs to the length limit. Counts its steps. (An RNN step
    reads nothing back; a Transformer's on a CPU reads its position, which costs nothing there.)"""

    def __init__(self) -> None:
        super().__init__()
        self.model, self.steps = random_model("rnn-luong", 7), 0

    def encode(self, src: Tensor, src_mask: Tensor) -> Memory:
        return self.model.encode(src, src_mask)

    def init_state(self, memory: Memory, max_len: int, hypotheses: int = 1) -> State:
        return self.model.init_state(memory, max_len, hypotheses)

    def reorder_state(self, state: State, parents: Tensor) -> State:
        return self.model.reorder_state(state, parents)

    def select_sentences(self, memory: Memory, state: State, sentences: Tensor) -> tuple[Memory, State]:
        return self.model.select_sentences(memory, state, sentences)

    def decode_step(self, tokens: Tensor, memory: Memory, state: State) -> Step:
        self.steps += 1
        step = self.model.decode_step(tokens, memory, state)
        return Step(
            step.log_probs.index_fill(1, torch.tensor([EOS]), float("-inf")), step.state, step.attention
        )


def host_syncs(work: Callable[[], object]) -> int:
    """Operations that make the host wait for the device (reading a value back, or a data-dependent shape)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        work()
    return sum(e.name in ("aten::_local_scalar_dense", "aten::nonzero") for e in prof.events())


@pytest.mark.parametrize("beam", [1, 3])
def test_search_reads_the_device_once_every_few_steps(beam: int) -> None:
    """As on a GPU, where a read waits for the device (on a CPU the search checks after every step)."""
    model, (src, mask) = NeverEnding().eval(), random_batch(8)
    with emulating(Recorder()):
        if beam == 1:
            syncs = host_syncs(lambda: greedy(model, src, mask, settings(1, 1.0, 2.0, 9)))
        else:
            syncs = host_syncs(lambda: beam_search(model, src, mask, settings(beam, 1.0, 2.0, 9)))
    assert model.steps == int(output_limits(mask, 2.0, 9).max()) + 1 >= 2 * CHECK_EVERY
    assert syncs <= 1 + model.steps // CHECK_EVERY  # the length limit once, then one per check


@pytest.mark.parametrize("kind", ["transformer", "rnn-bahdanau", "rnn-luong"])
@pytest.mark.parametrize("beam", [1, 3])
def test_attention_is_that_of_a_teacher_forced_pass(kind: str, beam: int) -> None:
    """Search's attention per hypothesis (tokens + eos, source) is the last layer's mean of heads."""
    model, (src, mask) = random_model(kind, 9), random_batch(9)
    search = settings(beam, 1.0, 1.5, 3, nbest=beam)
    method = beam_search if beam > 1 else greedy
    with torch.inference_mode():
        found = method(model, src, mask, search, with_attention=True)
        assert tokens(method(model, src, mask, search)) == tokens(found)  # collecting changes nothing
        for i, hyps in enumerate(found):
            for hyp in hyps:
                tgt_in = torch.tensor([[BOS, *hyp.tokens]])
                forced = model(src[i : i + 1], mask[i : i + 1], tgt_in, Wanted(attention=True)).attention
                expected = forced[0, -1].mean(dim=0)[:, : int(mask[i].sum())]  # (tgt_len, src_len)
                torch.testing.assert_close(hyp.attention, expected, atol=1e-5, rtol=1e-4)


def test_nbest_is_at_most_the_beam_size() -> None:
    with pytest.raises(ConfigError, match=r"search\.nbest=3 exceeds search\.beam_size=2"):
        SearchConfig(beam_size=2, nbest=3)
