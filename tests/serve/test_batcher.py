"""The dynamic batcher against a scripted decode function: what it batches, in which order, how it isolates a
failing sentence, and how it stops. No model and no timing thresholds: each test checks what happened (the one
that needs arrivals during a decoding leaves half a second on either side)."""

import asyncio
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch

from nmt.config.multilingual import Direction
from nmt.config.sections import SearchConfig
from nmt.data.special_tokens import BOS, PAD
from nmt.data.tokenizer import Tokenizers
from nmt.decode.search import Hypothesis, SearchOptions
from nmt.decode.translator import Translator
from nmt.rules.contract import SearchRule
from nmt.serve.answers import ModelFacts
from nmt.serve.batcher import Batcher, Closed, SentenceFailed
from nmt.serve.engines import Decoding, Engine, decode


class Script:
    """A decode function that answers each source with its sum, records every batch, and can fail."""

    def __init__(self, fail: Callable[[list[list[int]]], BaseException | None] = lambda _: None) -> None:
        self.batches: list[list[list[int]]] = []
        self.fail = fail

    def __call__(self, key: Any, sources: list[list[int]]) -> list[Any]:
        self.batches.append(sources)
        error = self.fail(sources)
        if error is not None:
            raise error
        return [(key, sum(s)) for s in sources]


def run(main: Callable[[], Any]) -> Any:
    return asyncio.run(main())


async def started(batcher: Batcher) -> asyncio.Task:
    return asyncio.create_task(batcher.run())


async def stop(batcher: Batcher, task: asyncio.Task) -> None:
    await batcher.close()
    await task
    batcher.shutdown()


def test_concurrent_requests_are_decoded_together() -> None:
    script = Script()

    async def main() -> list[Any]:
        batcher = Batcher(script, max_tokens=10_000, max_delay=0.2)
        task = await started(batcher)
        results = await asyncio.gather(*(batcher.translate("k", [[i, 1]], 1) for i in range(20)))
        await stop(batcher, task)
        return results

    results = run(main)
    assert results == [[("k", i + 1)] for i in range(20)]  # each answer is its own sentence's
    assert len(script.batches) < 20  # requests shared batches
    assert sum(map(len, script.batches)) == 20


def test_the_token_budget_closes_batches() -> None:
    script = Script()

    async def main() -> None:
        batcher = Batcher(script, max_tokens=30, max_delay=10.0)  # the deadline never closes one here
        task = await started(batcher)
        await asyncio.gather(*(batcher.translate("k", [[1] * 4], 2) for _ in range(12)))
        await stop(batcher, task)

    run(main)
    # 5 subwords with eos × beam 2 = 10 a sentence: three sentences fill a batch of 30
    assert [len(b) for b in script.batches] == [3, 3, 3, 3]


def test_a_sentence_over_the_budget_is_decoded_alone() -> None:
    """The policy of every search (nmt/data/batching.py `search_groups`): a sentence that alone costs more
    than the budget is a batch of its own, and the next batch takes the sentences after it."""
    script = Script()

    async def main() -> list[Any]:
        batcher = Batcher(script, max_tokens=10, max_delay=10.0)
        task = await started(batcher)
        found = await batcher.translate("k", [[1] * 20, [2], [3]], 1)
        await stop(batcher, task)
        return found

    assert run(main) == [("k", 20), ("k", 2), ("k", 3)]
    assert script.batches == [[[1] * 20], [[2], [3]]]  # 2 × (1 + 1) × 1 = 4 within 10


@pytest.mark.slow  # four batches of a second each
def test_clients_answered_together_join_those_that_queued_meanwhile() -> None:
    """Three clients start; three more come while the first batch decodes. Each client sends its next
    sentence once answered: after the first batch, every batch holds all six, instead of two groups of three
    taking turns, each waiting for the other's batch."""
    script = Script()

    def slow(key: Any, sources: list[list[int]]) -> list[Any]:
        time.sleep(1.0)
        return script(key, sources)

    async def client(batcher: Batcher, rounds: int) -> None:
        for _ in range(rounds):
            await batcher.translate("k", [[1]], 1)

    async def main() -> None:
        batcher = Batcher(slow, max_tokens=10_000, max_delay=0.3)
        task = await started(batcher)
        first = [asyncio.create_task(client(batcher, 3)) for _ in range(3)]
        await asyncio.sleep(0.8)  # the first batch closed at 0.3 s and decodes until 1.3 s
        await asyncio.gather(*first, *(client(batcher, 3) for _ in range(3)))
        await stop(batcher, task)

    run(main)
    assert [len(b) for b in script.batches] == [3, 6, 6, 3]


def test_a_lone_client_waits_for_no_one() -> None:
    """One client sending its requests one after another (a browser extension, the web page): each is decoded
    at once, however long --max-delay-ms is, since no other client is expected."""
    script = Script()

    async def main() -> list[list[Any]]:
        batcher = Batcher(script, max_tokens=10_000, max_delay=600.0)
        task = await started(batcher)
        found = [await asyncio.wait_for(batcher.translate("k", [[i]], 1), timeout=10) for i in range(5)]
        await stop(batcher, task)
        return found

    assert run(main) == [[("k", i)] for i in range(5)]
    assert script.batches == [[[i]] for i in range(5)]


def test_a_batch_waits_for_the_clients_it_answered_and_no_longer() -> None:
    """Two clients answered by one batch: the next batch waits for both (one alone would not close it), and
    for no one once the two are back, however long --max-delay-ms is."""
    script = Script()

    async def main() -> None:
        batcher = Batcher(script, max_tokens=10_000, max_delay=600.0)
        task = await started(batcher)
        answered = asyncio.gather(*(batcher.translate("k", [[i]], 1) for i in (1, 2)))
        await asyncio.wait_for(answered, timeout=10)
        first = asyncio.create_task(batcher.translate("k", [[3]], 1))
        await asyncio.sleep(0.5)
        assert not first.done()  # the other client answered is awaited
        await asyncio.wait_for(asyncio.gather(first, batcher.translate("k", [[4]], 1)), timeout=10)
        await stop(batcher, task)

    run(main)
    assert script.batches == [[[1], [2]], [[3], [4]]]


def test_only_requests_of_the_same_key_share_a_batch() -> None:
    script = Script()

    async def main() -> list[Any]:
        batcher = Batcher(script, max_tokens=10_000, max_delay=0.05)
        task = await started(batcher)
        found = await asyncio.gather(*(batcher.translate(f"k{i % 2}", [[i]], 1) for i in range(8)))
        await stop(batcher, task)
        return found

    found = run(main)
    assert found == [[(f"k{i % 2}", i)] for i in range(8)]
    assert len(script.batches) == 2 and sorted(map(len, script.batches)) == [4, 4]


def test_a_long_request_does_not_hold_up_a_short_one() -> None:
    """200 lines queued first, one line just after: the short request shares the long one's first batches
    (one sentence of each waiting request in turn) and is answered while the long one still decodes."""
    script = Script()

    async def main() -> list[str]:
        batcher = Batcher(script, max_tokens=20, max_delay=0.0)  # two sentences of 10 a batch
        task = await started(batcher)
        order: list[str] = []

        async def send(name: str, sources: list[list[int]]) -> None:
            await batcher.translate("k", sources, 1)
            order.append(name)

        await asyncio.gather(send("long", [[1] * 9] * 200), send("short", [[2] * 9]))
        await stop(batcher, task)
        return order

    assert run(main) == ["short", "long"]
    assert [2] * 9 in script.batches[0]


def test_a_batch_that_runs_out_of_memory_is_split_and_retried() -> None:
    script = Script(
        lambda sources: torch.cuda.OutOfMemoryError("CUDA out of memory") if len(sources) > 2 else None
    )

    async def main() -> tuple[list[Any], int]:
        batcher = Batcher(script, max_tokens=10_000, max_delay=0.2)
        task = await started(batcher)
        found = await asyncio.gather(*(batcher.translate("k", [[i]], 1) for i in range(8)))
        await stop(batcher, task)
        return found, batcher.stats.split_batches

    found, splits = run(main)
    assert found == [[("k", i)] for i in range(8)]  # every request answered, none lost or swapped
    assert splits >= 1 and max(map(len, script.batches)) == 8  # it was tried whole first


def test_a_sentence_that_cannot_be_decoded_fails_its_own_request_alone() -> None:
    poison = [666]
    script = Script(lambda sources: MemoryError() if poison in sources else None)

    async def main() -> list[Any]:
        batcher = Batcher(script, max_tokens=10_000, max_delay=0.2)
        task = await started(batcher)
        requests = [batcher.translate("k", [[i], [i + 100]], 1) for i in range(5)]
        requests.insert(2, batcher.translate("k", [[7], poison], 1))
        found = await asyncio.gather(*requests, return_exceptions=True)
        await stop(batcher, task)
        return found

    found = run(main)
    assert isinstance(found[2], SentenceFailed) and found[2].memory
    assert [f for i, f in enumerate(found) if i != 2] == [[("k", i), ("k", i + 100)] for i in range(5)]


def test_a_request_whose_client_went_away_leaves_the_queue() -> None:
    """A request queued while a batch decodes, whose client goes away before the next batch."""
    script = Script()

    def slow(key: Any, sources: list[list[int]]) -> list[Any]:
        time.sleep(0.5)
        return script(key, sources)

    async def main() -> tuple[int, list[Any]]:
        batcher = Batcher(slow, max_tokens=10_000, max_delay=0.2)
        task = await started(batcher)
        busy = asyncio.create_task(batcher.translate("k", [[2]], 1))
        await asyncio.sleep(0.1)  # decoding
        gone = asyncio.create_task(batcher.translate("k", [[5]] * 50, 1))
        await asyncio.sleep(0)  # queued
        gone.cancel()
        await busy
        other = await batcher.translate("k", [[1]], 1)
        waiting = batcher.waiting
        await stop(batcher, task)
        return waiting, other

    waiting, other = run(main)
    assert waiting == 0 and other == [("k", 1)]
    assert all(source != [5] for batch in script.batches for source in batch)


def test_closing_answers_the_queued_requests_then_refuses_new_ones() -> None:
    script = Script()

    async def main() -> tuple[list[Any], BaseException | None]:
        batcher = Batcher(script, max_tokens=10_000, max_delay=30.0)  # only closing ends the wait
        task = await started(batcher)
        queued = [asyncio.create_task(batcher.translate("k", [[i]], 1)) for i in range(3)]
        await asyncio.sleep(0)
        await batcher.close()
        late: BaseException | None = None
        try:
            await batcher.translate("k", [[9]], 1)
        except Closed as err:
            late = err
        found = await asyncio.gather(*queued)
        await task
        batcher.shutdown()
        return found, late

    found, late = run(main)
    assert found == [[("k", i)] for i in range(3)]
    assert isinstance(late, Closed)


@pytest.mark.parametrize(
    "error",
    [
        torch.cuda.OutOfMemoryError("x"),
        MemoryError(),
        RuntimeError("CUDA out of memory"),
    ],
)
def test_memory_errors_are_told_apart(error: BaseException) -> None:
    assert SentenceFailed(error).memory
    assert not SentenceFailed(ValueError("bad")).memory


class Fails(Translator):
    """A translator whose batches of more than one sentence run out of memory; it records their sizes."""

    def __init__(self) -> None:
        ids_only = SimpleNamespace(tgt=SimpleNamespace(banned=(PAD, BOS)))  # ids in, ids out
        super().__init__(cast(Tokenizers, ids_only), SearchConfig(), max_source_len=100)
        self.sizes: list[int] = []

    def search_batch(
        self, sources: list[list[int]], rule: SearchRule, options: SearchOptions
    ) -> list[list[Hypothesis]]:
        self.sizes.append(len(sources))
        if len(sources) > 1:
            raise MemoryError
        return [[Hypothesis(source, 0.0)] for source in sources]


def test_a_served_batch_out_of_memory_is_split_by_the_batcher_alone() -> None:
    """The server's engine searches a batch once, without the translator's own retry in halves: the batcher
    splits a batch of four that runs out of memory into halves, and each half that fails again, once each."""
    translator = Fails()
    facts = ModelFacts(
        engine="torch",
        type="t",
        runs=[],
        checkpoint=None,
        domain=None,
        parameters=None,
        test_bleu=None,
        beam_size=1,
        attention=None,
    )
    engine = Engine("fails", Direction("src", "tgt"), translator, facts)
    decoding = Decoding(engine, translator.settings)

    async def main() -> tuple[list[list[Hypothesis]], int]:
        batcher = Batcher(decode, max_tokens=10_000, max_delay=0.2)
        task = await started(batcher)
        found = await batcher.translate(decoding, [[5], [6], [7], [8]], 1)
        await stop(batcher, task)
        return found, batcher.stats.split_batches

    found, splits = run(main)
    assert [hyps[0].tokens for hyps in found] == [[5], [6], [7], [8]]
    assert translator.sizes == [4, 2, 1, 1, 2, 1, 1]  # each size tried once: nothing halves twice
    assert splits == 3  # the batch of four and both its halves, split by the batcher
