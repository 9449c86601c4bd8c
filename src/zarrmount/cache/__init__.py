"""The decoded-chunk cache."""

from zarrmount.cache.buffers import BufferPool
from zarrmount.cache.chunks import CacheStats, ChunkCache, Loaded

__all__ = ["BufferPool", "CacheStats", "ChunkCache", "Loaded"]
