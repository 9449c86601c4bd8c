"""The decoded-chunk cache."""

from zarrmount.cache.chunks import CacheStats, ChunkCache

__all__ = ["CacheStats", "ChunkCache"]
