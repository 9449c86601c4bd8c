"""Attribute values as HDF5 holds them, from the JSON values of Zarr attributes (or
NumPy values and :class:`Reference` given by the caller).

- text: a variable-length UTF-8 string (h5py reads ``str``), lists of text a 1-D array
  of them; the characters live in the global heap, so text of any length fits (text
  with NUL characters, where readers of C strings stop, as JSON text);
- numbers: int64 (uint64 past its range), float64 where any is a float; lists of them 1-D;
- booleans: the bool enum h5py reads as ``numpy.bool_``;
- NumPy scalars and arrays of numbers, bools or ``S`` bytes: their own type and shape;
- :class:`Reference`: an object reference (lists of them 1-D);
- the dimension scale API's values: :class:`FixedText` (a null-terminated ASCII string of
  a fixed size), :class:`DimensionList` (a sequence of object references a dimension, in
  the global heap), :class:`ReferenceList` (records of an object reference and a
  dimension index), never JSON text: left out where no message holds them;
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
from zarrmount.headers.hdf5.tree import DimensionList, FixedText, Reference, ReferenceList

_INT64 = np.dtype("<i8")
_UINT64 = np.dtype("<u8")
_FLOAT64 = np.dtype("<f8")
_BOOL = np.dtype("?")

# a global heap item: text's bytes, or a sequence of object references (their paths)
HeapItem = bytes | tuple[str, ...]
# the heap IDs (collection address, object index) of a value's heap items, in order
HeapIds = Sequence[tuple[int, int]]
AddressOf = Callable[[str], int]  # an object's path -> its object header's address


@dataclass(frozen=True)
class Value:
    """An attribute's datatype message, shape (None: scalar) and elements: fixed-size
    bytes; object references (paths), each followed by an equal share of ``raw`` (records
    of a reference and numbers); or items kept in the global heap (text, or sequences of
    references given by paths)."""

    datatype: bytes
    shape: tuple[int, ...] | None
    raw: bytes = b""
    references: tuple[str, ...] = ()
    heap: tuple[HeapItem, ...] = ()

    @property
    def data_size(self) -> int:
        if self.heap:
            return datatypes.VLEN_SIZE * len(self.heap)
        return datatypes.REFERENCE_SIZE * len(self.references) + len(self.raw)

    @property
    def referred(self) -> list[str]:
        """The paths of every object the value refers to."""
        listed = [path for item in self.heap if isinstance(item, tuple) for path in item]
        return [*self.references, *listed]

    def data(self, heap_ids: HeapIds, address_of: AddressOf) -> bytes:
        """The elements as stored in the message, given where the heap items and the
        referenced objects lie."""
        if self.heap:  # each item's length counts its elements: bytes, or references
            return b"".join(
                u32(len(item)) + u64(collection) + u32(index)
                for item, (collection, index) in zip(self.heap, heap_ids, strict=True)
            )
        if self.references:
            share = len(self.raw) // len(self.references)
            return b"".join(
                u64(address_of(path)) + self.raw[k * share : (k + 1) * share]
                for k, path in enumerate(self.references)
            )
        return self.raw


def heap_size(item: HeapItem) -> int:
    """The bytes a heap item's object holds."""
    return len(item) if isinstance(item, bytes) else datatypes.REFERENCE_SIZE * len(item)


def heap_bytes(item: HeapItem, address_of: AddressOf) -> bytes:
    """A heap item's object: text's bytes, or the addresses of the objects it names."""
    return item if isinstance(item, bytes) else b"".join(u64(address_of(p)) for p in item)


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


def _fixed_text(value: FixedText) -> Value:
    raw = value.text.encode("ascii")
    size = len(raw) + 1 if value.size is None else value.size
    if not raw or size < len(raw):
        raise NotApplicable(f"{size} bytes do not hold {value.text!r}")
    return Value(datatypes.fixed_string(size, terminated=True), None, raw.ljust(size, b"\0"))


def _reference_list(value: ReferenceList) -> Value:
    reference, index = datatypes.object_reference(), datatypes.fixed_point(4, False, False)
    record = datatypes.compound(16, [("dataset", 0, reference), ("dimension", 8, index)])
    paths = tuple(path for path, _ in value.users)
    raw = b"".join(u32(axis) + bytes(4) for _, axis in value.users)
    return Value(record, (len(paths),), raw, references=paths)


def _scales(value: FixedText | DimensionList | ReferenceList) -> Value:
    """A value of the dimension scale API; NotApplicable where it cannot be one (never
    JSON text, which its readers would take for the value)."""
    try:
        if isinstance(value, FixedText):
            return _fixed_text(value)
    except UnicodeEncodeError as e:
        raise NotApplicable("its text is not ASCII") from e
    items = value.scales if isinstance(value, DimensionList) else value.users
    if not items:
        raise NotApplicable("it names no objects")
    if isinstance(value, ReferenceList):
        return _reference_list(value)
    sequence = datatypes.vlen_sequence(datatypes.object_reference())
    return Value(sequence, (len(items),), heap=value.scales)


def attribute(name: bytes, value: Any) -> Value:
    """``value`` as the attribute ``name`` holds it (see the module's description);
    NotApplicable when no message holds it (text UTF-8 cannot carry, a name too long)."""
    if isinstance(value, FixedText | DimensionList | ReferenceList):
        typed = _scales(value)
        if message_size(name, typed) > MAX_MESSAGE:
            raise NotApplicable("it is more than one attribute message holds")
        return typed
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
