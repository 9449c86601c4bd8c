"""ImageJ's calibration in the ``.tif`` views: the size of a pixel in XResolution and
YResolution (pixels per unit), and, for the strips view (the contiguous pages Fiji opens
itself), ImageJ's ImageDescription with the unit, the z spacing or frame interval and
the stack's kind, so Fiji shows a calibrated image. Pure: a shape and a physical space
(``format/physical.py``) in, TIFF tags out."""

from __future__ import annotations

from fractions import Fraction

from zarrmount.format.physical import Space, length_in, time_in
from zarrmount.headers.tifftags import IMAGE_DESCRIPTION, RATIONAL, Tag, ascii_tag

# ImageJ's names of OME-Zarr's length units (UDUNITS names)
_UNITS = {
    "angstrom": "angstrom",
    "nanometer": "nm",
    "micrometer": "micron",
    "millimeter": "mm",
    "centimeter": "cm",
    "meter": "m",
}
_STACKS = {"space": "slices", "time": "frames", "channel": "channels"}
_MAX = 2**32 - 1


def _rational(value: float) -> tuple[int, int] | None:
    """``value`` as a TIFF RATIONAL, None where it does not fit one."""
    if not 0 < value < _MAX:
        return None
    exact = Fraction(value).limit_denominator(_MAX // max(int(value), 1))
    return exact.numerator, exact.denominator


def _plane_unit(space: Space) -> str | None:
    """The length unit of the image's rows and columns, where both have the same one."""
    y, x = space.axes[-2:]
    units = {y.unit, x.unit}
    if len(units) != 1 or y.type not in ("space", None) or x.type not in ("space", None):
        return None
    unit = units.pop()
    return unit if unit in _UNITS else None


def resolution_tags(space: Space | None) -> tuple[Tag, ...]:
    """XResolution and YResolution: pixels per unit of the rows' and columns' length."""
    if space is None or len(space.axes) < 2 or _plane_unit(space) is None:
        return ()
    per_y, per_x = (_rational(1 / step) if step > 0 else None for step in space.scale[-2:])
    if per_x is None or per_y is None:
        return ()
    return Tag(282, RATIONAL, per_x), Tag(283, RATIONAL, per_y)


def _stack(space: Space, pages: int) -> list[str]:
    """The lines saying what the pages are: z slices (with their spacing, in the plane's
    unit), frames (with their interval, in seconds) or channels."""
    axis, step = space.axes[0], space.scale[0]
    kind = _STACKS.get(axis.type or "", "slices")
    lines = [f"{kind}={pages}", "hyperstack=true", "mode=grayscale"]
    unit = _plane_unit(space)
    if kind == "slices" and unit and (spacing := length_in(step, axis.unit, unit)):
        lines.append(f"spacing={spacing!r}")
    elif kind == "frames" and (interval := time_in(step, axis.unit, "second")):
        lines += [f"finterval={interval!r}", "loop=false"]
    return lines


def imagej_description(shape: tuple[int, ...], space: Space | None) -> tuple[Tag, ...]:
    """ImageJ's ImageDescription for a strips view of ``shape`` (2-D, or 3-D pages)."""
    if space is None or not 2 <= len(shape) <= 3 or len(space.axes) != len(shape):
        return ()
    pages = shape[0] if len(shape) == 3 else 1
    lines = ["ImageJ=1.11a", f"images={pages}"]
    if len(shape) == 3:
        lines += _stack(space, pages)
    if unit := _plane_unit(space):
        lines.append(f"unit={_UNITS[unit]}")
    return (ascii_tag(IMAGE_DESCRIPTION, "\n".join(lines) + "\n"),)
