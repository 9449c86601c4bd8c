"""What each object of the file holds: which members and attributes HDF5 can hold (and
why the others are left out), and a dataset's own messages.

Every object header is one block of at most 65,535 messages (the count is 16 bits) and
4 GiB: attributes past either bound are left out, and named with the others left out
in the object's ``zarrmount_omitted`` attribute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from zarrmount.headers.base import NotApplicable
from zarrmount.headers.hdf5 import attributes, datatypes, messages
from zarrmount.headers.hdf5.attributes import Value
from zarrmount.headers.hdf5.names import attribute_problem
from zarrmount.headers.hdf5.tree import Array

OMITTED = "zarrmount_omitted"  # the attribute naming what an object leaves out, and why
MAX_RANK = 32  # the library's most dimensions
_ROOM = 1 << 10  # kept in a header for the zarrmount_omitted attribute

Named = list[tuple[bytes, Value]]  # attributes: (name, value)


def array_problem(array: Array) -> str | None:
    """Why ``array`` is no dataset of the file, or None."""
    if len(array.shape) > MAX_RANK:
        return f"HDF5 holds at most {MAX_RANK} dimensions"
    try:
        datatypes.of_dtype(array.dtype)
    except NotApplicable as e:
        return str(e)
    return None


def dataset_messages(array: Array, address: int | None) -> list[messages.Message]:
    """A dataset's dataspace, datatype, fill value and contiguous layout (data at
    ``address``, None when it has none)."""
    return [
        (messages.DATASPACE, messages.dataspace(array.shape)),
        (messages.DATATYPE, datatypes.of_dtype(array.dtype)),
        (messages.FILL_VALUE, messages.fill_value(_fill(array))),
        (messages.LAYOUT, messages.contiguous(address, array.nbytes)),
    ]


def _fill(array: Array) -> bytes | None:
    """The fill value's bytes; none (zeros) for fixed-length strings and float16, which
    netCDF-C (4.10) takes for variable-length strings: it frees their fill value as a
    pointer, and crashes closing the file (h5py's files of them too)."""
    if array.fill is None or array.dtype.kind == "S" or array.dtype.str[1:] == "f2":
        return None
    try:
        return np.asarray(array.fill, dtype=array.dtype).tobytes()
    except (TypeError, ValueError, OverflowError):
        return None  # not a value of its type: the library's default (zeros)


def named_attributes(
    given: Mapping[str, Any],
    left_out: Sequence[tuple[str, str]],
    known: Callable[[str], bool],
    fixed: Sequence[int],
) -> tuple[Named, list[tuple[str, str]]]:
    """The attributes an object holds besides its ``fixed`` messages (of these data
    sizes), then which of ``given`` are left out, and why; ``left_out`` (its members left
    out) and those are named in its ``zarrmount_omitted`` attribute, after the text a
    given one holds (what the caller left out). ``known``: whether
    a path names an object of the file (what references may refer to)."""
    held: Named = []
    omitted: list[tuple[str, str]] = []
    room = messages.MAX_HEADER - messages.header_size(fixed) - _ROOM
    count = messages.MAX_MESSAGES - len(fixed) - 1
    for name, value in given.items():
        why, typed = _attribute(name, value, known)
        size = 0 if typed is None else messages.placed(attributes.message_size(*typed))
        if typed is not None and (len(held) == count or size > room):
            why, typed = "more attributes than an object header holds", None
        if typed is None:
            omitted.append((name, why))
            continue
        held.append(typed)
        room -= size
    notes = [(repr(n), why) for n, why in left_out]
    notes += [(f"attribute {n!r}", why) for n, why in omitted]
    if notes:
        text = "; ".join(f"{name}: {why}" for name, why in notes)
        if isinstance(given.get(OMITTED), str):
            text = f"{given[OMITTED]}; {text}"
        note = OMITTED.encode()
        held = [(n, v) for n, v in held if n != note] + [(note, attributes.attribute(note, text))]
    return held, omitted


def _attribute(
    name: str, value: Any, known: Callable[[str], bool]
) -> tuple[str, tuple[bytes, Value] | None]:
    """The attribute ``name`` as held, or why it is not."""
    problem = attribute_problem(name)
    if problem:
        return problem, None
    raw = name.encode("utf-8")
    try:
        typed = attributes.attribute(raw, value)
    except NotApplicable as e:
        return str(e), None
    if not all(known(path) for path in typed.referred):
        return "it refers to an object the file does not hold", None
    return "", (raw, typed)
