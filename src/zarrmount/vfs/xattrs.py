"""Extended attributes that describe each node exactly, so tools need no Zarr library."""

from __future__ import annotations

import json
import logging

from zarrmount.format.conventions import parse_conventions
from zarrmount.format.dtypes import dtype_label
from zarrmount.format.model import ArrayMeta

log = logging.getLogger(__name__)

PREFIX = "user.zarr."


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(", ", ": ")).encode()


def _attribute_xattrs(path: str, attributes: dict) -> dict[str, bytes]:
    found = {PREFIX + "attributes": _json(attributes)}
    conventions, problems = parse_conventions(attributes)
    for problem in problems:
        log.warning("%s: malformed conventions: %s", path or "/", problem)
    if conventions is not None:
        found[PREFIX + "conventions"] = _json(conventions)
    return found


def group_xattrs(path: str, attributes: dict) -> dict[str, bytes]:
    return _attribute_xattrs(path, attributes)


def array_xattrs(path: str, meta: ArrayMeta) -> dict[str, bytes]:
    found = _attribute_xattrs(path, meta.attributes)
    found |= {
        PREFIX + "dtype": dtype_label(meta.dtype).encode(),
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
