"""Consolidated metadata read a node's document at a time.

Parsed whole, the documents of 100,000 arrays take 250 MiB (a dict per object, a string or
number per value) for 40 MB of JSON, and parsing them takes that much at once. Scanned
member by member over a window of the stored document (``format/windowed.py``), each
document is kept as its own compact JSON text, to be parsed when its group is listed: what
is held while reading is what is kept, and a window of the document.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from json.decoder import scanstring
from typing import Any

from zarrmount.format.jsondoc import MAX_BYTES, MAX_DEPTH, check_depth, too_deep
from zarrmount.format.model import MetadataError
from zarrmount.format.windowed import STEP, Stored, Window

# Larger documents are refused before reading: a bound on the time they take. What they
# may hold in memory is bounded apart: the kept documents by MAX_KEPT, each value and the
# rest of the document, parsed, by MAX_BYTES as any document is.
MAX_SPLIT_BYTES = 512 << 20
MAX_KEPT = 256 << 20  # bytes the kept documents take: texts, keys, places in a dict
_PLACE = 64  # bytes a member's place in a dict takes, about

_decode = json.JSONDecoder().raw_decode
Members = dict[str, str]


def split(
    stored: Stored, what: str, path: tuple[str, ...], step: int = STEP
) -> tuple[Any, Members | None]:
    """The document in ``stored``, but for the object at ``path`` (keys of nested objects),
    left empty there: its members come back apart, each as its own JSON text, by key (a
    key given twice: its last value, as :func:`json.loads` keeps). None where ``path``
    leads to no object. MetadataError naming ``what`` where the document is not usable
    JSON, or too large. ``step``: the bytes read at a time."""
    if stored.size > MAX_SPLIT_BYTES:
        raise MetadataError(f"{what} has {stored.size} bytes, more than {MAX_SPLIT_BYTES} allowed")
    window = Window(stored, what, MAX_BYTES, step)
    try:
        return _Split(window, what).document(path)
    except json.JSONDecodeError as e:
        raise MetadataError(f"{what} is not valid JSON: {window.where(e)}") from e
    except RecursionError:
        raise too_deep(what) from None


class _Split:
    """One document read: the values outside the members parsed (at most MAX_BYTES of
    their text, as any document), the members kept (at most MAX_KEPT)."""

    def __init__(self, window: Window, what: str) -> None:
        self.w, self.what = window, what
        self.parsed = 0  # characters parsed into the document
        self.kept = 0  # bytes the members kept take

    def document(self, path: tuple[str, ...]) -> tuple[Any, Members | None]:
        doc, end, members = self.value(self.w.skip(0), path, 1)
        end = self.w.skip(end)
        if end != len(self.w.text):
            raise json.JSONDecodeError("Extra data", self.w.text, end)
        return doc, members

    def value(self, i: int, path: tuple[str, ...], depth: int) -> tuple[Any, int, Members | None]:
        """The value at ``i``, where it ends, and the members of the object at ``path``."""
        if not self.w.text.startswith("{", i):
            return (*self.plain(i, depth), None)
        if not path:
            members: Members = {}

            def member(key: str, start: int) -> int:
                members[key], end = self.member(key, start, depth + 1)
                return end

            return {}, self.object(i, member), members
        doc: dict[str, Any] = {}
        found: Members | None = None

        def along(key: str, start: int) -> int:
            nonlocal found
            if key != path[0]:
                doc[key], end = self.plain(start, depth + 1)
            else:
                doc[key], end, found = self.value(start, path[1:], depth + 1)
            return end

        return doc, self.object(i, along), found

    def plain(self, i: int, depth: int) -> tuple[Any, int]:
        value, start, end = self.w.scan(_decode, i)
        self.check_depth(value, start, end, depth)
        self.parsed += end - start
        if self.parsed > MAX_BYTES:
            raise MetadataError(
                f"{self.what} has more than {MAX_BYTES} characters beside its consolidated metadata"
            )
        return value, end

    def member(self, key: str, i: int, depth: int) -> tuple[str, int]:
        """A member's text, and where it ends; a pretty-printed one written again without
        the indentation that may double its size."""
        value, start, end = self.w.scan(_decode, i)
        self.check_depth(value, start, end, depth)
        piece = self.w.text[start:end]
        text = json.dumps(value, separators=(",", ":")) if "\n" in piece else piece
        self.kept += sys.getsizeof(key) + sys.getsizeof(text) + _PLACE
        if self.kept > MAX_KEPT:
            raise MetadataError(
                f"{self.what}'s consolidated metadata takes more than {MAX_KEPT >> 20} MiB"
            )
        return text, end

    def check_depth(self, value: Any, start: int, end: int, depth: int) -> None:
        """:func:`check_depth` of the value parsed from ``text[start:end]``, where its
        brackets could nest too deep: a node's document has a few dozen, walked it would
        take most of the time reading consolidated metadata takes."""
        text = self.w.text
        if depth + text.count("[", start, end) + text.count("{", start, end) > MAX_DEPTH:
            check_depth(value, self.what, depth)

    def object(self, i: int, member: Callable[[str, int], int]) -> int:
        """Read the object at ``i``, ``member(key, start)`` reading each value and telling
        where it ends; returns where the object ends."""
        w = self.w
        i = w.skip(i + 1)
        if w.text.startswith("}", i):
            return i + 1
        while True:
            if not w.text.startswith('"', i):
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", w.text, i
                )
            key, _, i = w.scan(_key, i)
            i = w.skip(i)
            if not w.text.startswith(":", i):
                raise json.JSONDecodeError("Expecting ':' delimiter", w.text, i)
            i = w.skip(member(key, w.skip(i + 1)))
            if w.text.startswith("}", i):
                return i + 1
            if not w.text.startswith(",", i):
                raise json.JSONDecodeError("Expecting ',' delimiter", w.text, i)
            i = w.skip(i + 1)


def _key(text: str, i: int) -> tuple[str, int]:
    """The string whose opening quote is at ``i``, and where it ends."""
    return scanstring(text, i + 1)
