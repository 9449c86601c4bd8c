"""The text of an array of strings: one element per line in C order, UTF-8, newline,
carriage return and backslash escaped (``\\n``, ``\\r``, ``\\\\``), bytes that are not
UTF-8 as ``\\xHH``. It is made of *blocks*, runs of at most ``BLOCK`` lines in C order.
Measuring the text counts the bytes of each line, a part (a chunk, or 1 MiB of a
fixed-size array's file) at a time, and keeps what each block's lines add up to: an
index of 8 bytes a block, never a line's. A read renders the blocks its range covers one
at a time, each from its own elements alone, and keeps none once answered: a file being
read holds a block and a chunk (the last decoded, while a handle is open), never a row
of chunks."""

from __future__ import annotations

import errno
import math
import re
from collections.abc import Awaitable, Callable, Iterator
from itertools import product
from typing import Protocol

import numpy as np
import trio

from zarrmount.array.failures import failed
from zarrmount.array.shared import Shared
from zarrmount.codecs import ChunkDecodeError
from zarrmount.codecs.strings import StringChunks
from zarrmount.errors import FsError
from zarrmount.format.model import ArrayMeta, ArrayNode
from zarrmount.store import StoreError

_UNDECODED = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8 (surrogateescape)


def _escaped(text: str) -> str:
    """Backslash first, so that no escape is escaped again (``str.replace``: some 20 times
    faster than ``str.translate``, which looks up every character)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _line(element: object) -> str:
    if isinstance(element, bytes):
        text = _escaped(element.decode("utf-8", "surrogateescape"))
        return _UNDECODED.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02X}", text)
    return _escaped(str(element))


def render(elements: np.ndarray) -> bytes:
    """The lines of ``elements`` (str, bytes, or NumPy ``U``/``S`` items) in C order."""
    lines = [_line(e) for e in elements.ravel().tolist()]
    return "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")


def _line_size(element: object) -> int:
    return len(_line(element).encode("utf-8", "surrogatepass")) + 1


def line_sizes(elements: np.ndarray) -> np.ndarray:
    """The bytes of each line of ``elements`` (in their shape), one line held at a time."""
    sizes = np.fromiter(map(_line_size, elements.flat), dtype=np.int64, count=elements.size)
    return sizes.reshape(elements.shape)


class TooLong(Exception):
    """The text is longer than the mount shows (``-o text_max``)."""


# Lines rendered at once (Python objects of some 50 bytes each while rendered): a read
# renders at most one block more than it answers at each end.
BLOCK = 1 << 10
# Elements of an array of fixed-size strings measured at once: at most this many, of at
# most this many bytes.
PART_ELEMENTS = 1 << 16
PART_BYTES = 1 << 20

# A box of an array: (start, stop) along each axis
Box = tuple[tuple[int, int], ...]


def _strides(shape: tuple[int, ...]) -> list[int]:
    """Elements between neighbours along each axis, in C order."""
    return [math.prod(shape[k + 1 :]) for k in range(len(shape))]


def flat_indices(box: Box, shape: tuple[int, ...]) -> np.ndarray:
    """The C-order index in ``shape`` of each element of ``box``, in the box's shape."""
    flat = np.zeros((), dtype=np.int64)
    for (start, stop), stride in zip(box, _strides(shape), strict=True):
        flat = np.add.outer(flat, np.arange(start, stop, dtype=np.int64) * stride)
    return flat


def runs(shape: tuple[int, ...], start: int, stop: int) -> Iterator[Box]:
    """Boxes holding elements ``start`` to ``stop`` of ``shape`` in C order, in order, each
    contiguous: one index along the axes before some axis, a range along it, every index
    after it (at most two boxes an axis)."""
    if not shape:  # a 0-d array's one element
        if start < stop:
            yield ()
        return
    strides = _strides(shape)
    while start < stop:
        at = [int(i) for i in np.unravel_index(start, shape)]
        k = next(k for k, w in enumerate(strides) if start % w == 0 and stop - start >= w)
        n = min(shape[k] - at[k], (stop - start) // strides[k])
        yield (*((i, i + 1) for i in at[:k]), (at[k], at[k] + n), *((0, d) for d in shape[k + 1 :]))
        start += n * strides[k]


class Lines(Protocol):
    """Where the elements of a text come from."""

    shape: tuple[int, ...]  # its C order is the order of the lines
    decoded: int  # the most elements a part decodes
    block: int  # lines rendered at once

    def parts(self) -> Iterator[Box]:
        """Boxes that hold each element once, each decoded alone when measured."""
        ...

    async def part(self, box: Box) -> np.ndarray:
        """The elements of a box that ``parts`` gave, in its shape."""
        ...

    async def elements(self, start: int, stop: int) -> np.ndarray:
        """Elements ``start`` to ``stop`` in C order."""
        ...

    def let_go(self) -> None:
        """Keep nothing read for the next call."""
        ...


class TextArray:
    """The text of one array, read by offset once measured."""

    def __init__(self, lines: Lines, limit: int) -> None:
        self.lines = lines
        self.limit = limit
        self.count = math.prod(lines.shape)  # elements, each a line of at least one byte
        self.starts: np.ndarray | None = None  # of each block's text, then the end
        self._rendering = trio.Lock()  # one block at a time, whoever reads

    @property
    def size(self) -> int:
        return int(self.starts[-1]) if self.starts is not None else 0

    async def measure(self) -> int:
        """Count the bytes of every line, a part at a time, adding them up by block for
        the text's size; raises TooLong past the limit (at once when there are more
        elements, or a part decodes more, than the limit's bytes)."""
        lines = self.lines
        if max(self.count, lines.decoded) > self.limit:
            raise TooLong(f"its {self.count} elements are more than text_max ({self.limit})")
        sizes = np.zeros(math.ceil(self.count / lines.block), dtype=np.int64)
        total = 0
        try:
            for box in lines.parts() if self.count else ():
                counted = line_sizes(await lines.part(box)).ravel()
                blocks = flat_indices(box, lines.shape).ravel() // lines.block
                first = int(blocks.min())
                added = np.bincount(blocks - first, weights=counted).astype(np.int64)
                sizes[first : first + added.size] += added
                total += int(counted.sum())
                if total > self.limit:
                    raise TooLong(f"its text is longer than text_max ({self.limit} bytes)")
        finally:
            lines.let_go()
        self.starts = np.concatenate(([0], np.cumsum(sizes)))
        return total

    async def read(self, offset: int, size: int) -> bytes:
        """Bytes ``offset`` to ``offset + size``, from the blocks they fall in, rendered
        one at a time and let go."""
        out = []
        stop = min(offset + size, self.size)
        async with self._rendering:
            while offset < stop:
                i = int(np.searchsorted(self.starts, offset, side="right")) - 1
                start, end = int(self.starts[i]), int(self.starts[i + 1])
                text = await self._block(i)
                if len(text) != end - start:
                    raise FsError(errno.ESTALE, "the array's strings changed since it was listed")
                out.append(text[offset - start : stop - start])
                offset = min(end, stop)
        return b"".join(out)

    async def _block(self, i: int) -> bytes:
        block = self.lines.block
        return render(await self.lines.elements(i * block, min((i + 1) * block, self.count)))

    def let_go(self) -> None:
        """No handle is open: keep no chunk."""
        self.lines.let_go()


class _Stored:
    """``stored(coords)``: the key and encoded bytes of a chunk (None: absent), read
    whole or, in a sharded array, from its shard (the last one read is kept)."""

    def __init__(self, node: ArrayNode, chunks: StringChunks, shared: Shared) -> None:
        self.node = node
        self.chunks = chunks
        self.shared = shared
        self.last: tuple[str, bytes | None] | None = None  # a shard's key and bytes

    async def _get(self, key: str) -> bytes | None:
        try:
            return await self.shared.store.get(key)
        except StoreError as e:
            raise failed(key, e) from e

    async def __call__(self, coords: tuple[int, ...]) -> tuple[str, bytes | None]:
        meta, layout = self.node.meta, self.chunks.layout
        if layout is None:
            key = self.node.data_prefix + meta.key_encoding.key(coords)
            return key, await self._get(key)
        unit = tuple(c // n for c, n in zip(coords, layout.per_shard, strict=True))
        key = self.node.data_prefix + meta.key_encoding.key(unit)
        if self.last is None or self.last[0] != key:
            self.last = key, await self._get(key)
        shard = self.last[1]
        if shard is None:
            return key, None
        local = tuple(c % n for c, n in zip(coords, layout.per_shard, strict=True))
        try:
            return key, await self.shared.decoders.run(self.chunks.inner, shard, local)
        except ChunkDecodeError as e:
            raise failed(key, e) from e


class ChunkLines:
    """The elements of an array of variable-length strings, from its chunks: measured a
    chunk at a time; a block gathered from the chunks it touches, decoded one at a time
    (the last one kept for the next block). A chunk is decoded again whenever a block
    needs it after another: never in a 1-d array, once for each row it holds where the
    array's rows (the elements of one first index) are longer than a block."""

    def __init__(self, node: ArrayNode, shared: Shared, limit: int) -> None:
        meta = node.meta
        self.meta = meta
        self.shape = meta.shape
        self.decoded = math.prod(meta.chunks)
        self.block = BLOCK
        self._chunks = StringChunks(meta, limit)
        self._stored = _Stored(node, self._chunks, shared)
        self._decoders = shared.decoders
        self._last: tuple[tuple[int, ...], np.ndarray] | None = None  # coords, elements

    def parts(self) -> Iterator[Box]:
        grid = (range(math.ceil(s / c)) for s, c in zip(self.shape, self.meta.chunks, strict=True))
        return map(self._box, product(*grid))

    def _box(self, coords: tuple[int, ...]) -> Box:
        """The chunk's elements inside the array."""
        zipped = zip(self._origin(coords), self.meta.chunks, self.shape, strict=True)
        return tuple((start, min(start + n, s)) for start, n, s in zipped)

    def _origin(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(c * n for c, n in zip(coords, self.meta.chunks, strict=True))

    async def part(self, box: Box) -> np.ndarray:
        coords = tuple(start // n for (start, _), n in zip(box, self.meta.chunks, strict=True))
        return (await self._decode(coords))[_slices(box, self._origin(coords))]

    async def _decode(self, coords: tuple[int, ...]) -> np.ndarray:
        key, raw = await self._stored(coords)
        try:
            if raw is None:
                return np.full(self.meta.chunks, self.meta.fill_value, dtype=object)
            return await self._decoders.run(self._chunks.decode, raw)
        except ChunkDecodeError as e:
            raise failed(key, e) from e

    async def _chunk(self, coords: tuple[int, ...]) -> np.ndarray:
        if self._last is None or self._last[0] != coords:
            self._last = None  # never two chunks held while one decodes
            self._last = coords, await self._decode(coords)
        return self._last[1]

    async def elements(self, start: int, stop: int) -> np.ndarray:
        out = np.empty(stop - start, dtype=object)
        wanted: dict[tuple[int, ...], list[tuple[Box, np.ndarray]]] = {}
        strides = _strides(self.shape)
        for box in runs(self.shape, start, stop):
            first = sum(a * w for (a, _), w in zip(box, strides, strict=True)) - start
            shape = [b - a for a, b in box]
            into = out[first : first + math.prod(shape)].reshape(shape)
            chunks = zip(box, self.meta.chunks, strict=True)
            for coords in product(*(range(a // n, (b - 1) // n + 1) for (a, b), n in chunks)):
                wanted.setdefault(coords, []).append((box, into))
        for coords, boxes in wanted.items():
            chunk, origin = await self._chunk(coords), self._origin(coords)
            for box, into in boxes:
                common = _common(box, self._box(coords))
                into[_slices(common, tuple(a for a, _ in box))] = chunk[_slices(common, origin)]
        return out

    def let_go(self) -> None:
        self._last = None
        self._stored.last = None


def _common(one: Box, other: Box) -> Box:
    return tuple((max(a, c), min(b, d)) for (a, b), (c, d) in zip(one, other, strict=True))


def _slices(box: Box, origin: tuple[int, ...]) -> tuple:
    """``box`` in an array whose first element is at ``origin`` (a 0-d one: itself)."""
    return (..., *(slice(a - o, b - o) for (a, b), o in zip(box, origin, strict=True)))


class FileLines:
    """The elements of an array of fixed-size strings (``U``, ``S``) from its file's bytes
    (``dtype``: as the file shows them), measured a bounded run at a time."""

    def __init__(
        self, meta: ArrayMeta, dtype: np.dtype, read: Callable[[int, int], Awaitable[bytes]]
    ) -> None:
        count = math.prod(meta.shape)
        self.shape = (count,)  # its lines: its elements in C order
        self.run = max(1, min(PART_ELEMENTS, PART_BYTES // dtype.itemsize))  # elements a part
        self.decoded = min(count, self.run)
        self.block = min(BLOCK, self.run)
        self.dtype = dtype
        self.read = read

    def parts(self) -> Iterator[Box]:
        count = self.shape[0]
        return (((start, min(start + self.run, count)),) for start in range(0, count, self.run))

    async def part(self, box: Box) -> np.ndarray:
        ((start, stop),) = box
        return await self.elements(start, stop)

    async def elements(self, start: int, stop: int) -> np.ndarray:
        size = self.dtype.itemsize
        return np.frombuffer(await self.read(start * size, (stop - start) * size), self.dtype)

    def let_go(self) -> None:
        """The array file's engine keeps what it keeps."""
