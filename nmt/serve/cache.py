"""The server's translation cache: the translation of each text of a request, remembered by the text and by
how it was decoded, so that a text sent again is answered without decoding it.

A key is a text as the route hands it to `Service.translate` (a text of `q`, before it is split into lines or
sentences; an HTML page's blocks) with the request's `Decoding`: the engine (the model, in one direction),
every search setting, the n-best size and whether attention and word links were asked. The value is what
`Service.translate` returned for that text, so the answer built from it is the one a fresh translation gives,
byte for byte; what the route adds after (the answer's format, a page's tags, the alternatives) is built from
it anew for every request. Sampled translations are remembered only where the engine draws the same samples
again for the same line, seed and settings (nmt's own search; not a CTranslate2 export).

It is an LRU (least recently used first out) bounded in entries and in bytes: each entry counts the size of
its text and of every object of its value (`footprint`); an entry larger than the whole bound is not kept.
Lookups and insertions happen on the event loop's thread only, between awaits: no lock is needed, and a
request in flight holds its own translations, so that dropping entries (or the cache, as a restart does) takes
nothing from it.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

V = TypeVar("V")
ENTRY_OVERHEAD = 200  # bytes of an OrderedDict node and the key's tuple, beside the text and the value
DEFAULT_ENTRIES = 10_000
DEFAULT_MIB = 64


@dataclass(frozen=True)
class CacheLimits:
    """How much the cache holds: at most `entries` texts and `mib` MiB of them and their translations; 0
    entries: no cache."""

    entries: int = DEFAULT_ENTRIES
    mib: float = DEFAULT_MIB

    @property
    def max_bytes(self) -> int:
        return int(self.mib * 2**20)


@dataclass
class CacheStats:
    """What the cache has done since the server started (for /health): lookups of a text that found its
    translation (`hits`) and that did not (`misses`), entries dropped to make room (`evictions`)."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0


class TranslationCache(Generic[V]):
    """An LRU of values by key, bounded in entries and bytes (see the module's docstring)."""

    def __init__(self, limits: CacheLimits) -> None:
        self.limits = limits
        self.stats = CacheStats()
        self.bytes = 0
        self._entries: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()  # value and its size

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def enabled(self) -> bool:
        return self.limits.entries > 0

    def get(self, key: Hashable) -> V | None:
        """The value of `key`, now the most recently used; None where there is none (a miss)."""
        found = self._entries.get(key)
        if found is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: Hashable, value: V, size: int) -> None:
        """Remember `value` under `key` (`size`: its bytes with the key's), dropping the least recently used
        entries until both bounds hold; a value larger than the byte bound is not kept."""
        if not self.enabled or size > self.limits.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._entries[key] = (value, size)
        self.bytes += size
        while len(self._entries) > self.limits.entries or self.bytes > self.limits.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped
            self.stats.evictions += 1

    def clear(self) -> None:
        """Forget every entry (the counts stay): a request in flight keeps the translations it holds."""
        self._entries.clear()
        self.bytes = 0

    async def translate(
        self,
        texts: list[str],
        how: Hashable,
        translate: Callable[[list[str]], Awaitable[list[V]]],
    ) -> list[V]:
        """The value of each text translated as `how` says: remembered ones from the cache, the others by one
        call of `translate` on them alone (in order), then remembered."""
        if not self.enabled:
            return await translate(texts)
        keys = [(how, text) for text in texts]
        found: list[V | None] = [self.get(key) for key in keys]
        missing = [i for i, value in enumerate(found) if value is None]
        if missing:
            fresh = await translate([texts[i] for i in missing])
            for i, value in zip(missing, fresh, strict=True):
                found[i] = value
                self.put(keys[i], value, ENTRY_OVERHEAD + footprint(texts[i]) + footprint(value))
        return cast(list[V], found)


def footprint(value: Any) -> int:
    """The bytes `value` holds, counting every object it reaches once (strings, numbers, lists, tuples,
    dicts, dataclasses; a tensor's or an array's data with its header)."""
    seen: set[int] = set()
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(getattr(item, "nbytes", None), int):  # a tensor's or an array's data
            total += item.nbytes
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif dataclasses.is_dataclass(item):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
            total += sys.getsizeof(vars(item)) if hasattr(item, "__dict__") else 0
    return total
