"""Extended attributes that describe each node exactly, so tools need no Zarr library.

They are made when asked for, from the node's metadata: a group of 100,000 arrays keeps
no 100,000 dictionaries of encoded attributes.
"""

from __future__ import annotations

import json
import logging

import numpy as np

from zarrmount.format import conventions as conv
from zarrmount.format.dtypes import dtype_label
from zarrmount.format.model import ArrayMeta

log = logging.getLogger(__name__)

PREFIX = "user.zarr."


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(", ", ": ")).encode()


def warn_conventions(path: str, attributes: dict) -> None:
    """Log each problem of a malformed conventions block (once per node: when it is found)."""
    if conv.KEY not in attributes:
        return
    for problem in conv.parse_conventions(attributes)[1]:
        log.warning("%s: malformed conventions: %s", path or "/", problem)


def _attribute_xattrs(attributes: dict) -> dict[str, bytes]:
    found = {PREFIX + "attributes": _json(attributes)}
    conventions, _ = conv.parse_conventions(attributes)
    if conventions is not None:
        found[PREFIX + "conventions"] = _json(conventions)
    return found


def group_xattrs(path: str, attributes: dict) -> dict[str, bytes]:
    return _attribute_xattrs(attributes)


def array_xattrs(path: str, meta: ArrayMeta, dtype: np.dtype) -> dict[str, bytes]:
    """``dtype``: of the file's bytes (the stored one, unless ``-o byteorder`` says else)."""
    found = _attribute_xattrs(meta.attributes)
    found |= {
        PREFIX + "dtype": dtype_label(dtype).encode(),
        PREFIX + "shape": _json(list(meta.shape)),
        PREFIX + "chunks": _json(list(meta.chunks)),
        PREFIX + "fill_value": _json(meta.fill_json),
        PREFIX + "codecs": _json(meta.codecs),
        PREFIX + "format": meta.format_name.encode(),
    }
    if meta.zarr_format == 2:
        found[PREFIX + "order"] = meta.order.encode()
    if meta.shards is not None:
        found[PREFIX + "shards"] = _json(list(meta.shards))
    if meta.dimension_names is not None:
        found[PREFIX + "dimension_names"] = _json(list(meta.dimension_names))
    return found
