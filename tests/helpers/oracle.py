"""Comparisons of what the mount shows with what zarr-python / NumPy say it must show."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from helpers.zarrdata import ArrayCase, dtype_from_json, normalize_codec

REQUIRED_ARRAY_XATTRS = {
    "user.zarr.dtype",
    "user.zarr.shape",
    "user.zarr.chunks",
    "user.zarr.fill_value",
    "user.zarr.codecs",
    "user.zarr.format",
    "user.zarr.attributes",
}


# What ``json_xattr`` returns for an xattr it cannot give (JSON ``null`` is a value: None).
MISSING = object()


def json_xattr(get: Callable[[str], str | None], name: str, errors: list[str]) -> Any:
    """The value of xattr ``name`` (read with ``get``) parsed as JSON, or ``MISSING`` when it
    is absent or not JSON (recorded in ``errors``), so that the caller compares only a value
    that is there."""
    text = get(name)
    if text is None:
        return MISSING
    try:
        return json.loads(text)
    except ValueError as e:
        errors.append(f"{name} {text!r}: not JSON ({e})")
        return MISSING


def read_file(path: str | os.PathLike) -> bytes:
    """The whole file with plain ``open``/``read`` (through the kernel page cache)."""
    with open(path, "rb") as f:
        return f.read()


def getxattr_text(path: str | os.PathLike, name: str) -> str:
    return os.getxattr(path, name).decode("utf-8")


def describe_mismatch(got: bytes, expected: bytes, dtype: np.dtype | None = None) -> str:
    if len(got) != len(expected):
        head = f"length {len(got)} != expected {len(expected)}"
    else:
        head = f"length {len(got)} ok"
    n = min(len(got), len(expected))
    first = next((i for i in range(n) if got[i] != expected[i]), None)
    if first is None:
        return head
    diff = np.flatnonzero(np.frombuffer(got[:n], np.uint8) != np.frombuffer(expected[:n], np.uint8))
    msg = f"{head}; {diff.size} bytes differ, first at offset {first}"
    if dtype is not None and dtype.itemsize:
        el = first // dtype.itemsize
        msg += f" (element {el} of dtype {dtype})"
        lo = el * dtype.itemsize
        hi = lo + dtype.itemsize
        if hi <= n:
            msg += f": got {got[lo:hi]!r} expected {expected[lo:hi]!r}"
            try:
                g = np.frombuffer(got[lo:hi], dtype)[0]
                e = np.frombuffer(expected[lo:hi], dtype)[0]
                msg += f" = {g!r} vs {e!r}"
            except Exception:  # noqa: BLE001 - best effort detail only
                pass
    return msg


def assert_bytes_equal(got: bytes, expected: bytes, dtype: np.dtype | None = None) -> None:
    if got != expected:
        raise AssertionError(describe_mismatch(got, expected, dtype))


def assert_array_xattrs(path: str | os.PathLike, case: ArrayCase) -> None:
    """Every documented ``user.zarr.*`` attribute against the .zarray/.zattrs zarr wrote."""
    z = case.zarray
    errors = []

    def get(name):
        try:
            return getxattr_text(path, name)
        except OSError as e:
            errors.append(f"{name}: {e}")
            return None

    dt = get("user.zarr.dtype")
    if dt is not None:
        if case.dtype.fields is None:
            if dt != case.dtype.str:
                errors.append(f"user.zarr.dtype {dt!r} != {case.dtype.str!r}")
        else:
            try:
                parsed = dtype_from_json(json.loads(dt))
            except Exception as e:  # noqa: BLE001
                errors.append(f"user.zarr.dtype {dt!r} is not a JSON descr list: {e}")
            else:
                if parsed != case.dtype:
                    errors.append(f"user.zarr.dtype {dt!r} -> {parsed} != {case.dtype}")
    for name, want in (
        ("user.zarr.shape", list(z["shape"])),
        ("user.zarr.chunks", list(z["chunks"])),
        ("user.zarr.attributes", case.zattrs),
    ):
        value = json_xattr(get, name, errors)
        if value is not MISSING and value != want:
            errors.append(f"{name} {value!r} != {want!r}")
    value = json_xattr(get, "user.zarr.fill_value", errors)
    if value is not MISSING:
        want = z["fill_value"]
        same = value == want and type(value) is type(want)
        if not same and isinstance(want, float) and isinstance(value, int | float):
            same = float(value) == want  # 1.0 vs 1 is the same JSON number
        if not same:
            errors.append(f"user.zarr.fill_value {value!r} != .zarray {want!r}")
    value = json_xattr(get, "user.zarr.codecs", errors)
    if value is not MISSING:
        errors += compare_codecs(value, z, "user.zarr.codecs")
    fmt = get("user.zarr.format")
    if fmt is not None and fmt.strip() != "2":
        errors.append(f"user.zarr.format {fmt!r} != '2'")
    assert not errors, f"{case.id}: " + "; ".join(errors)


def compare_codecs(value, zarray: dict, label: str) -> list[str]:
    """``{"filters": [...] | null, "compressor": {...} | null}`` equal (as numcodecs configs)
    to the .zarray's."""
    if not isinstance(value, dict) or not {"filters", "compressor"} <= set(value):
        return [f"{label} {value!r} lacks filters/compressor"]
    errors = []
    # an empty filter list means the same as null
    want_f = zarray.get("filters") or None
    got_f = value["filters"] or None
    if want_f is None:
        if got_f is not None:
            errors.append(f"{label} filters {got_f!r} != null")
    elif got_f is None or [normalize_codec(f) for f in got_f] != [
        normalize_codec(f) for f in want_f
    ]:
        errors.append(f"{label} filters {got_f!r} != {want_f!r}")
    want_c = zarray.get("compressor")
    got_c = value["compressor"]
    if want_c is None:
        if got_c is not None:
            errors.append(f"{label} compressor {got_c!r} != null")
    else:
        try:
            same = got_c is not None and normalize_codec(got_c) == normalize_codec(want_c)
        except Exception:  # noqa: BLE001 - an unparsable config is simply different
            same = False
        if not same:
            errors.append(f"{label} compressor {got_c!r} != {want_c!r}")
    return errors
