"""Consolidated metadata read a node's document at a time.

Parsed whole, the documents of 100,000 arrays take 250 MiB (a dict per object, a string or
number per value) for 40 MB of JSON, and parsing them takes that much at once. Scanned
member by member, each document is kept as its own JSON text (no larger than it was in
the whole), to be parsed when its group is listed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.decoder import WHITESPACE, scanstring
from typing import Any

from zarrmount.format.jsondoc import check_depth, too_deep
from zarrmount.format.model import MetadataError

_decode = json.JSONDecoder().raw_decode
Members = dict[str, str]


def split(text: str, what: str, path: tuple[str, ...]) -> tuple[Any, Members | None]:
    """The document in ``text``, but for the object at ``path`` (keys of nested objects),
    left empty there: its members come back apart, each as its own JSON text, by key (a
    key given twice: its last value, as :func:`json.loads` keeps). None where ``path``
    leads to no object. MetadataError naming ``what`` where ``text`` is not usable JSON."""
    try:
        doc, end, members = _value(text, _skip(text, 0), path, 1, what)
        end = _skip(text, end)
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
    except json.JSONDecodeError as e:
        raise MetadataError(f"{what} is not valid JSON: {e}") from e
    except RecursionError:
        raise too_deep(what) from None
    return doc, members


def _skip(text: str, i: int) -> int:
    return WHITESPACE.match(text, i).end()


def _plain(text: str, i: int, depth: int, what: str) -> tuple[Any, int]:
    value, end = _decode(text, i)
    check_depth(value, what, depth)
    return value, end


def _value(
    text: str, i: int, path: tuple[str, ...], depth: int, what: str
) -> tuple[Any, int, Members | None]:
    """The value at ``i``, where it ends, and the members of the object at ``path`` in it."""
    if not text.startswith("{", i):
        return (*_plain(text, i, depth, what), None)
    if not path:
        members: Members = {}

        def member(key: str, start: int) -> int:
            value, end = _plain(text, start, depth + 1, what)
            members[key] = _compact(text[start:end], value)
            return end

        return {}, _object(text, i, member), members
    doc: dict[str, Any] = {}
    found: Members | None = None

    def along(key: str, start: int) -> int:
        nonlocal found
        if key != path[0]:
            doc[key], end = _plain(text, start, depth + 1, what)
        else:
            doc[key], end, found = _value(text, start, path[1:], depth + 1, what)
        return end

    end = _object(text, i, along)
    return doc, end, found


def _compact(piece: str, value: Any) -> str:
    """A member's text; a pretty-printed one written again without the indentation that
    may double its size."""
    return json.dumps(value, separators=(",", ":")) if "\n" in piece else piece


def _object(text: str, i: int, member: Callable[[str, int], int]) -> int:
    """Read the object at ``i``, ``member(key, start)`` reading each value and telling
    where it ends; returns where the object ends."""
    i = _skip(text, i + 1)
    if text.startswith("}", i):
        return i + 1
    while True:
        if not text.startswith('"', i):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, i)
        key, i = scanstring(text, i + 1)
        i = _skip(text, i)
        if not text.startswith(":", i):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, i)
        i = _skip(text, member(key, _skip(text, i + 1)))
        if text.startswith("}", i):
            return i + 1
        if not text.startswith(",", i):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, i)
        i = _skip(text, i + 1)
