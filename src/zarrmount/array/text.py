"""The text of an array of strings: one element per line in C order, UTF-8, newline,
carriage return and backslash escaped (``\\n``, ``\\r``, ``\\\\``), bytes that are not
UTF-8 as ``\\xHH``. It is read in *slabs* (runs of elements in C order), each rendered
when read; a file being read keeps only the slab it read last. Measuring the text counts
the bytes of each line, a part of a slab (a chunk) at a time, holding no rendered text:
listing a large array holds one chunk, not a slab of many."""

from __future__ import annotations

import errno
import math
import re
from bisect import bisect_right
from collections.abc import Awaitable, Callable
from itertools import product

import numpy as np

from zarrmount.array.failures import failed
from zarrmount.array.shared import Shared
from zarrmount.codecs import ChunkDecodeError
from zarrmount.codecs.strings import StringChunks
from zarrmount.errors import FsError
from zarrmount.format.model import ArrayMeta, ArrayNode
from zarrmount.store import StoreError

_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r"})
_UNDECODED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8 (surrogateescape)


def _line(element: object) -> str:
    if isinstance(element, bytes):
        text = element.decode("utf-8", "surrogateescape").translate(_ESCAPES)
        return _UNDECODED.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02X}", text)
    return str(element).translate(_ESCAPES)


def render(elements: np.ndarray) -> bytes:
    """The lines of ``elements`` (str, bytes, or NumPy ``U``/``S`` items) in C order."""
    lines = [_line(e) for e in elements.ravel().tolist()]
    return "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")


def _line_size(element: object) -> int:
    return len(_line(element).encode("utf-8", "surrogatepass")) + 1


def text_size(elements: np.ndarray) -> int:
    """``len(render(elements))``, one line held at a time."""
    return sum(map(_line_size, elements.flat))


class TooLong(Exception):
    """The text is longer than the mount shows (``-o text_max``)."""


# The elements of slab i, in C order
SlabElements = Callable[[int], Awaitable[np.ndarray]]
# Part j of slab i: the slab's parts together hold its elements, in any order
SlabPart = Callable[[int, int], Awaitable[np.ndarray]]


# Elements of an array of fixed-size strings rendered at once: at most this many (Python
# objects of some 50 bytes each while rendered), of at most this many bytes.
SLAB_ELEMENTS = 1 << 16
SLAB_BYTES = 1 << 20


class TextArray:
    """The text of one array, read by offset once measured. ``decoded``: the most elements
    one slab decodes (a row of chunks may hold more than the array's rows). ``parts``:
    how many parts a slab has, and part j of slab i (a chunk), measured one at a time; by
    default a slab is one part."""

    def __init__(
        self,
        slabs: int,
        elements: SlabElements,
        limit: int,
        count: int,
        decoded: int,
        parts: tuple[int, SlabPart] | None = None,
    ) -> None:
        self.slabs = slabs if count else 0  # (10**12, 0): no slab to render
        self.elements = elements
        self.parts = parts or (1, lambda i, j: elements(i))
        self.limit = limit
        self.count = count  # elements, each a line of at least one byte
        self.decoded = decoded
        self.starts: list[int] | None = None  # of each slab's text, then the end
        self._last: tuple[int, bytes] | None = None  # the slab read last, rendered

    @property
    def size(self) -> int:
        return self.starts[-1] if self.starts else 0

    async def measure(self) -> int:
        """Count the bytes of every slab's lines, a part at a time, for the text's size;
        raises TooLong past the limit (at once when there are more elements, or a slab
        decodes more, than the limit's bytes)."""
        if max(self.count, self.decoded) > self.limit:
            raise TooLong(f"its {self.count} elements are more than text_max ({self.limit})")
        parts, part = self.parts
        starts = [0]
        for i in range(self.slabs):
            end = starts[-1]
            for j in range(parts):
                end += text_size(await part(i, j))
                if end > self.limit:
                    raise TooLong(f"its text is longer than text_max ({self.limit} bytes)")
            starts.append(end)
        self.starts = starts
        return starts[-1]

    async def _slab(self, i: int) -> bytes:
        if self._last is None or self._last[0] != i:
            self._last = (i, render(await self.elements(i)))
        return self._last[1]

    async def read(self, offset: int, size: int) -> bytes:
        starts = self.starts or [0]
        out = []
        stop = min(offset + size, starts[-1])
        while offset < stop:
            i = bisect_right(starts, offset) - 1
            text = await self._slab(i)
            if len(text) != starts[i + 1] - starts[i]:
                raise FsError(errno.ESTALE, "the array's strings changed since it was listed")
            part = text[offset - starts[i] : stop - starts[i]]
            out.append(part)
            offset += len(part)
        return b"".join(out)

    def let_go(self) -> None:
        """No handle is open: keep no rendered slab."""
        self._last = None


def chunk_rows(node: ArrayNode, shared: Shared, limit: int) -> TextArray:
    """The text of an array of variable-length strings, a row of chunks per slab."""
    meta = node.meta
    chunks = StringChunks(meta, limit)
    grid = [math.ceil(s / c) for s, c in zip(meta.shape, meta.chunks, strict=True)]

    stored = _stored(node, chunks, shared)

    async def chunk(coords: tuple[int, ...]) -> np.ndarray:
        key, raw = await stored(coords)
        try:
            if raw is None:
                return np.full(meta.chunks, meta.fill_value, dtype=object)
            return await shared.decoders.run(chunks.decode, raw)
        except ChunkDecodeError as e:
            raise failed(key, e) from e

    async def clipped(coords: tuple[int, ...]) -> np.ndarray:
        """The chunk's elements inside the array."""
        inside = (
            min(n, s - c * n) for c, n, s in zip(coords, meta.chunks, meta.shape, strict=True)
        )
        return (await chunk(coords))[(..., *(slice(0, n) for n in inside))]

    async def elements(i: int) -> np.ndarray:
        if not meta.shape:
            return await chunk(())
        rows = min(meta.chunks[0], meta.shape[0] - i * meta.chunks[0])
        slab = np.empty((rows, *meta.shape[1:]), dtype=object)
        for rest in product(*(range(n) for n in grid[1:])):
            at = (slice(c * n, (c + 1) * n) for c, n in zip(rest, meta.chunks[1:], strict=True))
            slab[(slice(None), *at)] = await clipped((i, *rest))
        return slab

    async def part(i: int, j: int) -> np.ndarray:  # chunk j of row i of chunks
        rest = map(int, np.unravel_index(j, grid[1:]))
        return await clipped((i, *rest)[: len(meta.shape)])  # (): a 0-d array's chunk

    # a slab decodes a row of whole chunks
    decoded = math.prod(meta.chunks[:1]) * math.prod(
        c * n for c, n in zip(meta.chunks[1:], grid[1:], strict=True)
    )
    slabs = grid[0] if meta.shape else 1
    parts = math.prod(grid[1:])
    return TextArray(slabs, elements, limit, math.prod(meta.shape), decoded, (parts, part))


def _stored(node: ArrayNode, chunks: StringChunks, shared: Shared):
    """``stored(coords)``: the key and encoded bytes of a chunk (None: absent), read
    whole or, in a sharded array, from its shard (the last one read is kept)."""
    meta, layout = node.meta, chunks.layout
    last: list = [None, None]  # a shard's key and bytes

    async def get(key: str) -> bytes | None:
        try:
            return await shared.store.get(key)
        except StoreError as e:
            raise failed(key, e) from e

    async def stored(coords: tuple[int, ...]) -> tuple[str, bytes | None]:
        if layout is None:
            key = node.data_prefix + meta.key_encoding.key(coords)
            return key, await get(key)
        unit = tuple(c // n for c, n in zip(coords, layout.per_shard, strict=True))
        key = node.data_prefix + meta.key_encoding.key(unit)
        if last[0] != key:
            last[:] = key, await get(key)
        if last[1] is None:
            return key, None
        local = tuple(c % n for c, n in zip(coords, layout.per_shard, strict=True))
        try:
            return key, await shared.decoders.run(chunks.inner, last[1], local)
        except ChunkDecodeError as e:
            raise failed(key, e) from e

    return stored


def file_rows(
    meta: ArrayMeta,
    dtype: np.dtype,
    read: Callable[[int, int], Awaitable[bytes]],
    limit: int,
) -> TextArray:
    """The text of an array of fixed-size strings (``U``, ``S``) from its file's bytes
    (``dtype``: as the file shows them), in slabs of a bounded run of elements."""
    count = math.prod(meta.shape)
    run = max(1, min(SLAB_ELEMENTS, SLAB_BYTES // dtype.itemsize))  # elements a slab

    async def elements(i: int) -> np.ndarray:
        start = i * run * dtype.itemsize
        data = await read(start, min(run * dtype.itemsize, meta.nbytes - start))
        return np.frombuffer(data, dtype=dtype)

    return TextArray(math.ceil(count / run), elements, limit, count, min(count, run))
