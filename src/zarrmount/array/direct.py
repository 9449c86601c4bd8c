"""Direct reads: chunks stored as they are read (no codec, C order, whole chunks in files
of a local store) go from their files straight into the replies of a sequential reader
and of large requests, without the chunk cache (a random reader's small reads are served
from chunks kept decoded in the cache, as others are).

That is one copy (the kernel's, from its page cache) where a load into the cache and a
copy out of it make two, no chunk buffer, and no worker thread while the files' pages are
in the page cache (``RWF_NOWAIT``): streaming uncompressed chunks costs what reading the
files costs. The kernel's page cache is their cache; files stay open for the next request
(``cache/open_files.py``), and are checked as cached chunks are. Chunks cached anyway
(written, or loaded by another path), being loaded or written back, missing, or of
another size than a chunk's are left to the cache's path, which knows what to make of
them.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

import numpy as np

from zarrmount.array.grid import Coords
from zarrmount.layout import Copy, copy_runs
from zarrmount.store import StoreError
from zarrmount.store.base import OpenFile
from zarrmount.store.files import MOST_BUFFERS

if TYPE_CHECKING:
    from zarrmount.array.source import ChunkSource

# Byte runs of copies remembered (the planner hands out the same copies again and again)
KEEP_RUNS = 8192
Plan = dict[Coords, list[Copy]]


class DirectReads:
    """One array's direct reads; ``enabled`` where its chunks allow them."""

    def __init__(self, source: ChunkSource) -> None:
        self.source = source
        self.files = source.revalidation.files
        plain = source.pipeline.passthrough and source.grid.sharding is None
        self.enabled = bool(plain and source.store.opens_files)
        self._runs: dict[int, tuple[Copy, list]] = {}

    async def serve(self, plan: Plan, out: np.ndarray) -> Plan:
        """Read the chunks of ``plan`` that may be read directly into ``out`` (flat, where
        the plan starts); the rest of the plan, for the cache's path."""
        source, cache = self.source, self.source.cache
        reply = memoryview(out.view(np.uint8))
        rest: Plan = {}
        waiting: list[tuple[Coords, OpenFile | None]] = []
        served = 0
        for coords, copies in plan.items():
            key = source.key(coords)
            if cache.peek(key) is not None or cache.loading(key) or source.states.busy(coords):
                rest[coords] = copies
                continue
            file = self.files.get(source.file_key(coords))
            if file is not None and self._read(file, copies, reply, False):
                served += 1
            else:
                waiting.append((coords, file))
        if waiting:
            served += await self._serve_waiting(plan, waiting, reply, rest)
        cache.stats.direct_reads += served
        return rest

    async def _serve_waiting(self, plan: Plan, waiting: list, reply: memoryview, rest: Plan) -> int:
        """Open (or read from disk) in one worker thread what the page cache did not hold."""
        source = self.source
        since = time.monotonic()
        generations = {coords: source.states.generation(coords) for coords, _ in waiting}
        done = await source.store.with_files(
            functools.partial(self._read_waiting, plan, waiting, reply), source.decoders.limiter
        )
        served = 0
        for (coords, old), (file, ok) in zip(waiting, done, strict=True):
            key = source.file_key(coords)
            if ok:
                served += 1
            else:
                rest[coords] = plan[coords]
            if file is old:
                if not ok:
                    self.files.forget(key)
            elif file is not None:
                if ok and not source.states.changed(coords, generations[coords]):
                    self.files.put(key, file, since)
                else:
                    file.close()
        return served

    def _read_waiting(self, plan: Plan, waiting: list, reply: memoryview, open_file) -> list:
        """In a worker thread: for each chunk, its file (opened if need be, None when it
        cannot be read directly) and whether its copies were read."""
        done = []
        for coords, file in waiting:
            try:
                if file is None:
                    file = self._open(open_file, coords)
                ok = file is not None and self._read(file, plan[coords], reply, True)
            except (StoreError, OSError):  # the cache's path meets it again, and reports it
                ok = False
            done.append((file, ok))
        return done

    def _open(self, open_file, coords: Coords) -> OpenFile | None:
        """The chunk's file, if it holds a whole chunk; read ahead from disk unless its
        pages are cached (asking the kernel costs more than a read from the page cache)."""
        file = open_file(self.source.grid.key(coords))
        if file is None or file.size != self.source.meta.chunk_nbytes:
            if file is not None:
                file.close()
            return None
        if file.read_into([bytearray(1)], 0, False) is None:
            file.will_need()
        return file

    def _read(self, file: OpenFile, copies: list[Copy], reply: memoryview, wait: bool) -> bool:
        """Read ``copies`` from ``file`` into ``reply``; False where some bytes were not
        there (a shorter file; without ``wait``: pages not in the page cache)."""
        for copy in copies:
            found = self._runs.get(id(copy))
            runs = found[1] if found is not None and found[0] is copy else self._runs_of(copy)
            for first, count, parts in runs:
                if file.read_into([reply[s] for s in parts], first, wait) != count:
                    return False
        return True

    def _runs_of(self, copy: Copy) -> list:
        """The copy's runs (``layout.copy_runs``) in bytes, each piece a slice of the
        reply, remembered by the copy."""
        isz = self.source.meta.itemsize
        runs = [
            (first * isz, count * isz, [slice(o * isz, (o + n) * isz) for o, n in parts])
            for first, count, parts in copy_runs(copy, self.source.meta.chunks, MOST_BUFFERS)
        ]
        if len(self._runs) >= KEEP_RUNS:
            self._runs.clear()
        self._runs[id(copy)] = (copy, runs)
        return runs
