"""``NAME.txt``: the text of an array of strings, one element per line (``array/text.py``).
Its size is measured when its directory is listed (its lines counted a chunk at a time,
no text rendered); a read renders the blocks of lines it touches, one at a time. Read-only."""

from __future__ import annotations

import stat

import numpy as np

from zarrmount.array import TextArray
from zarrmount.format.model import ArrayNode
from zarrmount.vfs.node import Handle, Node


class TextFile(Node):
    __slots__ = ("text", "opens", "array")

    def __init__(self, ino: int, parent: int, text: TextArray, array: ArrayNode | None) -> None:
        super().__init__(ino, parent)
        self.text = text
        self.opens = 0
        self.array = array  # an array of variable-length strings: this file shows it

    @property
    def model(self) -> ArrayNode | None:
        return self.array

    def mode(self, read_only: bool) -> int:
        return stat.S_IFREG | 0o444

    def size(self) -> int:
        return self.text.size

    def open(self, flags: int) -> Handle:
        self.opens += 1
        return TextHandle(self)


class TextHandle(Handle):
    __slots__ = ("file",)

    def __init__(self, file: TextFile) -> None:
        self.file = file

    async def read(self, offset: int, size: int, reply: np.ndarray | None) -> bytes:
        return await self.file.text.read(offset, size)

    async def release(self) -> None:
        self.file.opens -= 1
        if not self.file.opens:
            self.file.text.let_go()
