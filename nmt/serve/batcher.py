"""Dynamic batching: the sentences of many requests are queued and decoded together by one task that owns the
model (Triton's and vLLM's pattern, at the scale of one process).

A batch is closed when its sentences reach the token budget (nmt/data/batching.py `search_cost`: sentences ×
(longest source + eos) × beam size, the unit of `search.batch_tokens`), or once every client that the previous
batch answered is back (as many requests have arrived since it was decoded as it answered), or `max_delay`
seconds after the previous batch was decoded, whichever comes first: the clients just answered send their next
sentences within that time and join the ones that queued during the decoding, rather than waiting for them to
be decoded first; a lone client's next request, or a request to an idle server, is decoded at once. It then
decodes in the batcher's one thread while new requests queue. Sentences batch only with those of the same key
(model and search options). A batch takes one sentence of each waiting request in turn, so a request of many
lines shares every batch with the others rather than holding them up. A batch that fails (out of memory above
all) is split in halves and retried, so a sentence that cannot be decoded fails its own request alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import torch

from nmt.data.batching import search_cost

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)  # what to decode and how: sentences batch only with those of an equal key
R = TypeVar("R")  # the result of decoding one sentence
Decode = Callable[[K, list[list[int]]], list[R]]  # (key, source id lists) -> one result per source


class Closed(Exception):
    """The server is shutting down and takes no new work."""


class SentenceFailed(Exception):
    """A sentence could not be decoded, even alone; `memory` when it ran out of memory."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.memory = is_out_of_memory(cause)


def is_out_of_memory(err: BaseException) -> bool:
    """Whether `err` is an allocation failure of the GPU or of the host (the batcher searches each batch as
    one, so the Translator's retry in halves and its error wrapping one never come between)."""
    if isinstance(err, torch.cuda.OutOfMemoryError | MemoryError):
        return True
    return isinstance(err, RuntimeError) and "out of memory" in str(err).lower()


@dataclass(eq=False)
class _Request(Generic[K, R]):
    key: K
    sources: list[list[int]]
    beam: int
    future: asyncio.Future[list[R]]
    arrived: float
    results: dict[int, R] = field(default_factory=dict)  # by the source's position
    handed: int = 0  # sources put into batches so far


@dataclass
class Stats:
    """What the batcher has done since it started (for /health and the benchmark)."""

    batches: int = 0
    sentences: int = 0
    split_batches: int = 0
    decoding: int = 0  # sentences of the batch being decoded now


class Batcher(Generic[K, R]):
    """Queues requests' sentences and decodes them in batches with `decode`, in one thread of its own."""

    def __init__(self, decode: Decode[K, R], max_tokens: int, max_delay: float) -> None:
        self.decode, self.max_tokens, self.max_delay = decode, max_tokens, max_delay
        self.stats = Stats()
        self._queue: list[_Request[K, R]] = []  # requests with sources not yet in a batch, oldest first
        self._wake = asyncio.Event()
        self._closing = False
        self._decoded_at = float("-inf")  # event-loop time when the last batch was decoded
        self._answered = 0  # requests the last batch answered: their clients are expected back
        self._returned = 0  # requests that arrived since the last batch was decoded
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nmt-decode")

    @property
    def waiting(self) -> int:
        """Sentences queued and not yet in a batch."""
        return sum(len(r.sources) - r.handed for r in self._queue)

    async def translate(self, key: K, sources: list[list[int]], beam: int) -> list[R]:
        """The decode results of `sources` (same order), batched with other requests of the same `key`.
        Raises Closed once the server stops, SentenceFailed when one of them cannot be decoded."""
        if self._closing:
            raise Closed("the server is shutting down")
        if not sources:
            return []
        loop = asyncio.get_running_loop()
        request: _Request[K, R] = _Request(key, sources, beam, loop.create_future(), loop.time())
        self._queue.append(request)
        self._returned += 1
        self._wake.set()
        try:
            return await request.future
        finally:  # answered, failed, or the client went away: nothing of it stays queued
            if request in self._queue:
                self._queue.remove(request)

    async def run(self) -> None:
        """Close and decode batches until `close` is called and every queued sentence is answered."""
        loop = asyncio.get_running_loop()
        while self._queue or not self._closing:
            if not self._queue:
                await self._sleep(None)
                continue
            head = self._queue[0]
            while head in self._queue and not self._closing and not self._full(head.key):
                left = self._decoded_at + self.max_delay - loop.time()
                if left <= 0 or self._returned >= self._answered:
                    break
                await self._sleep(left)
            if head not in self._queue:  # the client went away while it waited
                continue
            batch = self._take(head.key)
            sources = [request.sources[i] for request, i in batch]
            self.stats.decoding = len(sources)
            try:
                decoded = loop.run_in_executor(self._executor, self._decode_isolated, head.key, sources)
                outcomes = await decoded
            finally:
                self.stats.decoding = 0
            self._decoded_at, self._returned = loop.time(), 0
            self.stats.batches += 1
            self.stats.sentences += len(batch)
            for (request, i), outcome in zip(batch, outcomes, strict=True):
                _answer(request, i, outcome)
            self._answered = len({id(request) for request, _ in batch if request.future.done()})

    async def close(self) -> None:
        """Take no new requests; `run` ends once the queued ones are answered (call it, then await `run`)."""
        self._closing = True
        self._wake.set()

    def shutdown(self, wait: bool = True) -> None:
        """Release the decoding thread (after `run` has ended; `wait` False: not waiting for a batch that is
        being decoded, which is then the last)."""
        self._executor.shutdown(wait=wait, cancel_futures=True)

    async def _sleep(self, timeout: float | None) -> None:
        """Until a request arrives or `close` is called, at most `timeout` seconds."""
        try:
            async with asyncio.timeout(timeout):  # no task of its own, as asyncio.wait_for makes one
                await self._wake.wait()
        except TimeoutError:
            return
        self._wake.clear()

    def _full(self, key: K) -> bool:
        """Whether the queued sentences of `key` fill a batch."""
        count, longest, beam = 0, 0, 1
        for request in self._queue:
            if request.key == key:
                left = request.sources[request.handed :]
                count, longest = count + len(left), max([longest, *(len(s) for s in left)])
                beam = request.beam
        return search_cost(count, longest, beam) >= self.max_tokens

    def _take(self, key: K) -> list[tuple[_Request[K, R], int]]:
        """Sentences of `key` for one batch, one from each waiting request in turn, within the budget (at
        least one sentence: one over the budget is a batch of its own, as everywhere nmt searches);
        requests whose every sentence is taken leave the queue."""
        requests = [r for r in self._queue if r.key == key]
        batch: list[tuple[_Request[K, R], int]] = []
        longest = 0
        while requests:
            for request in list(requests):
                length = max(longest, len(request.sources[request.handed]))
                if batch and search_cost(len(batch) + 1, length, request.beam) > self.max_tokens:
                    return batch
                batch.append((request, request.handed))
                longest, request.handed = length, request.handed + 1
                if request.handed == len(request.sources):
                    requests.remove(request)
                    self._queue.remove(request)
        return batch

    def _decode_isolated(self, key: K, sources: list[list[int]]) -> list[R | SentenceFailed]:
        """`decode` of one batch; when it fails, of each half (recursively): one result or SentenceFailed per
        source."""
        try:
            return list(self.decode(key, sources))
        except Exception as err:  # narrowed down to the sentence that causes it
            if len(sources) == 1:
                log.error("a sentence of %d subwords failed: %s", len(sources[0]), err)
                return [SentenceFailed(err)]
            log.warning("a batch of %d sentences failed (%s); retrying it in halves", len(sources), err)
        self.stats.split_batches += 1
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # outside the except block, where the failed batch's tensors are freed
        half = len(sources) // 2
        return self._decode_isolated(key, sources[:half]) + self._decode_isolated(key, sources[half:])


def _answer(request: _Request[K, R], i: int, outcome: R | SentenceFailed) -> None:
    """Record one sentence's outcome; the request is answered once all its sentences are, or fails at once."""
    if request.future.done():  # failed already, or the client went away
        return
    if isinstance(outcome, SentenceFailed):
        request.future.set_exception(outcome)
        return
    request.results[i] = outcome
    if len(request.results) == len(request.sources):
        request.future.set_result([request.results[i] for i in range(len(request.sources))])
