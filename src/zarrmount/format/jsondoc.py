"""JSON metadata documents, parsed as the hostile input they may be."""

from __future__ import annotations

import json
from typing import Any

from zarrmount.format.model import MetadataError

# Deeper documents are refused: real metadata nests a few levels, and every later use of
# a document (attributes as xattrs, --inspect) must be safe from Python's recursion limit.
MAX_DEPTH = 256
# Larger documents are refused before parsing: parsed JSON takes several times its size in
# memory. Consolidated metadata is read a window at a time, each node's document kept as
# its text (format/consolidated.py: its own limits); there this bounds each value, and the
# rest of the document together.
MAX_BYTES = 64 << 20


def load_json(raw: bytes, what: str) -> Any:
    """The document in ``raw``; MetadataError naming ``what`` if it is not usable JSON."""
    _check_size(raw, what)
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MetadataError(f"{what} is not valid JSON: {e}") from e
    except RecursionError:
        raise too_deep(what) from None
    check_depth(doc, what)
    return doc


def _check_size(raw: bytes, what: str) -> None:
    if len(raw) > MAX_BYTES:
        raise MetadataError(f"{what} has {len(raw)} bytes, more than {MAX_BYTES} allowed")


def too_deep(what: str) -> MetadataError:
    return MetadataError(f"{what} nests deeper than {MAX_DEPTH} levels")


def check_depth(doc: Any, what: str, depth: int = 1) -> None:
    """MetadataError if ``doc``, found ``depth`` levels down its document, nests deeper
    than MAX_DEPTH levels in all."""
    stack = [(doc, depth)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise too_deep(what)
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
