"""The CPU floor of a cold read for scripts/bench (issue #30): the parts no Zarr filesystem
can avoid, each measured on one thread into reused buffers.

A cold sequential read through the mount costs the daemon at least

* the FUSE transport: the trivial in-memory file's daemon CPU for the same cold read
  (measured by the bench beside the mounts, ``ceiling``);
* the store reads: every stored object (a chunk, or a shard with its index) read once into
  one reused, page-aligned buffer, from the page cache;
* the decoding: every chunk (every inner chunk of a shard, found through the shard's
  index) decoded once on one thread into one reused buffer.

The ratio of the daemon's measured CPU to the sum is the overhead of everything else:
planning, caching, threads, Python.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from _bench_data import CHUNKS, DTYPE, NCOLS, Dataset
from _bench_sys import touched_buffer

INDEX_ENTRY = np.dtype([("offset", "<u8"), ("nbytes", "<u8")])
CRC_BYTES = 4  # the crc32c codec ends each shard index
EMPTY = 2**64 - 1


def stored_objects(ds: Dataset, work: Path, rows: int) -> list[Path]:
    """The array's stored objects (chunk or shard files), in name order."""
    root = ds.array_path(work, rows)
    found = []
    for d, _, files in os.walk(root):
        for name in files:
            if not name.startswith(".") and name not in ("zarr.json", "bench-complete.json"):
                found.append(Path(d) / name)
    return sorted(found)


def store_read_seconds(objects: list[Path]) -> float:
    """One thread's CPU reading every object whole into one reused buffer."""
    buf = touched_buffer(max(p.stat().st_size for p in objects))
    t0 = time.thread_time()
    for p in objects:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.preadv(fd, [buf], 0)
        finally:
            os.close(fd)
    return time.thread_time() - t0


def encoded_chunks(ds: Dataset, objects: list[Path]) -> list[bytes]:
    """Every chunk's encoded bytes: the files, or a shard's inner chunks by its index."""
    if not ds.sharded:
        return [p.read_bytes() for p in objects]
    per_shard = NCOLS // CHUNKS[1]  # a shard is one row of chunks
    out = []
    for p in objects:
        data = p.read_bytes()
        tail = per_shard * INDEX_ENTRY.itemsize + CRC_BYTES
        index = np.frombuffer(data[-tail:-CRC_BYTES], dtype=INDEX_ENTRY)
        out += [data[o : o + n] for o, n in index.tolist() if o != EMPTY]
    return out


def decode_seconds(ds: Dataset, chunks: list[bytes]) -> float:
    """One thread's CPU decoding every chunk into one reused buffer (0 for raw chunks)."""
    codec = ds.codec()
    if codec is None:
        return 0.0
    out = np.frombuffer(touched_buffer(CHUNKS[0] * CHUNKS[1] * DTYPE.itemsize), np.uint8)
    codec.decode(chunks[0], out=out)  # warm-up: code paths, and a check it works
    t0 = time.thread_time()
    for raw in chunks:
        codec.decode(raw, out=out)
    return time.thread_time() - t0
