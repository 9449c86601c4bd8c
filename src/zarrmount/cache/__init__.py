"""The decoded-chunk cache."""

from zarrmount.cache.buffers import BufferPool
from zarrmount.cache.chunks import CacheStats, ChunkCache, Loaded
from zarrmount.cache.open_files import OpenFiles

__all__ = ["BufferPool", "CacheStats", "ChunkCache", "Loaded", "OpenFiles"]
