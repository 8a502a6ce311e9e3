"""The background loader: batches arrive in order, a producer's error reaches the consumer, and closing the
loader early stops its thread (a thread left inside torch at interpreter exit aborts the process)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pytest
import torch

from nmt.data.batching import Batch, collate
from nmt.data.loader import prefetch


def batches(count: int) -> Iterator[Batch]:
    for i in range(count):
        yield collate([[5 + i] * 3], [[6 + i] * 2], [i], 1)


def loader_threads() -> int:
    return sum(
        thread.name != threading.main_thread().name and thread.is_alive() for thread in threading.enumerate()
    )


def test_batches_arrive_in_order() -> None:
    received = [batch.index.item() for batch in prefetch(batches(20), torch.device("cpu"), depth=2)]
    assert received == list(range(20))


def test_a_producer_error_reaches_the_consumer() -> None:
    def failing() -> Iterator[Batch]:
        yield from batches(2)
        raise ValueError("bad batch")

    with pytest.raises(ValueError, match="bad batch"):
        list(prefetch(failing(), torch.device("cpu")))


def test_closing_early_stops_the_thread() -> None:
    before = loader_threads()
    with contextlib.closing(prefetch(batches(1000), torch.device("cpu"), depth=2)) as ready:
        next(ready)
        assert loader_threads() == before + 1
    assert loader_threads() == before  # joined when closed, though the producer was blocked on a full queue
