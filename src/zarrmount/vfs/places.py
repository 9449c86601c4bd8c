"""Where the arrays of a listed group lie on a map (``format/georef.py``), for the
headers that say so: the values of their 1-D coordinate arrays read through those
arrays' files, each at most ``MAX_COORDINATE`` values, once per listing."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from zarrmount.errors import FsError
from zarrmount.format.georef import Found, Group, coordinates_wanted, georeference, variable
from zarrmount.vfs.arrayfile import ArrayFile

log = logging.getLogger(__name__)


async def _values(name: str, file: ArrayFile) -> np.ndarray | None:
    try:
        data = await file.contents(0, file.size())
    except FsError as e:
        log.warning("%s: not read as a coordinate: %s", name, e)
        return None
    return np.frombuffer(data, file.dtype())


async def places(attributes: Mapping[str, Any], files: Mapping[str, ArrayFile]) -> dict[str, Found]:
    """Each 2-D or more array's place among ``files`` (a group's, by name), or why none."""
    arrays = {name: variable(file.array.meta) for name, file in files.items()}
    wanted = {c for a in arrays.values() for c in coordinates_wanted(a, arrays)}
    values = {}
    for name in sorted(wanted):
        if (got := await _values(name, files[name])) is not None:
            values[name] = got
    group = Group(attributes, arrays, values)
    return {
        name: georeference(files[name].array.path or name, array, group)
        for name, array in arrays.items()
        if len(array.shape) >= 2
    }
