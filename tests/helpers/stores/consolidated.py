"""A v3 hierarchy of many arrays described only by the root's consolidated metadata.

zarr-python takes minutes to write 100,000 arrays, so it writes a few (one per data type,
with their chunks) and consolidates them; its documents are then the templates of the
many more described in the root's consolidated metadata here, each with a shape of its
own, and zarr-python writes the root's ``zarr.json`` from its own model of them, as its
consolidation writes it (indented by its ``json_indent``, 2 by default). Only the arrays
zarr-python wrote have chunks and documents of their own: the others read as their fill
value, and a mount lists them from the consolidated metadata alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.group import ConsolidatedMetadata, GroupMetadata

from helpers.stores.core import quiet
from helpers.stores.data import make_data
from helpers.stores.v3 import read_doc, zarr_v3_array

# v3 data type names, which NumPy reads as the same types
DATA_TYPES = (
    "bool",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "int64",
    "float32",
    "float64",
    "complex64",
)
WRITTEN = "written"  # the group of the arrays zarr-python wrote


@dataclass(frozen=True)
class Wide:
    """What was written: each array's shape and data type, the groups' paths."""

    arrays: dict[str, tuple[tuple[int, ...], str]]
    groups: list[str]


def _written(root: Path, rng: np.random.Generator) -> None:
    for data_type in DATA_TYPES:
        data = make_data(np.dtype(data_type), (5, 7), rng)
        zarr_v3_array(root, f"{WRITTEN}/{data_type}", data, chunks=(2, 3))
    with quiet():
        zarr.consolidate_metadata(str(root))


def _array_doc(template: dict, shape: tuple[int, ...], index: int) -> dict:
    chunks = [8] * len(shape)  # chunked alike, as most arrays of large hierarchies are
    doc = {
        **template,
        "shape": list(shape),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
    }
    if index % 10 == 0:
        doc["attributes"] = {"long_name": f"array number {index}", "units": "m"}
    return doc


def build_wide(root: Path, groups: int, subgroups: int, per_group: int) -> Wide:
    """``groups`` groups of ``subgroups`` groups of ``per_group`` arrays each, of varied
    shapes (1 to 3 dimensions, lengths 0 to 40) and data types, beside the written ones;
    the root's ``zarr.json`` written by zarr-python."""
    rng = np.random.default_rng(32)
    _written(root, rng)
    top = read_doc(root, "")
    metadata = top["consolidated_metadata"]["metadata"]
    templates = {t: metadata[f"{WRITTEN}/{t}"] for t in DATA_TYPES}
    group_doc = metadata[WRITTEN]
    arrays = {f"{WRITTEN}/{t}": ((5, 7), t) for t in DATA_TYPES}
    names = [WRITTEN]
    lengths = rng.integers(0, 41, size=(groups * subgroups * per_group, 3))
    index = 0
    for g in range(groups):
        for group in [f"g{g:02d}", *(f"g{g:02d}/s{s:02d}" for s in range(subgroups))]:
            metadata[group] = group_doc
            names.append(group)
        for group in names[-subgroups:]:
            for a in range(per_group):
                data_type = DATA_TYPES[(index // 7) % len(DATA_TYPES)]
                shape = tuple(int(n) for n in lengths[index, : 1 + index % 3])
                path = f"{group}/a{a:04d}"
                metadata[path] = _array_doc(templates[data_type], shape, index)
                arrays[path] = (shape, data_type)
                index += 1
    _zarr_python_writes(root, top)
    return Wide(arrays, names)


def _zarr_python_writes(root: Path, top: dict) -> None:
    """The root's ``zarr.json`` as zarr-python's consolidation writes it: its group's
    metadata, holding every document as zarr-python reads it, serialized by zarr-python."""
    metadata = ConsolidatedMetadata.from_dict(top["consolidated_metadata"])
    group = GroupMetadata(attributes=top["attributes"], consolidated_metadata=metadata)
    written = group.to_buffer_dict(default_buffer_prototype())["zarr.json"]
    (root / "zarr.json").write_bytes(written.to_bytes())
