"""Affine geotransforms in GDAL's order ``(x0, dx, rx, y0, ry, dy)``, pixel-is-area: made
from an affine ``a, b, c, d, e, f``, a bounding box, or the cell centres of regularly
spaced 1-D coordinates, and checked before a header places an image by them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

Transform = tuple[float, float, float, float, float, float]

# Coordinates are regular when every step is within this of the mean step (relative).
REGULAR = 1e-6


class BadGrid(ValueError):
    """No transform places the image; the message says why."""


def checked(transform: Sequence[Any]) -> Transform:
    """``transform`` (GDAL's order) if it places the image: six finite numbers, non-zero
    scales, no rotation (the headers written do not rotate)."""
    if len(transform) != 6 or not all(isinstance(v, (int, float)) for v in transform):
        raise BadGrid(f"a transform is six numbers, not {list(transform)!r:.80}")
    values = tuple(float(v) for v in transform)
    if not all(math.isfinite(v) for v in values):
        raise BadGrid(f"the transform {values} is not finite")
    x0, dx, rx, y0, ry, dy = values
    if rx or ry:
        raise BadGrid(f"the grid is rotated (transform {values})")
    if not dx or not dy:
        raise BadGrid(f"the transform {values} has a zero scale")
    return x0, dx, rx, y0, ry, dy


def from_affine(affine: Sequence[Any], centre: bool = False) -> Transform:
    """GDAL's order from an affine ``a, b, c, d, e, f`` (x = a col + b row + c); with
    ``centre``, the affine maps an index to its cell's centre (pixel-is-point)."""
    if len(affine) != 6:
        raise BadGrid(f"an affine transform is six numbers, not {list(affine)!r:.80}")
    a, b, c, d, e, f = affine
    transform = checked((c, a, b, f, d, e))
    if centre:
        x0, dx, _, y0, _, dy = transform
        return x0 - dx / 2, dx, 0.0, y0 - dy / 2, 0.0, dy
    return transform


def from_bbox(bbox: Sequence[Any], shape: tuple[int, int]) -> Transform:
    """North up from ``[xmin, ymin, xmax, ymax]`` over an image of ``(rows, cols)``."""
    if len(bbox) != 4:
        raise BadGrid(f"a bounding box is four numbers, not {list(bbox)!r:.80}")
    xmin, ymin, xmax, ymax = bbox
    rows, cols = shape
    return checked((xmin, (xmax - xmin) / cols, 0, ymax, 0, -(ymax - ymin) / rows))


def from_gdal_text(text: Any) -> Transform:
    """rioxarray's and GDAL's netCDF ``GeoTransform``: six numbers in GDAL's order."""
    try:
        values = [float(v) for v in str(text).split()]
    except ValueError as e:
        raise BadGrid(f"GeoTransform {text!r:.80} is not six numbers") from e
    return checked(values)


def step(name: str, values: np.ndarray) -> tuple[float, float]:
    """The first cell's edge and the step of regularly spaced cell centres ``values``."""
    if values.ndim != 1 or values.size < 2:
        raise BadGrid(f"coordinate {name} has fewer than two values")
    values = values.astype(np.float64)
    if not np.isfinite(values).all():
        raise BadGrid(f"coordinate {name} has values that are not finite")
    mean = (values[-1] - values[0]) / (values.size - 1)
    if not mean:
        raise BadGrid(f"coordinate {name} does not change")
    worst = float(np.max(np.abs(np.diff(values) - mean)))
    if worst > REGULAR * abs(mean):
        raise BadGrid(f"coordinate {name} is not regular (a step is off by {worst:.3g})")
    return float(values[0]) - mean / 2, float(mean)


def from_centres(y: tuple[str, np.ndarray], x: tuple[str, np.ndarray]) -> Transform:
    """The transform of cell centres given by 1-D coordinates (CF's pixel-is-area)."""
    x0, dx = step(*x)
    y0, dy = step(*y)
    return checked((x0, dx, 0.0, y0, 0.0, dy))


def close(a: Transform, b: Transform) -> bool:
    """Whether two transforms place the image alike (within a thousandth of a cell)."""
    scale = min(abs(a[1]), abs(a[5]))
    return all(abs(p - q) <= 1e-3 * scale for p, q in zip(a, b, strict=True))
