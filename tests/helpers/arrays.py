"""Arrays written by zarr-python for the tests: the stores a mount serves, and the oracle
that reads them, both come from zarr-python, never from zarrmount."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import zarr


def write_array(
    parent: zarr.Group | str | os.PathLike,
    name: str,
    data: np.ndarray,
    *,
    region: Any = ...,
    **create,
) -> zarr.Array:
    """Array ``name`` of ``parent`` (a group, or the path of a store) shaped and typed like
    ``data``, with ``data[region]`` written: chunks outside ``region`` stay missing (fill
    value). ``create`` holds the other ``create_array`` keywords (chunks, codecs...).

    zarr-python's warnings are silenced: tests write formats and codecs outside the spec on
    purpose."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if isinstance(parent, zarr.Group):
            arr = parent.create_array(name, shape=data.shape, dtype=data.dtype, **create)
        else:
            arr = zarr.create_array(
                os.fspath(parent), name=name, shape=data.shape, dtype=data.dtype, **create
            )
        arr[region] = data[region]
    return arr


def values_of(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Values of every kind: random bits for numbers (NaNs included), random letters for
    byte strings, random truth values."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind == "S":
        return rng.integers(97, 123, (*shape, dt.itemsize), np.uint8).view(dt).reshape(shape)
    raw = rng.integers(0, 256, (*shape, dt.itemsize), dtype=np.uint8)
    return raw.view(dt).reshape(shape)
