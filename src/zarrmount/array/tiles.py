"""An array's chunks read as TIFF tiles (``headers/tiff.py``'s tiled layout): a tile is
one 2-D plane of one chunk, so a tile read decodes exactly that chunk, and a tile of a
cached chunk is served from its bytes without a copy."""

from __future__ import annotations

import math

import numpy as np

from zarrmount.array.reader import ArrayReader
from zarrmount.headers.tiff import Block, Image
from zarrmount.layout import Copy, c_order_boxes
from zarrmount.memory import aligned_empty

Coords = tuple[int, ...]

# Tiles loaded ahead of a reader reading them in the file's order, at most.
AHEAD = 2
# A first run of consecutive tiles this long before any tile is loaded ahead: a window
# two tiles wide reads two in a row, then jumps to the next row of tiles.
LEAST_RUN = 3


class TileRuns:
    """Which tiles a reader will read next, from the runs of consecutive tiles (in the
    file's order) it reads: a whole-image reader makes one long run, a window reader a
    run per row of the window, each as long as the one before. Ahead of a run as long
    as the last one nothing is loaded, so a window never costs a tile outside it (but
    in its first row, which is known only once it ends)."""

    def __init__(self) -> None:
        self.last: int | None = None
        self.run = 0
        self.before: int | None = None  # the length of the run before this one

    @property
    def streaming(self) -> bool:
        """A whole-image reader: a first run long enough, with none before it."""
        return self.before is None and self.run >= LEAST_RUN

    def observe(self, index: int) -> range:
        """Tile ``index`` is read: the tiles to load ahead."""
        if index == self.last:
            return range(0)
        if self.last is not None and index == self.last + 1:
            self.run += 1
        else:
            self.before, self.run = (self.run or None), 1
        self.last = index
        if self.before is None:
            ahead = AHEAD if self.run >= LEAST_RUN else 0
        else:
            ahead = min(AHEAD, self.before - self.run)
        return range(index + 1, index + 1 + max(ahead, 0))


class Tiles:
    """The tiles of one array (``image`` of a tiled TIFF), read through its engine."""

    def __init__(self, engine: ArrayReader, image: Image, number: int) -> None:
        self.engine = engine
        self.image, self.number = image, number  # the image, and its number in the TIFF
        self.runs = TileRuns()
        self._ended = -2  # the last tile read to its end
        meta = engine.meta
        self.planes_per_chunk = math.prod(meta.chunks[:-2])
        self.block_bytes = math.prod(meta.chunks[-2:]) * meta.itemsize
        # the dimensions a page index runs over: all before the image's but its bands'
        self.paged = meta.shape[:-2] if image.bands == 1 else meta.shape[:-3]
        self.banded = image.bands > 1
        self.shape, self.chunks = meta.shape, meta.chunks
        self.tile = meta.chunks[-2:]
        self.itemsize = meta.itemsize
        self.raw = engine.source.raw

    def _where(self, block: Block) -> tuple[Coords, Coords, tuple[int, int]]:
        """The chunk holding ``block``, the plane's index within it, and the tile's part
        within the array (rows, columns)."""
        lead = np.unravel_index(block.page, self.paged) if self.paged else ()
        index = (*map(int, lead), *((block.band,) if self.banded else ()))
        outer = tuple(i // c for i, c in zip(index, self.chunks, strict=False))
        inner = tuple(i % c for i, c in zip(index, self.chunks, strict=False))
        (tl, tw), (length, width) = self.tile, self.shape[-2:]
        valid = min(tl, length - block.row * tl), min(tw, width - block.col * tw)
        return (*outer, block.row, block.col), inner, valid

    def from_cache(self, block: Block) -> memoryview | None:
        """``block``'s bytes straight from its cached chunk, where the tile lies wholly
        inside the array (an edge tile's padding is the fill value, not the chunk's)."""
        coords, inner, valid = self._where(block)
        if valid != self.tile:
            return None
        flat = self.engine.cached(coords)
        if flat is None:
            return None
        plane = math.prod(self.tile) * self.itemsize
        at = (int(np.ravel_multi_index(inner, self.chunks[:-2])) if inner else 0) * plane
        return flat[at + block.lo : at + block.hi]

    def observe(self, block: Block) -> None:
        """``block`` is read: load the chunks of the tiles the reader will read next."""
        ahead = self.runs.observe(block.index)
        if self.runs.streaming and block.index - 1 == self._ended:
            self._drop_behind(block.index - 1)
        self._ended = block.index if block.hi == self.block_bytes else self._ended
        ahead = range(ahead.start, min(ahead.stop, self.image.pages * self.image.blocks))
        wanted = [self._where(self.image.block(self.number, i, 0, 0))[0] for i in ahead]
        if wanted:
            self.engine.prefetch.follow([c for c in dict.fromkeys(wanted) if not self._held(c)])

    def _drop_behind(self, index: int) -> None:
        """A whole-image reader never comes back to a tile it read to the end: its
        chunk's buffer goes back to the pool while warm, where the chunk is that one
        tile (a chunk of several planes is read again for the others)."""
        if self.planes_per_chunk == 1:
            coords = self._where(self.image.block(self.number, index, 0, 0))[0]
            self.engine.cache.release(self.engine.source.key(coords))

    def _held(self, coords: Coords) -> bool:
        return self.engine.cache.entry(self.engine.source.key(coords)) is not None

    async def read(self, blocks: list[Block], reply: np.ndarray | None) -> memoryview:
        """The bytes of ``blocks`` (of this image), one after the other; ``reply``, a
        buffer the caller recycles, receives them when large enough."""
        isz = self.itemsize
        spans = [(b.lo // isz, -(-b.hi // isz)) for b in blocks]
        nbytes = sum(hi - lo for lo, hi in spans) * isz
        if reply is not None and reply.nbytes >= nbytes:
            out = reply[:nbytes].view(self.raw)
        else:
            out = aligned_empty(nbytes).view(self.raw)
        plan: dict[Coords, list[Copy]] = {}
        padded, at = False, 0
        for block, (lo, hi) in zip(blocks, spans, strict=True):
            coords, inner, valid = self._where(block)
            copies = self._copies(inner, valid, lo, hi, at)
            padded |= sum(c.stop - c.start for c in copies) < hi - lo or valid != self.tile
            plan.setdefault(coords, []).extend(copies)
            at += hi - lo
        if padded:
            out[...] = self.engine.source.fill_element
        await self.engine.read_planned(plan, out)
        raw = memoryview(out.view(np.uint8))
        first, last = blocks[0], blocks[-1]
        if len(blocks) == 1 or all(b.lo % isz == 0 and b.hi % isz == 0 for b in blocks):
            # whole elements: the blocks' bytes lie one after the other in ``out``
            return raw[first.lo - spans[0][0] * isz : nbytes - (spans[-1][1] * isz - last.hi)]
        pieces, at = [], 0
        for block, (lo, hi) in zip(blocks, spans, strict=True):
            pieces.append(raw[at * isz + block.lo - lo * isz : at * isz + block.hi - lo * isz])
            at += hi - lo
        return memoryview(b"".join(pieces))

    def _copies(self, inner: Coords, valid: tuple[int, int], lo: int, hi: int, at: int) -> list:
        """Copies of tile elements ``[lo, hi)`` (those inside the array) to ``out[at:]``."""
        copies = []
        tw = self.tile[1]
        for (r0, c0), (r1, c1) in c_order_boxes(self.tile, lo, hi):
            rows, cols = min(r1, valid[0]) - r0, min(c1, valid[1]) - c0
            start = at + r0 * tw + c0 - lo
            stop = start + (r1 - r0) * (c1 - c0)
            if rows > 0 and cols > 0:
                sel = (*(slice(i, i + 1) for i in inner), slice(r0, r0 + rows))
                chunk_sel = (*sel, slice(c0, c0 + cols))
                box_sel = (slice(0, rows), slice(0, cols))
                copies.append(Copy(start, stop, (r1 - r0, c1 - c0), box_sel, chunk_sel))
        return copies
