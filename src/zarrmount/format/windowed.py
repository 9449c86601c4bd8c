"""A stored document's text, read and decoded a window at a time.

Decoded whole, a document's text takes as much memory again as its bytes (up to four
times, past Latin-1), beside them: consolidated metadata of 100,000 arrays, as zarr-python
indents it, is 85 MB. Read a window at a time, only the value being parsed and the rest
of its window are held; a value the window's end may have cut short is parsed again over
a window read on.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from dataclasses import dataclass
from json.decoder import WHITESPACE
from typing import TypeVar

from zarrmount.format.model import MetadataError

T = TypeVar("T")

STEP = 1 << 20  # bytes read at a time
# A value, or an error, found this close to the window's end may be the end's doing: "12"
# of "12.5e3", "-Infinit" of "-Infinity", an escape "\u00" cut before its last digits.
MARGIN = 16
_UNTERMINATED = "Unterminated string"  # its position is where the string starts


@dataclass(frozen=True)
class Stored:
    """A document read a part at a time: ``read(offset, length)`` gives the bytes from
    ``offset``, at most ``length`` of them (fewer only at its end)."""

    size: int
    read: Callable[[int, int], bytes | memoryview]


def held(raw: bytes) -> Stored:
    """A document already held whole (a remote store's GET), read through views of it."""
    view = memoryview(raw)
    return Stored(len(raw), lambda at, length: view[at : at + length])


class Window:
    """The text of a stored document from some point on, read on as parsing needs it.
    Positions are indices into ``text``; reading on (:meth:`more`) moves them, so a
    caller keeps none across a call that reads on, but the one it returns."""

    def __init__(self, stored: Stored, what: str, limit: int, step: int = STEP) -> None:
        self.text = ""
        self.final = False  # ``text`` runs to the document's end
        self._stored, self._what, self._limit = stored, what, limit
        self._step = max(step, 4)  # the first read tells the encoding: 4 bytes at least
        self._read = 0  # bytes read so far
        self._decoder: codecs.IncrementalDecoder | None = None
        self._line, self._column, self._char = 1, 0, 0  # where ``text`` starts
        self.more(0)

    def more(self, i: int) -> int:
        """Drop the text before ``i`` and read on; returns where ``i`` is now (0). A
        value longer than the window is read on by as much as it has: parsed again each
        time, it is parsed in time linear in its length overall."""
        rest = self.text[i:]
        if len(rest) > self._limit:
            raise MetadataError(f"{self._what} has a value longer than {self._limit} characters")
        self._moved(i)
        raw = self._stored.read(self._read, max(self._step, len(rest)))
        self._read += len(raw)
        self.final = not raw or self._read >= self._stored.size
        self.text = rest + self._decode(raw)
        return 0

    def skip(self, i: int) -> int:
        """Where the token after any whitespace at ``i`` starts, read on until it is in
        the window (``len(text)``: the document ends first)."""
        while True:
            i = WHITESPACE.match(self.text, i).end()
            if i < len(self.text) or self.final:
                return i
            i = self.more(i)

    def scan(self, parse: Callable[[str, int], tuple[T, int]], i: int) -> tuple[T, int, int]:
        """``parse(text, i)``'s value, where it starts and where it ends, read on until the
        window's end cannot have cut it short (nor made the error ``parse`` raised)."""
        while True:
            try:
                value, end = parse(self.text, i)
            except json.JSONDecodeError as e:
                if not self._short(e.pos, e.msg.startswith(_UNTERMINATED)):
                    raise
            else:
                if not self._short(end):
                    return value, i, end
            i = self.more(i)

    def where(self, e: json.JSONDecodeError) -> str:
        """``e`` worded as :func:`json.loads` words it, placed in the whole document."""
        line = self._line + e.lineno - 1
        column = e.colno + (self._column if e.lineno == 1 else 0)
        return f"{e.msg}: line {line} column {column} (char {self._char + e.pos})"

    def _short(self, pos: int, unterminated: bool = False) -> bool:
        return not self.final and (unterminated or pos + MARGIN > len(self.text))

    def _moved(self, i: int) -> None:
        lines = self.text.count("\n", 0, i)
        self._line += lines
        self._column = i - self.text.rfind("\n", 0, i) - 1 if lines else self._column + i
        self._char += i

    def _decode(self, raw: bytes | memoryview) -> str:
        """``raw`` decoded as :func:`json.loads` decodes bytes, whatever window edges cut."""
        try:
            if self._decoder is None:
                encoding = json.detect_encoding(bytes(raw[:4]))
                self._decoder = codecs.getincrementaldecoder(encoding)("surrogatepass")
            return self._decoder.decode(raw, self.final)
        except UnicodeDecodeError as e:
            raise MetadataError(f"{self._what} is not valid JSON: {e}") from e
