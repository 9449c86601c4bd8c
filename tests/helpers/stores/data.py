"""Deterministic, varied test values: the same generator state gives the same bytes."""

from __future__ import annotations

import math

import numpy as np

_UNICODE_POOL = np.array(
    [ord(c) for c in "abcXYZ019 _-é漢字ßΩж"] + [0x1F600, 0x10348, 0xFFFD, 0x7F, 0x1],
    dtype=np.uint32,
)


def make_data(dtype: np.dtype, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Deterministic, varied values of ``dtype`` (with NaN/Inf/NaT sprinkled in)."""
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    if dtype.fields is not None:
        out = np.zeros(shape, dtype=dtype)
        for name in dtype.names:
            fdt = dtype.fields[name][0]
            sub = make_data(fdt.base, shape + fdt.shape, rng)
            out[name] = sub
        return out
    kind = dtype.kind
    if kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if kind in "iu":
        info = np.iinfo(dtype)
        vals = rng.integers(
            info.min, info.max, size=shape, endpoint=True, dtype=dtype.newbyteorder("=")
        )
        return vals.astype(dtype)
    if kind == "f":
        vals = (rng.standard_normal(shape) * 1000).astype(dtype)
        flat = vals.reshape(-1)
        specials = [np.nan, np.inf, -np.inf, -0.0]
        for i, s in enumerate(specials):
            if i * 7 + 3 < n:
                flat[i * 7 + 3] = s
        return vals
    if kind == "c":
        re = rng.standard_normal(shape) * 100
        im = rng.standard_normal(shape) * 100
        vals = (re + 1j * im).astype(dtype)
        if n > 5:
            vals.reshape(-1)[5] = complex(np.nan, np.inf)
        return vals
    if kind in "mM":
        ints = rng.integers(-(2**40), 2**40, size=shape, dtype=np.int64)
        if n > 4:
            ints.reshape(-1)[4] = np.iinfo(np.int64).min  # NaT
        return ints.view(dtype.newbyteorder("=")).astype(dtype)
    if kind == "S":
        raw = rng.integers(0, 256, size=(n, dtype.itemsize), dtype=np.uint8)
        # some shorter strings (trailing NULs) and one empty
        for i in range(0, n, 3):
            raw[i, rng.integers(0, dtype.itemsize + 1) :] = 0
        if n:
            raw[0, :] = 0
        return raw.view(dtype).reshape(shape)
    if kind == "U":
        width = dtype.itemsize // 4
        cps = rng.choice(_UNICODE_POOL, size=(n, width))
        for i in range(0, n, 4):
            cps[i, rng.integers(0, width + 1) :] = 0
        return cps.astype("<u4").view(f"<U{width}").astype(dtype).reshape(shape)
    if kind == "V":
        raw = rng.integers(0, 256, size=(n, dtype.itemsize), dtype=np.uint8)
        return raw.view(dtype).reshape(shape)
    raise ValueError(f"no data maker for {dtype}")


def smooth_data(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Compressible values (so codecs actually do something)."""
    idx = np.indices(shape).sum(axis=0) if shape else np.array(0)
    return (np.sin(idx / 7.0) * 1000 + idx).astype(dtype)
