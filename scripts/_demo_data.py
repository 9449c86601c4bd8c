"""Helper for scripts/demo: writes the sample hierarchy and checks a mount against it.

    python scripts/_demo_data.py write DATA.zarr
    python scripts/_demo_data.py compare DATA.zarr MOUNTPOINT

Only zarr-python, NumPy and numcodecs are used here: the point of the demo is that a program
which knows nothing about Zarr (``np.fromfile`` on the mounted file) sees the same values as
zarr-python.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import numcodecs
import numpy as np
import zarr


def write(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    root = zarr.open_group(path, mode="w", zarr_format=2)
    root.attrs.update({"title": "zarrmount demo hierarchy", "created_by": "scripts/demo"})

    # climate/temperature: float32 (lat, lon), blosc-lz4 with byte shuffle, with attributes.
    climate = root.create_group("climate")
    climate.attrs["description"] = "synthetic climate fields"
    lat = np.linspace(-89.5, 89.5, 180, dtype=np.float64)
    lon = np.linspace(-179.5, 179.5, 360, dtype=np.float64)
    lat2, lon2 = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    temp = (288.0 + 30.0 * np.cos(lat2) ** 2 - 15.0 + 5.0 * np.sin(3 * lon2) * np.cos(lat2)).astype(
        np.float32
    )
    _put(
        climate,
        "temperature",
        temp,
        chunks=(45, 90),
        compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
        fill_value=np.nan,
        attributes={
            "units": "K",
            "long_name": "near-surface air temperature",
            "_ARRAY_DIMENSIONS": ["lat", "lon"],
        },
    )

    # climate/pressure: big-endian float64 (time, lat, lon), zstd.
    time = np.arange(4)[:, None, None]
    pres = 101325.0 + 800.0 * np.sin(2 * lat2[::4, ::4] + 0.5 * time) * np.cos(lon2[::4, ::4])
    _put(
        climate,
        "pressure",
        pres.astype(">f8"),
        chunks=(1, 45, 45),
        compressors=numcodecs.Zstd(level=3),
        fill_value=0.0,
        attributes={"units": "Pa", "_ARRAY_DIMENSIONS": ["time", "lat", "lon"]},
    )

    # images/rgb: uint8 (H, W, 3), zlib.
    images = root.create_group("images")
    h, w = 96, 128
    yy, xx = np.mgrid[0:h, 0:w]
    rgb = np.stack(
        [
            (255 * xx / (w - 1)),
            (255 * yy / (h - 1)),
            (127.5 + 127.5 * np.sin((xx + yy) / 10.0)),
        ],
        axis=-1,
    ).astype(np.uint8)
    _put(
        images,
        "rgb",
        rgb,
        chunks=(32, 64, 3),
        compressors=numcodecs.Zlib(level=6),
        fill_value=0,
        attributes={"description": "gradient test image, H x W x RGB"},
    )

    # counts: int16 with a Delta filter; only part of it is written, so the other chunks are
    # missing from the store and must read back as the fill value (-1).
    c = root.create_array(
        "counts",
        shape=(100, 100),
        chunks=(25, 25),
        dtype="int16",
        filters=[numcodecs.Delta(dtype="<i2")],
        compressors=numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE),
        fill_value=-1,
        attributes={"description": "sparse counts; unwritten chunks read as fill_value -1"},
    )
    c[:50, :50] = np.arange(50 * 50, dtype=np.int16).reshape(50, 50) % 997
    c[75:, 75:] = 7

    present = sorted(n for n in os.listdir(os.path.join(path, "counts")) if not n.startswith("."))
    print(f"wrote {path}")
    for name, a in _walk(root):
        comp = a.metadata.compressor.get_config() if a.metadata.compressor else None
        filt = [f.get_config() for f in (a.metadata.filters or ())]
        cname = (comp["id"] + ("-" + comp["cname"] if "cname" in comp else "")) if comp else None
        print(
            f"  {name:<20} dtype={np.dtype(a.dtype).str:<4} shape={a.shape} chunks={a.chunks} "
            f"compressor={cname}" + (f" filters={[f['id'] for f in filt]}" if filt else "")
        )
    print(
        f"  counts: {len(present)} of 16 chunks stored ({', '.join(present)}); the rest are missing"
    )


def _put(group: zarr.Group, name: str, data: np.ndarray, **kwargs) -> None:
    """``data`` written as the array ``name`` of ``group``, of its shape and dtype."""
    group.create_array(name, shape=data.shape, dtype=data.dtype, **kwargs)[:] = data


def _walk(group: zarr.Group, prefix: str = ""):
    for name in sorted(group.array_keys()):
        yield prefix + name, group[name]
    for name in sorted(group.group_keys()):
        yield from _walk(group[name], prefix + name + "/")


def _xattr(path: str, name: str) -> str:
    return os.getxattr(path, "user.zarr." + name).decode()


def compare(path: str, mnt: str) -> int:
    root = zarr.open_group(path, mode="r")
    failures = 0
    np.set_printoptions(precision=6, suppress=False, linewidth=120)
    for name, a in _walk(root):
        f = os.path.join(mnt, name)
        print(f"--- {name}")
        try:
            dtype = np.dtype(_xattr(f, "dtype"))
            shape = tuple(json.loads(_xattr(f, "shape")))
        except OSError as e:
            print(f"  cannot read xattrs of {f}: {e}")
            failures += 1
            continue
        try:
            raw = np.fromfile(f, dtype=dtype)
        except OSError as e:
            print(f"  cannot read {f}: {e}")
            failures += 1
            continue
        ref = a[...]
        print(
            f"  user.zarr.dtype={dtype.str} user.zarr.shape={list(shape)}  "
            f"file size {os.path.getsize(f)} bytes (zarr nbytes {ref.nbytes})"
        )
        if raw.size != int(np.prod(shape)):
            print(f"  MISMATCH: file holds {raw.size} elements, shape says {shape}")
            failures += 1
            continue
        mine = raw.reshape(shape)
        print(f"  np.fromfile (first 6, C order): {mine.reshape(-1)[:6]}")
        print(f"  zarr-python (first 6, C order): {ref.reshape(-1)[:6]}")
        if name == "counts":
            print(f"  np.fromfile counts[60, 60:66] (missing chunk -> fill): {mine[60, 60:66]}")
            print(f"  zarr-python counts[60, 60:66]:                         {ref[60, 60:66]}")
        same = (
            mine.shape == ref.shape
            and mine.dtype == ref.dtype
            and np.array_equal(mine, ref, equal_nan=mine.dtype.kind == "f")
        )
        print(f"  all {ref.size} elements identical (dtype {ref.dtype}): {same}")
        failures += not same
    print(f"=== {'all arrays match' if not failures else f'{failures} array(s) differ'}")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "write":
        write(argv[1])
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(argv[1], argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
