"""JSON metadata documents, parsed as the hostile input they may be."""

from __future__ import annotations

import json
from typing import Any

from zarrmount.format.model import MetadataError

# Deeper documents are refused: real metadata nests a few levels, and every later use of
# a document (attributes as xattrs, --inspect) must be safe from Python's recursion limit.
MAX_DEPTH = 256
# Larger documents are refused before parsing: parsed JSON takes several times its size in
# memory. Consolidated metadata of 100,000 arrays fits.
MAX_BYTES = 64 << 20


def load_json(raw: bytes, what: str) -> Any:
    """The document in ``raw``; MetadataError naming ``what`` if it is not usable JSON."""
    if len(raw) > MAX_BYTES:
        raise MetadataError(f"{what} has {len(raw)} bytes, more than {MAX_BYTES} allowed")
    too_deep = MetadataError(f"{what} nests deeper than {MAX_DEPTH} levels")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MetadataError(f"{what} is not valid JSON: {e}") from e
    except RecursionError:
        raise too_deep from None
    if _too_deep(doc):
        raise too_deep
    return doc


def _too_deep(doc: Any) -> bool:
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return False
