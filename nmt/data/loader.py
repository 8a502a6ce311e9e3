"""Batches prepared ahead of the training step: collated in a background thread, pinned, copied
asynchronously."""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterable

import torch

from nmt.data.batching import Batch

_DONE = object()


def prefetch(batches: Iterable[Batch], device: torch.device, depth: int = 4) -> Generator[Batch, None, None]:
    """Yield `batches` moved to `device`, keeping up to `depth` collated batches ready in a background thread.

    On CUDA the batches are pinned so the host-to-device copies are non-blocking.
    """
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    pin = device.type == "cuda"

    def produce() -> None:
        try:
            for batch in batches:
                if not offer(batch.pin_memory() if pin else batch):
                    return
            offer(_DONE)
        except BaseException as err:  # surfaced in the consuming thread
            offer(err)

    def offer(item: object) -> bool:
        """Queue `item` unless the consumer has stopped; returns whether it was queued."""
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    worker = threading.Thread(target=produce, daemon=True)
    worker.start()
    try:
        while (item := ready.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item.to(device)
    finally:
        # Joined, not abandoned: a daemon thread still inside torch when the interpreter exits aborts the
        # process ("terminate called without an active exception").
        stop.set()
        worker.join()
