"""The per-array engine: chunk keys, codec pipelines, shards, fill values, whole and partial
reads, write-back. The filesystem above asks it for bytes of an array; it alone knows
chunks and stores."""

from __future__ import annotations

import errno
import logging
from collections.abc import Awaitable, Callable

import numpy as np

from zarrmount.array.byteorder import Swapped, shown_dtype
from zarrmount.array.reader import ArrayReader
from zarrmount.array.refusals import Refusals
from zarrmount.array.shared import Shared
from zarrmount.array.text import ChunkLines, FileLines, TextArray, TooLong
from zarrmount.array.writer import ArrayWriter
from zarrmount.codecs import CodecError, Pipeline, shared_pipeline
from zarrmount.errors import FsError
from zarrmount.format.model import ArrayMeta, ArrayNode
from zarrmount.journal import Journal

log = logging.getLogger(__name__)


class Arrays:
    """Opens the engine of each array a mount serves. Writable ones are kept for the
    mount's life: they may hold dirty chunks, and ``flush_all`` stores them."""

    def __init__(
        self,
        shared: Shared,
        *,
        read_only: bool,
        write_empty_chunks: bool = False,
        dirty_limit: int,
        root_pipeline: Pipeline | None = None,
        byteorder: str = "stored",
        text_max: int = 64 << 20,
        journal: Journal | None = None,
    ) -> None:
        self.shared = shared
        self.read_only = read_only
        self.write_empty_chunks = write_empty_chunks
        self.dirty_limit = dirty_limit
        self.root_pipeline = root_pipeline  # a root array's, built when it was found or reloaded
        self.byteorder = byteorder  # of the bytes array files show (-o byteorder)
        self.text_max = text_max  # the most text an array of strings may show (-o text_max)
        self.journal = journal  # writes are kept there until stored (-o journal)
        self.refusals = Refusals()  # writes refused after they began, for --stats
        self._writable: list[ArrayWriter] = []

    def dtype(self, meta: ArrayMeta) -> np.dtype:
        """The dtype of the bytes an array file shows (its byte order: ``-o byteorder``)."""
        return shown_dtype(meta.dtype, self.byteorder)

    def fresh_for(self, path: str) -> float | None:
        """Seconds the array's cached chunks stay trusted (None: not listed yet, or for good)."""
        return self.shared.revalidation.fresh_for(path)

    def gone(self, paths: set[str]) -> None:
        """Arrays a reload removed or replaced: nothing cached of them serves another."""
        self.shared.revalidation.gone(paths)

    def changed_ns(self, path: str) -> int | None:
        """When other writers were last seen to change the array's chunks, if ever."""
        return self.shared.revalidation.changed_ns(path)

    def open(self, node: ArrayNode) -> ArrayReader | Swapped:
        """A new engine for ``node``: an ArrayWriter unless the mount is read-only, its
        elements swapped where the mount shows another byte order than stored."""
        engine = self._open(node)
        shown = self.dtype(node.meta)
        return engine if shown == node.meta.dtype else Swapped(engine, shown)

    def text(
        self, node: ArrayNode, read: Callable[[int, int], Awaitable[bytes]] | None
    ) -> TextArray:
        """The text of an array of strings: decoded from its chunks where its elements
        vary in length (which have no array file), else from ``read`` (bytes of its array
        file)."""
        if node.meta.strings is not None:
            return TextArray(ChunkLines(node, self.shared, self.text_max), self.text_max)
        if read is None:
            raise ValueError(f"{node.path}: fixed-size strings are read from their file")
        lines = FileLines(node.meta, self.dtype(node.meta), read)
        return TextArray(lines, self.text_max)

    def pipeline(self, node: ArrayNode) -> Pipeline:
        """The codecs of ``node``'s chunks (EIO where they cannot be built)."""
        try:
            return (
                self.root_pipeline
                if self.root_pipeline is not None and node.path == ""
                else shared_pipeline(node.meta)
            )
        except CodecError as e:  # built once already, when the array was listed
            log.error("%s: %s", node.path, e)
            raise FsError(errno.EIO, str(e)) from e

    def _open(self, node: ArrayNode) -> ArrayReader:
        pipeline = self.pipeline(node)
        if self.read_only:
            return ArrayReader(node, pipeline, self.shared)
        array = ArrayWriter(
            node,
            pipeline,
            self.shared,
            write_empty_chunks=self.write_empty_chunks,
            dirty_limit=max(self.dirty_limit, node.meta.chunk_nbytes),
            refusals=self.refusals,
            journal=self.journal,
        )
        self._writable.append(array)
        return array

    async def flush_all(self, durable: bool = True) -> int:
        """Store every dirty chunk of every array and make it durable (unless not
        ``durable``: a journal checkpoint), as unmounting a filesystem does; returns how
        many arrays failed."""
        failed = set()
        steps = [ArrayWriter.flush, ArrayWriter.sync] if durable else [ArrayWriter.flush]
        for step in steps:  # all stored, then all synced: one commit where syncs commit
            for array in self._writable:
                if array in failed:
                    continue
                try:
                    await step(array)
                except FsError as e:
                    failed.add(array)
                    log.error("%s: %s", array.path, e)
        return len(failed)


# ``Pipeline`` is named here for the layers above, which hand a root array's pipeline (built
# where the hierarchy was opened) to ``Arrays`` without using it: they import nothing from
# ``codecs/``.
__all__ = [
    "ArrayReader",
    "ArrayWriter",
    "Arrays",
    "Pipeline",
    "Shared",
    "Swapped",
    "TextArray",
    "TooLong",
]
