"""Batches prepared ahead of the training step: collated in a background thread, pinned, copied
asynchronously."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

import torch

from nmt.data.batching import Batch

_DONE = object()


def prefetch(batches: Iterable[Batch], device: torch.device, depth: int = 4) -> Iterator[Batch]:
    """Yield `batches` moved to `device`, keeping up to `depth` collated batches ready in a background thread.

    On CUDA the batches are pinned so the host-to-device copies are non-blocking.
    """
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    pin = device.type == "cuda"

    def produce() -> None:
        try:
            for batch in batches:
                if stop.is_set():
                    return
                ready.put(batch.pin_memory() if pin else batch)
            ready.put(_DONE)
        except BaseException as err:  # surfaced in the consuming thread
            ready.put(err)

    worker = threading.Thread(target=produce, daemon=True)
    worker.start()
    try:
        while (item := ready.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item.to(device)
    finally:
        stop.set()
        while not ready.empty():
            ready.get_nowait()
