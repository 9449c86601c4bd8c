"""Maps a range of elements of the C-order file to regions of chunks.

A contiguous range of flat C-order indices splits into at most ``2 * ndim - 1``
boxes, each itself contiguous in C order; each box is then cut along the chunk grid.
The work per request grows with the number of chunks touched, never with elements.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

Box = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass(frozen=True)
class Copy:
    """Copy ``chunk[chunk_sel]`` into ``out[start:stop].reshape(box)[box_sel]``."""

    start: int
    stop: int
    box: tuple[int, ...]
    box_sel: tuple[slice, ...]
    chunk_sel: tuple[slice, ...]


def c_order_boxes(shape: tuple[int, ...], start: int, stop: int) -> list[Box]:
    """Split flat indices ``[start, stop)`` of ``shape`` into C-contiguous boxes, in order."""
    if start >= stop:
        return []
    if not shape:
        return [((), ())]
    inner = math.prod(shape[1:])
    rest = shape[1:]
    i0, r0 = divmod(start, inner)
    i1, r1 = divmod(stop, inner)
    if i0 == i1:
        return [((i0, *lo), (i0 + 1, *hi)) for lo, hi in c_order_boxes(rest, r0, r1)]
    boxes: list[Box] = []
    if r0:
        boxes += [((i0, *lo), (i0 + 1, *hi)) for lo, hi in c_order_boxes(rest, r0, inner)]
        i0 += 1
    if i1 > i0:
        boxes.append(((i0, *(0,) * len(rest)), (i1, *rest)))
    if r1:
        boxes += [((i1, *lo), (i1 + 1, *hi)) for lo, hi in c_order_boxes(rest, 0, r1)]
    return boxes


def _chunk_ranges(lo: tuple[int, ...], hi: tuple[int, ...], chunks: tuple[int, ...]):
    return [range(a // c, (b - 1) // c + 1) for a, b, c in zip(lo, hi, chunks, strict=True)]


def touched_ranges(
    shape: tuple[int, ...], chunks: tuple[int, ...], start: int, stop: int
) -> list[list[range]]:
    """For each C-contiguous box of elements ``[start, stop)``, its chunk ranges per axis."""
    return [_chunk_ranges(lo, hi, chunks) for lo, hi in c_order_boxes(shape, start, stop)]


def count_touched(shape: tuple[int, ...], chunks: tuple[int, ...], start: int, stop: int) -> int:
    """How many (chunk, box) pairs elements ``[start, stop)`` touch: the size of their
    plan, found without making it (a chunk met by two boxes counts twice)."""
    return sum(math.prod(map(len, r)) for r in touched_ranges(shape, chunks, start, stop))


def pieces(
    start: int, stop: int, count: Callable[[int, int], int], most: int
) -> Iterator[tuple[int, int]]:
    """Split ``[start, stop)`` into consecutive ranges for which ``count`` is at most
    ``most`` (or that hold one element), halving where it is more: a request over
    millions of tiny chunks is planned and served a bounded piece at a time."""
    if stop - start <= 1 or count(start, stop) <= most:
        if stop > start:
            yield start, stop
        return
    middle = (start + stop) // 2
    yield from pieces(start, middle, count, most)
    yield from pieces(middle, stop, count, most)


def plan_read(
    shape: tuple[int, ...],
    chunks: tuple[int, ...],
    start: int,
    stop: int,
    select: Callable[[list[range]], Iterable[tuple[int, ...]]] | None = None,
) -> dict[tuple[int, ...], list[Copy]]:
    """For elements ``[start, stop)``: each touched chunk and the copies it serves.

    Output positions are element offsets relative to ``start``. ``select`` picks, from
    the chunk ranges of each box, the chunks to plan (all of them by default).
    """
    plan: dict[tuple[int, ...], list[Copy]] = {}
    offset = 0
    for lo, hi in c_order_boxes(shape, start, stop):
        box = tuple(b - a for a, b in zip(lo, hi, strict=True))
        size = math.prod(box)
        ranges = _chunk_ranges(lo, hi, chunks)
        for coords in product(ranges) if select is None else select(ranges):
            box_sel = []
            chunk_sel = []
            for k, a, b, c in zip(coords, lo, hi, chunks, strict=True):
                c0 = k * c
                s, e = max(a, c0), min(b, c0 + c)
                box_sel.append(slice(s - a, e - a))
                chunk_sel.append(slice(s - c0, e - c0))
            plan.setdefault(coords, []).append(
                Copy(offset, offset + size, box, tuple(box_sel), tuple(chunk_sel))
            )
        offset += size
    return plan


# A run of a copy: a contiguous span of a chunk's C-order elements (its first and its
# count) and where its pieces go in the output (flat offset and count of each, in order).
Run = tuple[int, int, list[tuple[int, int]]]


def copy_runs(copy: Copy, chunks: tuple[int, ...], most: int = 1024) -> list[Run]:
    """``copy`` as spans of a C-order chunk, each read at once into at most ``most``
    pieces of the output: a chunk stored as it is read goes straight from its file into
    the reply (a selection across whole rows of a chunk is one span)."""
    if not chunks:
        return [(0, 1, [(copy.start, 1)])]
    csteps = [math.prod(chunks[i + 1 :]) for i in range(len(chunks))]
    bsteps = [math.prod(copy.box[i + 1 :]) for i in range(len(chunks))]
    last_c, last_b = copy.chunk_sel[-1], copy.box_sel[-1]
    n = last_c.stop - last_c.start
    # where each line (along the last axis) starts, in the chunk and in the output
    lines_c = itertools.product(
        *(
            range(s.start * k, s.stop * k, k)
            for s, k in zip(copy.chunk_sel[:-1], csteps[:-1], strict=True)
        )
    )
    lines_b = itertools.product(
        *(
            range(s.start * k, s.stop * k, k)
            for s, k in zip(copy.box_sel[:-1], bsteps[:-1], strict=True)
        )
    )
    c0, o0 = last_c.start, copy.start + last_b.start
    runs: list[list] = []
    for at_c, at_b in zip(lines_c, lines_b, strict=True):
        c, o = c0 + sum(at_c), o0 + sum(at_b)
        if runs and runs[-1][0] + runs[-1][1] == c and len(runs[-1][2]) < most:
            run = runs[-1]
            run[1] += n
            last_o, last_n = run[2][-1]
            if last_o + last_n == o:
                run[2][-1] = (last_o, last_n + n)
            else:
                run[2].append((o, n))
        elif n:
            runs.append([c, n, [(o, n)]])
    return [(c, n, pieces) for c, n, pieces in runs]


class Planner:
    """``plan_read`` for one array, remembering plans by where a request falls in its slab.

    A slab is one row of chunks along the first axis. Requests at the same place within
    full slabs touch the same chunks but for the first coordinate, with the same copies,
    so a sequential reader, whose requests repeat a few shapes, plans each shape once.
    The plans kept hold at most ``COPIES`` copies (about 0.5 KiB each): random requests
    spanning many chunks never repeat, and a count of plans would not bound their memory.
    """

    COPIES = 4096

    def __init__(self, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        self.shape, self.chunks = shape, chunks
        self._slab = chunks[0] * math.prod(shape[1:]) if shape else 0
        self._full = shape[0] // chunks[0] if shape else 0  # slabs with no edge on axis 0
        self._plans: dict[tuple[int, int], dict[tuple[int, ...], list[Copy]]] = {}
        self._copies = 0  # held by the plans kept
        # flat C-order index steps of each axis, in the array and in a chunk
        self.steps = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
        self._chunk_steps = [math.prod(chunks[i + 1 :]) for i in range(len(chunks))]

    def one_chunk_row(
        self, start: int, stop: int
    ) -> tuple[tuple[int, ...], tuple[int | slice, ...], int] | None:
        """For a request inside one row of one chunk (small random reads): the chunk, the
        index of the request's elements in it (integers, then a slice) and the first
        one's C-order place there, found directly: the general plan costs several times
        more than such a read's copy."""
        if not self.steps:  # a 0-d array has no rows
            return None
        coords, index = [], []
        flat = 0
        rest = start
        for step, width, inner in zip(self.steps, self.chunks, self._chunk_steps, strict=True):
            i, rest = divmod(rest, step)
            c, k = divmod(i, width)
            coords.append(c)
            index.append(k)
            flat += k * inner
        n = stop - start
        k = index[-1]
        if k + n > self.chunks[-1] or coords[-1] * self.chunks[-1] + k + n > self.shape[-1]:
            return None
        index[-1] = slice(k, k + n)
        return tuple(coords), tuple(index), flat

    @staticmethod
    def row_plan(found: tuple, n: int) -> dict[tuple[int, ...], list[Copy]]:
        """The plan of a request of ``n`` elements that :meth:`one_chunk_row` found."""
        coords, index, _ = found
        sel = (*(slice(i, i + 1) for i in index[:-1]), index[-1])
        box = (1,) * (len(index) - 1) + (n,)
        whole = tuple(slice(0, b) for b in box)
        return {coords: [Copy(0, n, box, whole, sel)]}

    def plan(self, start: int, stop: int) -> dict[tuple[int, ...], list[Copy]]:
        if (found := self.one_chunk_row(start, stop)) is not None:
            return self.row_plan(found, stop - start)
        slab = self._slab
        if not slab or (stop - 1) // slab >= self._full:
            return plan_read(self.shape, self.chunks, start, stop)
        k = start // slab
        key = (start - k * slab, stop - k * slab)
        base = self._plans.get(key)
        if base is None:
            base = plan_read(self.shape, self.chunks, *key)
            copies = sum(map(len, base.values()))
            if self._copies + copies > self.COPIES:
                self._plans.clear()
                self._copies = 0
            if copies <= self.COPIES:
                self._plans[key] = base
                self._copies += copies
        if k == 0:
            return base
        return {(c[0] + k, *c[1:]): copies for c, copies in base.items()}


def product(ranges: list[range]) -> Iterator[tuple[int, ...]]:
    """``itertools.product`` over ranges, yielding tuples (also for zero dimensions)."""
    if not ranges:
        yield ()
        return
    for head in ranges[0]:
        for tail in product(ranges[1:]):
            yield (head, *tail)


def chunks_touched(
    shape: tuple[int, ...], chunks: tuple[int, ...], start: int, stop: int
) -> list[tuple[int, ...]]:
    """The chunks holding elements ``[start, stop)``, in the order a C-order walk meets them."""
    seen: dict[tuple[int, ...], None] = {}
    for lo, hi in c_order_boxes(shape, start, stop):
        for coords in product(_chunk_ranges(lo, hi, chunks)):
            seen.setdefault(coords)
    return list(seen)
