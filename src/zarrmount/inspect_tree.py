"""``zarrmount --inspect``: the tree as the mount would show it, and what it hides and why."""

from __future__ import annotations

import json
from typing import Any

from zarrmount.format.dtypes import dtype_label
from zarrmount.format.model import GroupNode, HiddenNode, Node
from zarrmount.hierarchy import walk
from zarrmount.store import Store
from zarrmount.vfs.fs import ROOT_ARRAY_NAME


def describe(node: Node) -> dict[str, Any]:
    if isinstance(node, HiddenNode):
        return {"path": node.path, "type": node.kind, "shown": False, "reason": node.reason}
    if isinstance(node, GroupNode):
        return {"path": node.path, "type": "group", "shown": True, "zarr_format": node.zarr_format,
                "attributes": node.attributes}
    meta = node.meta
    return {
        "path": node.path,
        "type": "array",
        "shown": True,
        "file": node.path or ROOT_ARRAY_NAME,
        "zarr_format": meta.zarr_format,
        "shape": list(meta.shape),
        "chunks": list(meta.chunks),
        "dtype": dtype_label(meta.dtype),
        "order": meta.order,
        "fill_value": meta.fill_json,
        "codecs": meta.codecs,
        "size": meta.nbytes,
        "attributes": meta.attributes,
    }


def _codec_names(codecs: dict[str, Any]) -> str:
    names = [f["id"] for f in codecs.get("filters") or ()]
    if codecs.get("compressor"):
        names.append(codecs["compressor"]["id"])
    return "+".join(names) or "raw"


def _line(d: dict[str, Any]) -> str:
    name = d["path"] or "/"
    if not d["shown"]:
        return f"{name}  [{d['type']}, not shown: {d['reason']}]"
    if d["type"] == "group":
        return name if name == "/" else f"{name}/"
    shape = "x".join(map(str, d["shape"])) or "scalar"
    chunks = "x".join(map(str, d["chunks"])) or "scalar"
    return (f"{name}  {d['dtype']} {shape} chunks {chunks} order {d['order']} "
            f"codecs {_codec_names(d['codecs'])} ({d['size']} bytes)")


def inspect(store: Store, as_json: bool) -> str:
    nodes = [describe(n) for n in walk(store)]
    if as_json:
        return json.dumps({"source": store.url, "nodes": nodes}, indent=2)
    return "\n".join(_line(d) for d in sorted(nodes, key=lambda d: d["path"]))
