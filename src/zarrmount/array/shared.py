"""What every array engine of one mount shares, made by the mount's assembly."""

from __future__ import annotations

from dataclasses import dataclass, field

from zarrmount.array.background import Background
from zarrmount.array.decoders import Decoders
from zarrmount.array.freshness import Revalidation
from zarrmount.cache import BufferPool, ChunkCache
from zarrmount.store.aio import AsyncStore


@dataclass
class Shared:
    store: AsyncStore
    cache: ChunkCache
    pool: BufferPool  # freed chunk buffers wait here for the next decode
    decoders: Decoders
    background: Background  # where prefetches and follow-up loads run
    revalidation: Revalidation  # how long cached chunks are trusted (other writers)
    # what the cache keys of these engines begin with: one cache serves several versions
    # of a store ("@SNAPSHOT/"), whose arrays share paths
    space: str = field(default="", kw_only=True)
