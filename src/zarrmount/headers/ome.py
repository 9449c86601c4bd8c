"""The OME-XML of a pyramidal OME-TIFF made from an OME-Zarr image: what QuPath,
Bio-Formats (Fiji, OMERO) and tifffile read for the dimension order, the physical size of
a pixel and the channel names.

Pure: the image's full-resolution shape and dtype, its axes (``format/multiscales.py``),
the full resolution's scale and the channel names in; the XML text out. The TIFF holds
each 2-D plane as a page in C order of the leading axes, which OME-Zarr orders time,
channel, space: Z varies fastest, then C, then T, which OME calls ``XYZCT``.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import quoteattr

import numpy as np

from zarrmount.format.multiscales import Axis, Vector
from zarrmount.format.physical import unit_name
from zarrmount.headers.base import NotApplicable

NAMESPACE = "http://www.openmicroscopy.org/Schemas/OME/2016-06"

_TYPES = {
    "b1": "uint8",
    "u1": "uint8",
    "i1": "int8",
    "u2": "uint16",
    "i2": "int16",
    "u4": "uint32",
    "i4": "int32",
    "f4": "float",
    "f8": "double",
    "c8": "complex",
    "c16": "double-complex",
}
# OME-Zarr's units (UDUNITS names) as OME's UnitsLength / UnitsTime symbols
_LENGTHS = {
    "angstrom": "Å",
    "nanometer": "nm",
    "micrometer": "µm",
    "millimeter": "mm",
    "centimeter": "cm",
    "meter": "m",
    "picometer": "pm",
    "kilometer": "km",
    "inch": "in",
    "foot": "ft",
}
_TIMES = {
    "second": "s",
    "millisecond": "ms",
    "microsecond": "µs",
    "nanosecond": "ns",
    "minute": "min",
    "hour": "h",
}


def _dimensions(axes: Sequence[Axis], shape: tuple[int, ...]) -> dict[str, int]:
    """OME's size of X, Y, Z, C and T from OME-Zarr's axes (time, channel, space order;
    the last two are Y and X): where the axes do not fit, NotApplicable."""
    letters = []
    for axis in axes[:-2]:
        letter = {"time": "T", "channel": "C", "space": "Z"}.get(axis.type or "")
        if letter is None:
            raise NotApplicable(f"OME-TIFF has no dimension for the axis {axis.name!r}")
        letters.append(letter)
    if letters != sorted(letters, key="TCZ".index) or len(set(letters)) != len(letters):
        raise NotApplicable(f"axes {[a.name for a in axes]} are not OME's time, channel, z")
    sizes = dict(zip(letters, shape[:-2], strict=True))
    return {"X": shape[-1], "Y": shape[-2], **{d: sizes.get(d, 1) for d in "ZCT"}}


def _physical(axes: Sequence[Axis], scale: Vector | None) -> str:
    """Attributes of Pixels giving the size of a pixel, where the axes give a unit (as
    written: "µm" and "micron" are OME's µm too)."""
    if scale is None:
        return ""
    found = []
    for letter, axis, step in zip(_letters(axes), axes, scale, strict=True):
        if letter in "XYZ" and (symbol := _LENGTHS.get(unit_name(axis.unit) or "")):
            found.append(f" PhysicalSize{letter}={quoteattr(repr(step))}")
            found.append(f" PhysicalSize{letter}Unit={quoteattr(symbol)}")
        elif letter == "T" and (symbol := _TIMES.get(unit_name(axis.unit) or "")):
            found.append(f" TimeIncrement={quoteattr(repr(step))}")
            found.append(f" TimeIncrementUnit={quoteattr(symbol)}")
    return "".join(found)


def _letters(axes: Sequence[Axis]) -> list[str]:
    lead = [{"time": "T", "channel": "C"}.get(a.type or "", "Z") for a in axes[:-2]]
    return [*lead, "Y", "X"]


def channel_names(attributes: dict) -> list[str]:
    """The channel labels of OME-Zarr's ``omero`` block (0.4, or under ``ome`` in 0.5)."""
    block = attributes.get("omero") or (attributes.get("ome") or {}).get("omero")
    channels = block.get("channels") if isinstance(block, dict) else None
    if not isinstance(channels, list):
        return []
    labels = [c.get("label") if isinstance(c, dict) else None for c in channels]
    return [str(label) for label in labels] if all(labels) else []


def ome_xml(
    name: str,
    shape: tuple[int, ...],
    dtype: np.dtype,
    axes: Sequence[Axis] | None,
    scale: Vector | None = None,
    channels: Sequence[str] = (),
) -> str:
    """The OME-XML of one image, its planes in the TIFF's pages from IFD 0."""
    dtype = np.dtype(dtype)
    kind = _TYPES.get(f"{dtype.kind}{dtype.itemsize}")
    if kind is None:
        raise NotApplicable(f"OME has no pixel type for {dtype}")
    if axes is None or len(axes) != len(shape) or not 2 <= len(shape) <= 5:
        raise NotApplicable("an OME-TIFF needs the image's axes, 2 to 5 of them")
    size = _dimensions(axes, shape)
    names = list(channels) if len(channels) == size["C"] else []
    channel = "".join(
        f'<Channel ID="Channel:0:{c}" SamplesPerPixel="1"'
        + (f" Name={quoteattr(names[c])}" if names else "")
        + "/>"
        for c in range(size["C"])
    )
    planes = size["Z"] * size["C"] * size["T"]
    sizes = " ".join(f'Size{d}="{size[d]}"' for d in "XYZCT")
    big = "true" if dtype.byteorder == ">" else "false"
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><OME xmlns="{NAMESPACE}">'
        f'<Image ID="Image:0" Name={quoteattr(name)}><Pixels ID="Pixels:0" '
        f'DimensionOrder="XYZCT" Type="{kind}" BigEndian="{big}" {sizes}'
        f"{_physical(axes, scale)}>{channel}"
        f'<TiffData IFD="0" PlaneCount="{planes}"/></Pixels></Image></OME>'
    )
