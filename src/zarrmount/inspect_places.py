"""``--inspect``'s account of where each array lies on a map (``format/georef.py``), from
the metadata alone: coordinate arrays' values are read only by a mount."""

from __future__ import annotations

from typing import Any

from zarrmount.format.georef import Group, Place, georeference, variable
from zarrmount.format.model import ArrayNode, GroupNode, Node
from zarrmount.headers.geotiff import geotiff_tags


def places(nodes: list[Node]) -> dict[str, dict[str, Any]]:
    """For each array of two or more dimensions, by path: its place or why it has none."""
    groups = {n.path: n.attributes for n in nodes if isinstance(n, GroupNode)}
    arrays: dict[str, dict[str, ArrayNode]] = {}
    for node in nodes:
        if isinstance(node, ArrayNode):
            parent, _, name = node.path.rpartition("/")
            arrays.setdefault(parent, {})[name] = node
    found = {}
    for parent, members in arrays.items():
        group = Group(
            groups.get(parent, {}), {k: variable(a.meta) for k, a in members.items()}, None
        )
        for name, node in members.items():
            if len(node.meta.shape) >= 2:
                place = georeference(node.path, group.arrays[name], group)
                found[node.path] = described(place)
    return found


def described(place: Place | Any) -> dict[str, Any]:
    if not isinstance(place, Place):
        return {"reason": place.reason}
    no_crs = geotiff_tags(place, None).no_crs
    tif = [f"the .tif view carries no CRS: {no_crs}"] if no_crs else []
    return {
        "crs": place.crs.label,
        "epsg": place.crs.epsg,
        "transform": list(place.transform),
        "convention": place.convention,
        "notes": [*place.notes, *tif],
    }


def line(place: dict[str, Any] | None) -> str:
    """The place's part of an array's line."""
    if place is None:
        return ""
    if "reason" in place:
        return f"  (not on a map: {place['reason']})"
    numbers = ", ".join(f"{v:.10g}" for v in place["transform"])
    notes = f"; {'; '.join(place['notes'])}" if place["notes"] else ""
    return f"  map: {place['crs']} by {place['convention']}, transform ({numbers}){notes}"
