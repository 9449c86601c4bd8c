"""``zarrmount --inspect``: the tree as the mount would show it, and what it hides and why."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from zarrmount.format.conventions import parse_conventions
from zarrmount.format.dtypes import dtype_label
from zarrmount.format.model import GroupNode, HiddenNode, Node
from zarrmount.format.multiscales import describe as describe_pyramid
from zarrmount.format.multiscales import pyramid
from zarrmount.format.physical import describe as describe_space
from zarrmount.format.physical import spaces
from zarrmount.headers import NotApplicable
from zarrmount.headers.hdf5 import Array
from zarrmount.headers.hdf5.objects import array_problem
from zarrmount.headers.hdf5_group import STRINGS as HDF5_STRINGS
from zarrmount.headers.hdf5_group import file_name as h5_name
from zarrmount.headers.netcdf_group import STRINGS, file_name, why_not
from zarrmount.headers.tiff import tiled_image
from zarrmount.hierarchy import Dialect, walk
from zarrmount.inspect_places import line, places
from zarrmount.options import SIDECAR_KINDS
from zarrmount.vfs.fs import ROOT_ARRAY_NAME
from zarrmount.vfs.sidecars import SIDECARS, Subject, reasons


def _conventions(attributes: dict[str, Any]) -> dict[str, Any]:
    conventions, problems = parse_conventions(attributes)
    found: dict[str, Any] = {}
    if conventions is not None:
        found["conventions"] = conventions
    if problems:
        found["convention_problems"] = problems
    return found


def _netcdf(meta, file: str, dataset: str) -> dict[str, Any]:
    """The group's netCDF file that holds the array, or why it is left out."""
    group, _, name = file.rpartition("/")
    why = STRINGS if meta.strings else why_not(name, meta, meta.dtype)
    if why:
        return {"reason": why}
    own = file_name(group, dataset)
    return {"file": f"{group}/{own}" if group else own}


def _hdf5(meta, file: str, dataset: str) -> dict[str, Any]:
    """The HDF5 file of the array's group that holds it (those of the groups above hold
    it too), or why it is left out."""
    group, _, name = file.rpartition("/")
    why = HDF5_STRINGS if meta.strings else array_problem(Array(name, meta.shape, meta.dtype))
    if why:
        return {"reason": why}
    own = h5_name(group, dataset)
    return {"file": f"{group}/{own}" if group else own}


def _sidecars(meta, file: str, kinds: list[str], dataset: str) -> dict[str, Any]:
    """Each sidecar kind's file, or why the array has none."""
    name = file.rpartition("/")[2]
    raw = [] if meta.strings else kinds  # no raw form: no header describes one
    described = Subject(meta.shape, meta.dtype, name, meta.attributes)
    found = {
        kind: {"file": file + SIDECARS[kind].suffix} if reason is None else {"reason": reason}
        for kind, reason in reasons(described, raw).items()
    }
    if "file" in found.get("tiff", {}):
        found["tiff"]["tiles"] = _tiles(meta)
    if "text" in kinds and (meta.strings or meta.dtype.kind in "US"):
        # its size (within text_max, or not shown) is measured when its group is listed
        found["text"] = {"file": file + ".txt"}
    if "netcdf" in kinds and file != ROOT_ARRAY_NAME:
        found["netcdf"] = _netcdf(meta, file, dataset)
    if "hdf5" in kinds and file != ROOT_ARRAY_NAME:
        found["hdf5"] = _hdf5(meta, file, dataset)
    return found


def _tiles(meta) -> list[int] | str:
    """The ``.tif`` view's tile shape (its chunks'), or why it is made of strips."""
    try:
        return list(tiled_image(meta.shape, meta.chunks).block_shape)
    except NotApplicable as e:
        return f"strips: {e}"


def _arrays(walked: list[Node]) -> dict[str, dict[str, tuple]]:
    """The shape and dtype of each shown array, by its group's path and its name."""
    arrays: dict[str, dict[str, tuple]] = {}
    for node in walked:
        if not isinstance(node, (GroupNode, HiddenNode)):
            parent, _, name = node.path.rpartition("/")
            arrays.setdefault(parent, {})[name] = (node.meta.shape, node.meta.dtype.str)
    return arrays


def _pyramids(walked: list[Node]) -> dict[str, str]:
    """Each group's pyramid (levels shown as overviews of its first's tiled ``.tif``), or
    why the multiscales it declares make none; groups declaring none are left out."""
    arrays = _arrays(walked)
    found = {}
    for node in walked:
        if isinstance(node, GroupNode):
            got = pyramid(node.attributes, arrays.get(node.path, {}))
            if got is not None:
                found[node.path] = describe_pyramid(got)
    return found


def _spaces(walked: list[Node]) -> dict[str, dict[str, Any]]:
    """Each array's physical space (format/physical.py), or why it has none, by path;
    arrays of groups declaring no multiscales are left out."""
    arrays, found = _arrays(walked), {}
    for node in walked:
        if isinstance(node, GroupNode):
            for name, space in spaces(node.attributes, arrays.get(node.path, {})).items():
                path = f"{node.path}/{name}" if node.path else name
                found[path] = {"described": describe_space(space), **asdict(space)}
    return found


def describe(
    node: Node, kinds: tuple[str, ...] | list[str] = SIDECAR_KINDS, dataset: str = "root"
) -> dict[str, Any]:
    if isinstance(node, HiddenNode):
        return {"path": node.path, "type": node.kind, "shown": False, "reason": node.reason}
    if isinstance(node, GroupNode):
        return {
            "path": node.path,
            "type": "group",
            "shown": True,
            "zarr_format": node.zarr_format,
            "implicit": node.implicit,
            "attributes": node.attributes,
            **_conventions(node.attributes),
        }
    meta = node.meta
    return _conventions(meta.attributes) | {
        "path": node.path,
        "type": "array",
        "shown": True,
        "file": None if meta.strings else node.path or ROOT_ARRAY_NAME,
        "zarr_format": meta.zarr_format,
        "format": meta.format_name,
        "shape": list(meta.shape),
        "chunks": list(meta.chunks),
        "shards": list(meta.shards) if meta.shards else None,
        "dimension_names": list(meta.dimension_names) if meta.dimension_names else None,
        "dtype": dtype_label(meta.dtype),
        "order": meta.order,
        "fill_value": meta.fill_json,
        "codecs": meta.codecs,
        "size": None if meta.strings else meta.nbytes,
        "sidecars": _sidecars(meta, node.path or ROOT_ARRAY_NAME, list(kinds), dataset),
        "attributes": meta.attributes,
    }


def _codec_names(codecs: dict[str, Any]) -> str:
    if "codecs" in codecs:
        return "+".join(c["name"] for c in codecs["codecs"])
    names = [f["id"] for f in codecs.get("filters") or ()]
    if codecs.get("compressor"):
        names.append(codecs["compressor"]["id"])
    return "+".join(names) or "raw"


def _printable(text: str) -> str:
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def _line(d: dict[str, Any]) -> str:
    name = _printable(d["path"] or "/")
    if not d["shown"]:
        return f"{name}  [{d['type']}, not shown: {d['reason']}]"
    names = ", ".join(c["name"] or c["uuid"] for c in d.get("conventions", []))
    notes = f"  conventions: {names}" if names else ""
    if d.get("convention_problems"):
        notes += f"  (malformed conventions: {'; '.join(d['convention_problems'])})"
    if d["type"] == "group":
        pyramid = f"  pyramid: {d['pyramid']}" if "pyramid" in d else ""
        return (name if name == "/" else f"{name}/") + notes + pyramid
    shape = "x".join(map(str, d["shape"])) or "scalar"
    chunks = "x".join(map(str, d["chunks"])) or "scalar"
    if d["shards"]:
        chunks += " in shards " + "x".join(map(str, d["shards"]))
    # The file as the mount shows it: a root array is the file ``array`` in the mount root.
    file = f"file MNT/{_printable(d['file'])}" if d["file"] else "strings, no raw file"
    size = f" ({d['size']} bytes)" if d["file"] else ""
    origins = d.get("from") or []
    more = f" and {len(origins) - 3} more" if len(origins) > 3 else ""
    where = f"  from {', '.join(origins[:3])}{more}" if origins else ""
    return (
        f"{name}  {file}  v{d['format']} {d['dtype']} {shape} "
        f"chunks {chunks} codecs {_codec_names(d['codecs'])}{size}{where}{notes}"
        + _sidecar_notes(d["sidecars"])
        + line(d.get("place"))
        + (f"  space: {d['space']['described']}" if "space" in d else "")
    )


def _sidecar_notes(sidecars: dict[str, Any]) -> str:
    got = [k + _tiled(v.get("tiles")) for k, v in sidecars.items() if "file" in v]
    missing = [f"{k}: {v['reason']}" for k, v in sidecars.items() if "reason" in v]
    notes = f"  sidecars: {'+'.join(got)}" if got else ""
    return notes + (f"  (none for {'; '.join(missing)})" if missing else "")


def _tiled(tiles: list[int] | str | None) -> str:
    if tiles is None:
        return ""
    return f" ({tiles})" if isinstance(tiles, str) else f" (tiles {tiles[0]}x{tiles[1]})"


def inspect(
    dialect: Dialect,
    root: Node,
    as_json: bool,
    kinds: list[str] | None = None,
    dataset: str = "root",
) -> str:
    """The tree, one line a node (JSON with ``as_json``). Each array's line names its file
    as ``MNT/PATH``, MNT standing for the mountpoint, and its sidecars of ``kinds`` (those
    of ``-o sidecars``; every kind when none is asked for), or why it has none; ``dataset``
    names the root group's netCDF file."""
    nodes = []
    walked = walk(dialect, root)
    placed, pyramids, spaced = places(walked), _pyramids(walked), _spaces(walked)
    for node in walked:
        found = describe(node, kinds or list(SIDECAR_KINDS), dataset)
        if found["path"] in pyramids and found["type"] == "group":
            found["pyramid"] = pyramids[found["path"]]
        if found["type"] == "array" and found["shown"]:
            found["from"] = dialect.store.origins(node.data_prefix.rstrip("/"))
            if found["path"] in placed:
                found["place"] = placed[found["path"]]
            if found["path"] in spaced:
                found["space"] = spaced[found["path"]]
        nodes.append(found)
    if as_json:
        return json.dumps({"source": dialect.store.url, "nodes": nodes}, indent=2)
    return "\n".join(_line(d) for d in sorted(nodes, key=lambda d: d["path"]))
