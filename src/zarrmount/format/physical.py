"""Where an array's elements lie in physical space (microscopy, neuroimaging, electron
microscopy): for each axis its kind and unit, and the scale and translation that map an
index to a coordinate, ``index * scale + translation``, as OME-Zarr gives them."""

from __future__ import annotations

from dataclasses import dataclass

from zarrmount.format.multiscales import Axis, Vector


@dataclass(frozen=True)
class Space:
    axes: tuple[Axis, ...]  # one per dimension, in the array's (C) order
    scale: Vector
    translation: Vector
    convention: str  # "OME-Zarr 0.4", ...
    notes: tuple[str, ...] = ()  # what was passed over, and why


@dataclass(frozen=True)
class Unspaced:
    reason: str
