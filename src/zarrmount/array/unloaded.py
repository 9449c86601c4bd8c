"""Chunks a writer began without loading what the store holds of them.

A sequential writer's first write into a chunk covers a part of it (the kernel hands
writes over 128 KiB at a time), and loading the chunk to patch it costs a round trip,
or a whole read of a large chunk, for elements the next writes replace anyway. Such a
chunk starts from the fill value with a mask of the elements written; once every
element is written it is complete and nothing is loaded. Anything that needs the
chunk's other elements before then (a read, its write-back) loads the stored chunk once
and fills them in (``ChunkSource.complete``).
"""

from __future__ import annotations

import numpy as np

from zarrmount.array.grid import Coords


class Unloaded:
    """The masks of written elements of chunks begun without a load, by coordinates."""

    def __init__(self) -> None:
        self._masks: dict[Coords, np.ndarray] = {}  # True: written (or padding)
        self._left: dict[Coords, int] = {}  # elements not written yet

    def __contains__(self, coords: object) -> bool:
        return coords in self._masks

    def __bool__(self) -> bool:
        return bool(self._masks)

    def begin(self, coords: Coords, chunks: tuple[int, ...], inside: tuple[int, ...]) -> None:
        """``coords`` starts unloaded; elements past ``inside`` (an edge chunk's padding,
        the fill value) count as written."""
        mask = np.ones(chunks, dtype=bool)
        mask[tuple(slice(0, n) for n in inside)] = False
        self._masks[coords] = mask
        self._left[coords] = int(np.prod(inside))

    def written(self, coords: Coords, where: tuple[slice, ...]) -> None:
        """Elements ``where`` of ``coords`` were written; complete once all were."""
        mask = self._masks.get(coords)
        if mask is None:
            return
        part = mask[where]
        self._left[coords] -= part.size - int(np.count_nonzero(part))
        mask[where] = True
        if self._left[coords] <= 0:
            self.forget(coords)

    def mask(self, coords: Coords) -> np.ndarray | None:
        return self._masks.get(coords)

    def forget(self, coords: Coords) -> None:
        self._masks.pop(coords, None)
        self._left.pop(coords, None)
