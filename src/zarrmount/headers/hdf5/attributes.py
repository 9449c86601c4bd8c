"""Attribute values as HDF5 holds them, from the JSON values of Zarr attributes (or
NumPy values and :class:`Reference` given by the caller).

- text: a variable-length UTF-8 string (h5py reads ``str``), lists of text a 1-D array
  of them; the characters live in the global heap, so text of any length fits (text
  with NUL characters, where readers of C strings stop, as JSON text);
- numbers: int64 (uint64 past its range), float64 where any is a float; lists of them 1-D;
- booleans: the bool enum h5py reads as ``numpy.bool_``;
- NumPy scalars and arrays of numbers, bools or ``S`` bytes: their own type and shape;
- :class:`Reference`: an object reference (lists of them 1-D);
- anything else (null, objects, nested or mixed or empty lists, integers past 64 bits,
  NumPy types HDF5 has not), and any value whose message would pass the 64 KiB a version
  1 message holds: its JSON text (one string in the heap: any length fits).

An attribute message (version 1) is its name, datatype and dataspace, each padded to 8
bytes, then the elements; text and references are resolved only when it is made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zarrmount.headers.base import NotApplicable
from zarrmount.headers.hdf5 import datatypes
from zarrmount.headers.hdf5.binary import align8, name_bytes, pad8, u16, u32, u64
from zarrmount.headers.hdf5.messages import MAX_MESSAGE, dataspace
from zarrmount.headers.hdf5.tree import Reference

_INT64 = np.dtype("<i8")
_UINT64 = np.dtype("<u8")
_FLOAT64 = np.dtype("<f8")
_BOOL = np.dtype("?")

# the heap IDs (collection address, object index) of a value's heap items, in order
HeapIds = Sequence[tuple[int, int]]
AddressOf = Callable[[str], int]  # an object's path -> its object header's address


@dataclass(frozen=True)
class Value:
    """An attribute's datatype message, shape (None: scalar) and elements: fixed-size
    bytes, object references (paths), or items kept in the global heap (text)."""

    datatype: bytes
    shape: tuple[int, ...] | None
    raw: bytes = b""
    references: tuple[str, ...] = ()
    heap: tuple[bytes, ...] = ()

    @property
    def data_size(self) -> int:
        if self.heap:
            return datatypes.VLEN_SIZE * len(self.heap)
        if self.references:
            return datatypes.REFERENCE_SIZE * len(self.references)
        return len(self.raw)

    def data(self, heap_ids: HeapIds, address_of: AddressOf) -> bytes:
        """The elements as stored in the message, given where the heap items and the
        referenced objects lie."""
        if self.heap:
            return b"".join(
                u32(len(item)) + u64(collection) + u32(index)
                for item, (collection, index) in zip(self.heap, heap_ids, strict=True)
            )
        if self.references:
            return b"".join(u64(address_of(path)) for path in self.references)
        return self.raw


def _text(items: list[str], shape: tuple[int, ...] | None) -> Value:
    heap = tuple(item.encode("utf-8") for item in items)
    return Value(datatypes.vlen_string(), shape, heap=heap)


def _array(values: np.ndarray, scalar: bool) -> Value:
    """NumPy values of a type HDF5 holds (NotApplicable for others)."""
    return Value(
        datatypes.of_dtype(values.dtype),
        None if scalar else values.shape,
        raw=np.ascontiguousarray(values).tobytes(),
    )


def _numbers(items: list[Any]) -> np.ndarray | None:
    """The least of int64, uint64, float64 holding every one of ``items`` exactly."""
    if all(isinstance(v, bool) for v in items):
        return np.array(items, _BOOL)
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in items):
        return None
    if all(isinstance(v, int) for v in items):
        low, high = min(items), max(items)
        if low >= -(1 << 63) and high < 1 << 63:
            return np.array(items, _INT64)
        return np.array(items, _UINT64) if low >= 0 and high < 1 << 64 else None
    if all(isinstance(v, float) or float(v) == v for v in items):
        return np.array(items, _FLOAT64)
    return None


def _typed(value: Any) -> Value | None:
    """``value`` in its own HDF5 type, or None where only JSON text holds it."""
    if isinstance(value, Reference):
        return Value(datatypes.object_reference(), None, references=(value.path,))
    if isinstance(value, str):
        return None if "\0" in value else _text([value], None)
    if isinstance(value, (np.ndarray, np.generic)):
        try:
            return _array(np.asarray(value), np.ndim(value) == 0)
        except NotApplicable:
            return None
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    if all(isinstance(v, Reference) for v in items):
        paths = tuple(v.path for v in items)
        return Value(datatypes.object_reference(), (len(items),), references=paths)
    if all(isinstance(v, str) and "\0" not in v for v in items):
        return _text(items, (len(items),))
    try:
        numbers = _numbers(items)
    except OverflowError:  # an integer past a float64's range among floats
        return None
    if numbers is None:
        return None
    return _array(numbers, not isinstance(value, list))


def attribute(name: bytes, value: Any) -> Value:
    """``value`` as the attribute ``name`` holds it (see the module's description);
    NotApplicable when no message holds it (text UTF-8 cannot carry, a name too long)."""
    try:
        typed = _typed(value)
        if typed is not None and message_size(name, typed) <= MAX_MESSAGE:
            return typed
        plain = value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value
        text = _text([json.dumps(plain, ensure_ascii=False, default=str)], None)
    except UnicodeEncodeError as e:
        raise NotApplicable("its text is not Unicode UTF-8 can carry") from e
    except ValueError as e:  # a circular structure
        raise NotApplicable(f"it has no JSON text: {e}") from e
    if message_size(name, text) > MAX_MESSAGE:
        raise NotApplicable("its name is longer than an attribute message holds")
    return text


def message_size(name: bytes, value: Value) -> int:
    """The size of the attribute message of ``value`` named ``name``."""
    space = 8 + 8 * len(value.shape or ())
    return 8 + align8(len(name) + 1) + align8(len(value.datatype)) + space + value.data_size


def message(name: bytes, value: Value, heap_ids: HeapIds, address_of: AddressOf) -> bytes:
    """The attribute message (version 1) of ``value`` named ``name``."""
    space = dataspace(value.shape)
    sizes = u16(len(name) + 1) + u16(len(value.datatype)) + u16(len(space))
    return b"".join(
        (
            bytes([1, 0]),
            sizes,
            name_bytes(name),
            pad8(value.datatype),
            space,
            value.data(heap_ids, address_of),
        )
    )
