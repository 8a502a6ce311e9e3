"""One search loop for every search rule and processor (nmt/rules/) and every model (the Seq2Seq contract).

A step works in place on a dict of tensors, the search's buffers, with no host sync, so that a CUDA graph can
replay it whole (nmt/decode/step_graphs.py). The buffers are named by what they belong to:

- `memory.*`, `state.*`: the model's memory (per sentence) and decoder state (per live hypothesis);
- `sentence.*`: per sentence still searched — its index in the batch, output limit, live scores (sentences,
  width), count of finished hypotheses in each of the rule's groups (sentences, groups) and, for alignments,
  the positions no token aligns to;
- `hyp.*`: per live hypothesis (sentences × width rows) — its last token, its tokens so far and, when asked,
  the attention it paid and its alignment (the source position each of its tokens attended most). Every
  `hyp.*` field moves with its hypothesis when a rule reorders them, leaves with its sentence, and is kept in
  `best.*` when the hypothesis finishes: a field that travels with a hypothesis (a constraint's state) is one
  more `hyp.` entry, as the buffers each rule and processor declares are (`hyp.<Part>.<name>`);
- `best.*`: per sentence of the batch, each group's best finished hypotheses (`slots`: ⌈nbest / groups⌉ of
  each group, group after group).
- `search.*`: what every step reads the same for every hypothesis, each rule's and processor's constants
  (`search.<Part>.<name>`).

Where steps are captured (a GPU: nmt/device/capture.py `capture_for`, the one place that decides), the host
reads "how many sentences are still searched?" every `CHECK_EVERY` steps, and once at most half are, the done
ones leave the batch down to a power of two of at least `MIN_STATIC_SENTENCES` sentences (`sentences_kept`):
a search captures a few batch sizes, and the next search of the same batch replays them. On a CPU, where
reading a value costs nothing, it checks after every step, and the done sentences leave once they are a
quarter of the batch (`EAGER_DONE_SHARE`): few steps are spent on them, and the caches move seldom.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import overload

import torch
from torch import Tensor

from nmt.data.special_tokens import BOS, EOS, PAD
from nmt.decode.step_graphs import Buffers, run_step
from nmt.device.capture import capture_for
from nmt.models.base import Memory, Seq2Seq, State, Step, hypothesis_rows, prefixed, unprefixed
from nmt.rules.contract import Extensions, Part, Processor, SearchRule, StepView

CHECK_EVERY = 8  # decoding steps between two reads of "is every sentence finished?" where steps are captured
MIN_STATIC_SENTENCES = (
    16  # where steps are captured, a batch never shrinks below this (a few sizes to capture)
)
EAGER_DONE_SHARE = 0.25  # eager (a CPU): the done sentences leave once they are this share of the batch


@dataclass(frozen=True)
class Hypothesis:
    """One output of search: tokens without bos/eos, its score (`score`) and, when asked, the
    encoder-decoder attention paid for each token and the final eos (len(tokens) + 1, src_len), and the
    alignment: for each token, the source position (from 0) it attended most of those that hold a word's
    subword (not eos, nor an `unaligned` id), or None where a reading's null slot leaves it unaligned
    (nmt/align/reading.py). `mean_log_prob`: the mean log-probability of its tokens and eos, the length
    penalty undone (nmt/decode/confidence.py; set by the translator that searched it). `unmet_terms`: under
    constrained search, the target terms it lacks (set by the translator; None: searched without terms)."""

    tokens: list[int]
    score: float
    attention: Tensor | None = None
    alignment: list[int | None] | None = None
    mean_log_prob: float | None = None
    unmet_terms: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SearchOptions:
    """What a search returns and its limits, whatever the rule: `nbest` hypotheses per sentence (at most the
    rule's width), the attention search paid when `attention`, each token's most attended source token when
    `alignments`, outputs of at most a × source length + b tokens before eos, `banned` ids never output, CUDA
    graphs when `cuda_graphs` (and every part allows them), and the `processors` that change each step's
    log-probabilities before the rule sees them, in order.

    The attention search pays (and aligns with) is the one a decoding step returns: a Transformer's last
    decoder layer, the mean of its heads; an RNN's one attention; an ensemble's mean of its members'.

    `prefix`: tokens forced after bos, read by the decoder before search begins (a multilingual model's
    decoder tag). They are no part of a hypothesis: not in its tokens, its score or its length (the length
    penalty's and the output limit's), nor in its attention rows or alignments. `unaligned`: source ids that
    no token aligns to, as eos (a multilingual model's encoder tags)."""

    nbest: int = 1
    attention: bool = False
    alignments: bool = False
    max_len_a: float = 1.5
    max_len_b: int = 10
    cuda_graphs: bool = False
    banned: tuple[int, ...] = (PAD, BOS)
    prefix: tuple[int, ...] = ()
    unaligned: tuple[int, ...] = ()
    processors: tuple[Processor, ...] = ()


def output_limits(src_mask: Tensor, max_len_a: float, max_len_b: int) -> Tensor:
    """Maximum number of output tokens before eos for each sentence: a * source length + b. (batch,)"""
    src_len = src_mask.sum(dim=(1, 2))  # (batch,)
    return (src_len * max_len_a + max_len_b).long().clamp(min=1)


@torch.inference_mode()
def search(
    model: Seq2Seq, src: Tensor, src_mask: Tensor, rule: SearchRule, options: SearchOptions
) -> list[list[Hypothesis]]:
    """Each sentence's `options.nbest` best finished hypotheses under `rule` (fewer where fewer were found):
    each of the rule's groups' best, best first, then each group's second, and so on (one group: best first).
    A group is done once `rule.width / rule.groups` of its hypotheses finished, a sentence once each of its
    groups is done or it reached its length limit (where only eos may follow, adding 0 to the score)."""
    if options.nbest > rule.width:
        raise ValueError(f"nbest={options.nbest} exceeds the rule's {rule.width} hypotheses per sentence")
    limits = output_limits(src_mask, options.max_len_a, options.max_len_b)
    max_steps = int(limits.max()) + 1  # the host learns the loop's length once
    buffers = start(model, model.encode(src, src_mask), src, limits, rule, options, max_steps)
    capture = capture_for(src.device)  # None: eager, and reading a value on the host costs nothing
    parts: tuple[Part, ...] = (rule, *options.processors)
    graphs = capture if options.cuda_graphs and all(part.graph_safe for part in parts) else None
    every = CHECK_EVERY if capture else 1
    step = functools.partial(search_step, model, rule, options.processors)
    kind = tuple(part.kind for part in parts)
    for t in range(max_steps):
        buffers = run_step(graphs, model, kind, step, buffers)
        if t % every != every - 1:
            continue
        searched = still_searched(buffers, rule).any(dim=1)  # (active,)
        left = int(searched.sum())  # the check's one host read
        if left == 0:
            break
        kept = sentences_kept(left, searched.size(0), static=capture is not None)
        if kept < searched.size(0):
            buffers = keep_sentences(model, buffers, searched, kept, rule.width)
    return results(buffers, src_mask, options.nbest)


def still_searched(buffers: Mapping[str, Tensor], rule: SearchRule) -> Tensor:
    """Whether each group of each sentence still searches: fewer than width / groups of its hypotheses
    finished. (sentences, groups) bool"""
    return buffers["sentence.finished"] < rule.width // rule.groups


def best_slots(nbest: int, groups: int) -> int:
    """The finished hypotheses kept per sentence: each group's ⌈nbest / groups⌉ best."""
    return groups * -(-nbest // groups)


def sentences_kept(left: int, active: int, static: bool) -> int:
    """How many of the `active` sentences stay in the batch when `left` of them are still searched. Eager:
    all of them until `EAGER_DONE_SHARE` of them are done, then the searched ones (moving the batch's caches
    costs more than a few done rows ride along). Static (steps captured, where each batch size is a capture):
    all of them until at most half are searched, then the smallest power of two that holds the searched ones
    and `MIN_STATIC_SENTENCES` (some done sentences ride along)."""
    if not static:
        return left if active - left >= EAGER_DONE_SHARE * active else active
    kept = max(MIN_STATIC_SENTENCES, 1 << (left - 1).bit_length())
    return kept if kept <= active // 2 else active


def start(
    model: Seq2Seq,
    memory: Memory,
    src: Tensor,
    limits: Tensor,
    rule: SearchRule,
    options: SearchOptions,
    max_steps: int,
) -> Buffers:
    """The buffers of a search before its first step (see the module's docstring)."""
    batch, width, n, device = src.size(0), rule.width, best_slots(options.nbest, rule.groups), src.device
    tokens = src.new_full((batch * width, max_steps + 1), EOS)  # bos, tokens …, eos-filled
    tokens[:, 0] = BOS
    state = model.init_state(memory, max_steps + len(options.prefix), width)
    state, last = read_prefix(model, memory, state, options.prefix, src.new_full((batch * width,), BOS))
    hyp = {"last": last, "tokens": tokens}
    constants: Buffers = {}
    for part in (rule, *options.processors):
        hyp |= prefixed(part.buffers(src, width), f"{type(part).__name__}.")
        constants |= prefixed(part.constants(device), f"{type(part).__name__}.")
    best = {"scores": torch.full((batch, n), float("-inf"), device=device)}
    best["tokens"] = src.new_full((batch, n, max_steps + 1), EOS)
    if options.attention:  # one row per token and the final eos
        hyp["attention"] = torch.zeros(batch * width, max_steps, src.size(1), device=device)
        best["attention"] = torch.zeros(batch, n, max_steps, src.size(1), device=device)
    sentence = {
        "index": torch.arange(batch, device=device),
        "limit": limits,
        "scores": rule.start(batch, device),
        "finished": torch.zeros(batch, rule.groups, dtype=torch.long, device=device),
    }
    if options.alignments:  # per token, a source position; the positions no token aligns to
        hyp["alignment"] = src.new_zeros(batch * width, max_steps)
        best["alignment"] = src.new_zeros(batch, n, max_steps)
        sentence["unaligned"] = torch.isin(src, src.new_tensor((PAD, EOS, *options.unaligned)))
    return (
        prefixed(memory, "memory.")
        | prefixed(state, "state.")
        | prefixed(sentence, "sentence.")
        | prefixed(hyp, "hyp.")
        | prefixed(best, "best.")
        | prefixed(constants, "search.")
        | {"t": torch.zeros((), dtype=torch.long, device=device), "banned": src.new_tensor(options.banned)}
    )


def read_prefix(
    model: Seq2Seq, memory: Memory, state: State, prefix: tuple[int, ...], bos: Tensor
) -> tuple[State, Tensor]:
    """The decoder's state after reading bos and the forced `prefix` but its last token, and the token that
    the first search step reads (bos without a prefix, else the prefix's last token), (rows,) like `bos`."""
    last = bos
    for token in prefix:
        state = model.decode_step(last, memory, state).state  # its prediction is overruled by `token`
        last = torch.full_like(bos, token)
    return state, last


def search_step(
    model: Seq2Seq, rule: SearchRule, processors: tuple[Processor, ...], buffers: Mapping[str, Tensor]
) -> None:
    """One step, in place: every live hypothesis takes a token; the processors change the log-probabilities;
    the rule proposes continuations; finished ones are kept, the rule's first `width` others live on."""
    memory, state = unprefixed(buffers, "memory."), unprefixed(buffers, "state.")
    step = model.decode_step(buffers["hyp.last"], memory, state)
    t = buffers["t"]
    log_probs = step.log_probs.index_fill_(1, buffers["banned"], float("-inf"))  # (rows, vocab)
    if "hyp.attention" in buffers:
        buffers["hyp.attention"].index_copy_(1, t.view(1), step_attention(step).unsqueeze(1).float())
    if "hyp.alignment" in buffers:
        attended = most_attended(step_attention(step), buffers["sentence.unaligned"], rule.width)
        buffers["hyp.alignment"].index_copy_(1, t.view(1), attended.unsqueeze(1))
    for processor in processors:
        log_probs = processor.process(log_probs, view(buffers, processor, rule.width))
    found = rule.extend(log_probs, buffers["sentence.scores"], view(buffers, rule, rule.width))
    found = at_limits(found, buffers, rule.width)
    sentences, candidates = found.scores.shape
    offsets = torch.arange(sentences, device=t.device).unsqueeze(1) * rule.width  # (sentences, 1)
    if found.parents is None:
        rows = offsets + torch.arange(candidates, device=t.device)  # (sentences, width)
    else:
        rows = offsets + found.parents
    record_finished(buffers, found, rows, rule)
    live_scores = found.scores.masked_fill(found.tokens == EOS, float("-inf"))  # (sentences, width)
    tokens = found.tokens
    state = step.state
    if found.parents is not None:
        live = found.live  # (sentences, width): the candidates that live on, in their new order
        assert live is not None  # at_limits names them
        live_scores, tokens = live_scores.gather(1, live), tokens.gather(1, live)
        live_rows = rows.gather(1, live).view(-1)
        for name, field in unprefixed(buffers, "hyp.").items():
            if name != "last":
                field.copy_(field.index_select(0, live_rows))
        state = model.reorder_state(state, live_rows)
    done = ~still_searched(buffers, rule)  # (sentences, groups): a done group's hypotheses stop
    live_scores = live_scores.masked_fill(done.repeat(1, rule.width // rule.groups), float("-inf"))
    buffers["hyp.tokens"].index_copy_(1, (t + 1).view(1), tokens.reshape(-1, 1))
    buffers["hyp.last"].copy_(tokens.view(-1))
    buffers["sentence.scores"].copy_(live_scores)
    store_state(buffers, state)
    t += 1


def view(buffers: Mapping[str, Tensor], part: Part, width: int) -> StepView:
    """What a step shows `part`: the step, the hypotheses' tokens so far, its own buffers and constants."""
    own = unprefixed(buffers, f"hyp.{type(part).__name__}.")
    constants = unprefixed(buffers, f"search.{type(part).__name__}.")
    return StepView(buffers["t"], buffers["hyp.tokens"], width, EOS, own, constants)


def at_limits(found: Extensions, buffers: Mapping[str, Tensor], width: int) -> Extensions:
    """The candidates, where a sentence reached its output limit replaced by eos after each of its live
    hypotheses (score unchanged), best first as the live scores are; with the candidates that finish and
    those that live on named (by default the eos among the first `width`, and the first `width` others)."""
    at_limit = (buffers["sentence.limit"] <= buffers["t"]).unsqueeze(1)  # (sentences, 1)
    scores = buffers["sentence.scores"]  # (sentences, width)
    forced = torch.full_like(found.scores, float("-inf"))
    forced[:, :width] = scores
    parents = found.parents
    if parents is not None:
        own = torch.arange(parents.size(1), device=parents.device).clamp(max=width - 1)
        parents = torch.where(at_limit, own, parents)
    scores = torch.where(at_limit, forced, found.scores)
    tokens = found.tokens.masked_fill(at_limit, EOS)
    position = torch.arange(tokens.size(1), device=tokens.device)  # (candidates,)
    ends = (tokens == EOS) & (position < width)  # (sentences, candidates)
    if found.ends is not None:
        ends = torch.where(at_limit, ends, found.ends)
    live = None
    if parents is not None:  # the first `width` that do not end in eos, in the rule's order
        going = (tokens != EOS) & torch.isfinite(scores)
        live = (~going).to(torch.uint8).argsort(dim=1, stable=True)[:, :width]  # (sentences, width)
        if found.live is not None:
            live = torch.where(at_limit, live, found.live)
    return Extensions(scores, tokens, parents, ends, live)


def record_finished(buffers: Mapping[str, Tensor], found: Extensions, rows: Tensor, rule: SearchRule) -> None:
    """Keep, per sentence and group, the best finished hypotheses so far (in place, without a host sync): the
    candidates that end one (`found.ends`: by default those ending in eos among the first `rule.width`), of a
    group still searched. rows (sentences, candidates): the hypothesis rows the candidates continue; their
    tokens end before this step's eos. A candidate belongs to the group of the hypothesis it continues.

    A stable sort ranks the kept ones first: a new hypothesis must score higher to displace an equal one."""
    t, sentence, groups = buffers["t"], buffers["sentence.index"], rule.groups
    group = candidate_groups(found, groups)  # (sentences, candidates)
    still = still_searched(buffers, rule).gather(1, group)  # (sentences, candidates)
    assert found.ends is not None  # at_limits names them
    finished = found.ends & torch.isfinite(found.scores) & still
    buffers["sentence.finished"].scatter_add_(1, group, finished.long())
    normalised = found.scores / length_penalty(t + 1, rule.length_penalty, rule.length_normalization)
    best_scores = buffers["best.scores"]
    sentences, slots = len(sentence), best_scores.size(1)
    kept = slots // groups
    own = group.unsqueeze(1) == torch.arange(groups, device=t.device).view(1, groups, 1)  # (s, groups, c)
    new = torch.where(own & finished.unsqueeze(1), normalised.unsqueeze(1), float("-inf"))  # (s, groups, c)
    merged = torch.cat([best_scores[sentence].view(sentences, groups, kept), new], dim=2)  # (s, groups, k+c)
    order = merged.sort(dim=2, descending=True, stable=True).indices[:, :, :kept]  # (s, groups, k)
    best_scores[sentence] = merged.gather(2, order).view(sentences, slots)
    first = torch.arange(groups, device=t.device).view(1, groups, 1) * kept  # each group's first slot
    chosen = torch.where(order < kept, first + order, slots + order - kept).view(sentences, slots)
    for name, live in unprefixed(buffers, "hyp.").items():
        if f"best.{name}" in buffers:
            keep_best(buffers[f"best.{name}"], live, sentence, rows, chosen)


def candidate_groups(found: Extensions, groups: int) -> Tensor:
    """The group of each candidate: that of the hypothesis it continues (hypothesis j of a sentence is in
    group j % groups). (sentences, candidates)"""
    parents = found.parents
    if parents is None:  # candidate j continues hypothesis j
        parents = torch.arange(found.scores.size(1), device=found.scores.device).expand_as(found.scores)
    return parents % groups


def keep_best(best: Tensor, live: Tensor, sentence: Tensor, rows: Tensor, order: Tensor) -> None:
    """best (batch, slots, …) of the searched sentences ← the `order`-chosen (sentences, slots) ones among
    themselves (0 … slots − 1) and the live rows `rows` (sentences, candidates) of live (rows, …) (from
    slots on)."""
    candidates = live.index_select(0, rows.view(-1)).view(*rows.shape, *live.shape[1:])  # (sentences, c, …)
    both = torch.cat([best[sentence], candidates], dim=1)  # (sentences, n + c, …)
    index = order.view(*order.shape, *[1] * (both.dim() - 2)).expand(-1, -1, *both.shape[2:])
    best[sentence] = both.gather(1, index)


def keep_sentences(model: Seq2Seq, buffers: Buffers, searched: Tensor, kept: int, width: int) -> Buffers:
    """The buffers of `kept` sentences: those still searched (`searched` True) in their order, then the first
    done ones where `kept` is more, found on the device by a stable sort."""
    keep = torch.argsort((~searched).to(torch.uint8), stable=True)[:kept]  # (kept,)
    rows = hypothesis_rows(keep, width)  # (kept * width,)
    memory, state = unprefixed(buffers, "memory."), unprefixed(buffers, "state.")
    memory, state = model.select_sentences(memory, state, keep)
    sentence = {name: t.index_select(0, keep) for name, t in unprefixed(buffers, "sentence.").items()}
    hyp = {name: t.index_select(0, rows) for name, t in unprefixed(buffers, "hyp.").items()}
    others = {
        name: t
        for name, t in buffers.items()
        if not name.startswith(("memory.", "state.", "sentence.", "hyp."))
    }
    return (
        prefixed(memory, "memory.")
        | prefixed(state, "state.")
        | prefixed(sentence, "sentence.")
        | prefixed(hyp, "hyp.")
        | others
    )


def store_state(buffers: Mapping[str, Tensor], state: State) -> None:
    """Write the model's new state into the buffers, in place (tensors the step already updated in place are
    the buffers themselves)."""
    for name, tensor in state.items():
        buffer = buffers[f"state.{name}"]
        if tensor.shape != buffer.shape:
            raise ValueError(
                f"decode_step changed the shape of the state's {name!r}: {buffer.shape} → {tensor.shape}"
            )
        if tensor is not buffer:
            buffer.copy_(tensor)


def step_attention(step: Step) -> Tensor:
    """The step's attention (batch, src_len), or a clear error for a model that exposes none."""
    if step.attention is None:
        raise ValueError("search with attention needs a model whose decode_step returns its attention")
    return step.attention


def most_attended(attention: Tensor, unaligned: Tensor, width: int) -> Tensor:
    """Each row's most attended source position of those not `unaligned` (eos, padding, tags; the first of
    equal ones): attention (sentences × width, src_len), unaligned (sentences, src_len) bool →
    (sentences × width,)."""
    skipped = unaligned.repeat_interleave(width, dim=0)  # (rows, src_len)
    return attention.float().masked_fill(skipped, -1.0).argmax(dim=1)


def results(buffers: Buffers, src_mask: Tensor, nbest: int) -> list[list[Hypothesis]]:
    """Each sentence's `nbest` finished hypotheses (fewer where fewer were found): of the best slots, which
    hold each group's best first, the first of each group, best first, then the second of each, and so on."""
    best_scores = buffers["best.scores"]
    batch, slots = best_scores.shape
    groups = buffers["sentence.finished"].size(1)
    tokens = buffers["best.tokens"][:, :, 1:].reshape(batch * slots, -1)  # (batch * slots, max_steps)
    attention = buffers.get("best.attention")
    attention = None if attention is None else attention.flatten(0, 1).float().cpu()
    alignment = buffers.get("best.alignment")
    attended = None if alignment is None else alignment.flatten(0, 1).tolist()  # (batch * slots, max_steps)
    src_len = src_mask.sum(dim=(1, 2)).repeat_interleave(slots).tolist()
    flat = []
    for i, (row, value) in enumerate(zip(trim(tokens), best_scores.view(-1).tolist(), strict=True)):
        weights = None if attention is None else attention[i, : len(row) + 1, : src_len[i]]
        flat.append(Hypothesis(row, value, weights, None if attended is None else attended[i][: len(row)]))
    rank = [slot % (slots // groups) for slot in range(slots)]  # within its group
    found = []
    for i in range(batch):
        kept = [slot for slot in range(slots) if math.isfinite(flat[i * slots + slot].score)]
        kept.sort(key=lambda slot: (rank[slot], -flat[i * slots + slot].score))
        found.append([flat[i * slots + slot] for slot in kept[:nbest]])
    return found


def trim(rows: Tensor) -> list[list[int]]:
    """Token rows (batch, length) → lists cut at the first eos (eos and later tokens dropped)."""
    out = []
    for row in rows.tolist():
        out.append(row[: row.index(EOS)] if EOS in row else row)
    return out


@overload
def length_penalty(length: int, alpha: float, normalization: str = "gnmt") -> float: ...
@overload
def length_penalty(length: Tensor, alpha: float, normalization: str = "gnmt") -> Tensor: ...
def length_penalty(length: int | Tensor, alpha: float, normalization: str = "gnmt") -> float | Tensor:
    """The penalty of a `length` (tokens and eos): GNMT's (Wu et al. 2016), ((5 + length) / 6) ** alpha, or
    with `normalization` "power" length ** alpha (transformers' and CTranslate2's); a tensor `length` (the
    step counter, on the device) gives a tensor."""
    if normalization == "power":
        return length**alpha
    return ((5.0 + length) / 6.0) ** alpha


def score(log_probability: float, tokens: int, alpha: float, normalization: str = "gnmt") -> float:
    """The score of every hypothesis, whatever the rule: the summed log-probability of its `tokens` and eos,
    divided by the length penalty of that length (alpha 0: the plain sum)."""
    return log_probability / length_penalty(tokens + 1, alpha, normalization)
