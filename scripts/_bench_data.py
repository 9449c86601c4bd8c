"""Datasets for scripts/bench, written by zarr-python (an independent implementation).

Four 1 GiB float32 arrays (16384 x 16384 by default) in 4 MiB chunks (1024 x 1024) holding
the same smooth, bit-rounded field: Zarr v2 uncompressed, blosc-lz4 and zstd-3, and a
Zarr v3 array of 64 MiB shards (one row of chunks) with blosc-lz4 inner chunks. Each is kept
in ``.bench/`` with a marker of its spec and reused while valid.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numcodecs
import numpy as np
import zarr
from _bench_sys import log
from zarr.codecs import BloscCodec

NCOLS = 16384
CHUNKS = (1024, 1024)
DTYPE = np.dtype("<f4")
DATA_VERSION = 2  # bump when the generated content changes


@dataclass(frozen=True)
class Dataset:
    """One benchmark array: how it is stored, and where it lives."""

    name: str
    label: str
    zarr_format: int
    compressor: dict | None  # numcodecs config of the chunks (the inner chunks if sharded)
    sharded: bool = False

    def path(self, work: Path, rows: int) -> Path:
        return work / f"{self.name}_{rows}x{NCOLS}_v{DATA_VERSION}.zarr"

    def array_path(self, work: Path, rows: int) -> Path:
        """The array inside the store (v2 stores hold a group with one array)."""
        p = self.path(work, rows)
        return p / "field" if self.zarr_format == 2 else p

    def mounted_file(self, mnt: Path) -> Path:
        return mnt / "field" if self.zarr_format == 2 else mnt / "array"

    def codec(self) -> numcodecs.abc.Codec | None:
        return numcodecs.get_codec(self.compressor) if self.compressor else None


LZ4 = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
DATASETS = [
    Dataset("raw", "uncompressed", 2, None),
    Dataset("lz4", "blosc-lz4", 2, LZ4),
    Dataset("zstd", "zstd-3", 2, {"id": "zstd", "level": 3, "checksum": False}),
    Dataset("sharded", "sharded blosc-lz4 (v3)", 3, LZ4, sharded=True),
]


def rows_for(size_gib: float) -> int:
    rows = round(size_gib * (1 << 30) / (NCOLS * DTYPE.itemsize))
    return max(CHUNKS[0], rows // CHUNKS[0] * CHUNKS[0])


def generate_block(r0: int, r1: int) -> np.ndarray:
    """Rows r0:r1 of a smooth field (separable sin/cos terms) plus small noise, float32.

    The low 13 mantissa bits are cleared (about 3 significant decimal digits kept, like a
    bit-rounded climate field), so blosc-lz4 with byte shuffle compresses it about 2x but
    the data stays non-trivial (every chunk differs, noise in the kept bits).
    """
    two_pi = np.float32(2 * np.pi)
    y = np.arange(r0, r1, dtype=np.float32)[:, None]
    x = np.arange(NCOLS, dtype=np.float32)[None, :]
    v = np.float32(10.0) * np.sin(x * (two_pi / 4096)) * np.cos(y * (two_pi / 3000))
    # sin((x + y) * k) as a sum of separable products, so no 2-D trig is needed
    k = two_pi / 700
    v += np.float32(2.0) * (np.sin(x * k) * np.cos(y * k) + np.cos(x * k) * np.sin(y * k))
    v += np.float32(15.0) + np.float32(0.002) * y
    rng = np.random.default_rng(12345 + r0)
    v += rng.standard_normal(v.shape, dtype=np.float32) * np.float32(0.05)
    v.view(np.uint32)[...] &= np.uint32(0xFFFFE000)
    return v


def verify(path: Path, arr: zarr.Array, seed: int = 7) -> list[str]:
    """Compare the mounted file's bytes with zarr-python's; returns a list of problems."""
    problems: list[str] = []
    rows, cols = arr.shape
    rowbytes = cols * DTYPE.itemsize
    size = rows * rowbytes
    st = os.stat(path)
    if st.st_size != size:
        problems.append(f"file size {st.st_size} != array nbytes {size}")
    for name, want in (("dtype", None), ("shape", [rows, cols])):
        try:
            got = os.getxattr(path, f"user.zarr.{name}").decode()
        except OSError as e:
            problems.append(f"xattr user.zarr.{name}: {e}")
            continue
        if name == "dtype" and np.dtype(got) != DTYPE:
            problems.append(f"user.zarr.dtype {got!r} is not {DTYPE.str}")
        if name == "shape" and json.loads(got) != want:
            problems.append(f"user.zarr.shape {got!r} is not {want}")
    rng = random.Random(seed)
    sample = {0, 1, CHUNKS[0] - 1, CHUNKS[0], rows // 2, rows - 1}
    sample |= {rng.randrange(rows) for _ in range(6)}
    sample = sorted(r for r in sample if 0 <= r < rows)
    fd = os.open(path, os.O_RDONLY)
    try:
        for r in sample:
            got = os.pread(fd, rowbytes, r * rowbytes)
            want = np.ascontiguousarray(arr[r, :], dtype=DTYPE).tobytes()
            if got != want:
                problems.append(f"row {r}: mount bytes differ from zarr-python")
        # unaligned ranges that cross element, chunk and row boundaries
        ranges = [(CHUNKS[1] * 4 - 3, 10), (rowbytes - 5, 9), (CHUNKS[0] * rowbytes - 7, 3 << 20)]
        ranges += [(rng.randrange(size), rng.randrange(1, 3 << 20)) for _ in range(4)]
        for off, length in ranges:
            length = min(length, size - off)
            if length <= 0:
                continue
            r0, r1 = off // rowbytes, (off + length - 1) // rowbytes + 1
            block = np.ascontiguousarray(arr[r0:r1, :], dtype=DTYPE).view(np.uint8).reshape(-1)
            want = block[off - r0 * rowbytes : off - r0 * rowbytes + length].tobytes()
            got = os.pread(fd, length, off)
            if got != want:
                problems.append(f"range offset={off} length={length}: bytes differ")
        if os.pread(fd, 4096, size) != b"":
            problems.append("read at EOF did not return 0 bytes")
    finally:
        os.close(fd)
    log(
        f"  {path.parent.name}/{path.name}: checked size, xattrs, {len(sample)} rows and "
        f"{len(ranges)} unaligned ranges: {'OK' if not problems else 'FAILED'}"
    )
    return problems


def create_v2(
    store: str | Path,
    shape: tuple[int, ...],
    *,
    chunks: tuple[int, ...] = CHUNKS,
    lz4: bool = True,
    storage_options: dict | None = None,
) -> zarr.Array:
    """An empty Zarr v2 float32 array (fill value 0) at ``store``, its chunks blosc-lz4
    like the lz4 dataset's, or uncompressed when ``lz4`` is False."""
    return zarr.create_array(
        str(store),
        shape=shape,
        chunks=chunks,
        dtype="<f4",
        compressors=DATASETS[1].codec() if lz4 else None,
        zarr_format=2,
        fill_value=0.0,
        storage_options=storage_options,
    )


def _spec(ds: Dataset, rows: int) -> dict:
    return {
        "version": DATA_VERSION,
        "dataset": ds.name,
        "shape": [rows, NCOLS],
        "chunks": list(CHUNKS),
        "compressor": ds.compressor,
        "zarr_format": ds.zarr_format,
    }


def _create(ds: Dataset, path: Path, rows: int) -> zarr.Array:
    common = {"shape": (rows, NCOLS), "dtype": DTYPE, "fill_value": 0.0}
    if ds.zarr_format == 2:
        group = zarr.open_group(str(path), mode="w", zarr_format=2)
        group.attrs["description"] = "zarrmount benchmark dataset (scripts/bench)"
        return group.create_array("field", chunks=CHUNKS, compressors=ds.codec(), **common)
    lz4 = BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")
    return zarr.create_array(
        str(path),
        chunks=CHUNKS,
        shards=(CHUNKS[0], NCOLS),
        compressors=lz4,
        zarr_format=3,
        **common,
    )


def ensure(ds: Dataset, work: Path, rows: int) -> Path:
    """The dataset's store path, written now unless a valid copy is there."""

    def write(path: Path) -> None:
        t0 = time.perf_counter()
        arr = _create(ds, path, rows)
        for r0 in range(0, rows, CHUNKS[0]):
            arr[r0 : r0 + CHUNKS[0], :] = generate_block(r0, r0 + CHUNKS[0])
            if sys.stdout.isatty():
                print(f"\r  writing {ds.name}: {(r0 + CHUNKS[0]) / rows:6.1%}", end="", flush=True)
        if sys.stdout.isatty():
            print()
        log(f"  wrote {path.name} in {time.perf_counter() - t0:.1f} s")

    return kept(ds.path(work, rows), _spec(ds, rows), write)


def kept(store: Path, spec: dict, write: Callable[[Path], None]) -> Path:
    """``store``, written by ``write`` unless a complete copy made for ``spec`` is there
    (the benchmark's datasets are kept in ``.bench/`` and reused)."""
    marker = store / "bench-complete.json"
    try:
        if json.loads(marker.read_text()) == spec:
            return store
    except (OSError, ValueError):
        pass
    shutil.rmtree(store, ignore_errors=True)
    write(store)
    marker.write_text(json.dumps(spec))
    return store


def stored_chunks(ds: Dataset, work: Path, rows: int) -> list[bytes]:
    """Every stored chunk's bytes (v2 only: one file per chunk)."""
    d = ds.array_path(work, rows)
    names = sorted(n for n in os.listdir(d) if not n.startswith("."))
    return [(d / n).read_bytes() for n in names]


def stored_bytes(path: Path) -> int:
    return sum(
        os.path.getsize(os.path.join(d, f))
        for d, _, files in os.walk(path)
        for f in files
        if not f.startswith(".") and f not in ("zarr.json", "bench-complete.json")
    )
