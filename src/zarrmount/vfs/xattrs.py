"""Extended attributes that describe each node exactly, so tools need no Zarr library."""

from __future__ import annotations

import json

from zarrmount.format.dtypes import dtype_label
from zarrmount.format.model import ArrayMeta

PREFIX = "user.zarr."


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(", ", ": ")).encode()


def group_xattrs(attributes: dict) -> dict[str, bytes]:
    return {PREFIX + "attributes": _json(attributes)}


def array_xattrs(meta: ArrayMeta) -> dict[str, bytes]:
    found = {
        PREFIX + "dtype": dtype_label(meta.dtype).encode(),
        PREFIX + "shape": _json(list(meta.shape)),
        PREFIX + "chunks": _json(list(meta.chunks)),
        PREFIX + "fill_value": _json(meta.fill_json),
        PREFIX + "codecs": _json(meta.codecs),
        PREFIX + "format": meta.format_name.encode(),
        PREFIX + "attributes": _json(meta.attributes),
    }
    if meta.zarr_format == 2:
        found[PREFIX + "order"] = meta.order.encode()
    if meta.shards is not None:
        found[PREFIX + "shards"] = _json(list(meta.shards))
    if meta.dimension_names is not None:
        found[PREFIX + "dimension_names"] = _json(list(meta.dimension_names))
    return found
