"""What the latency case (scripts/_bench_latency.py) runs in a fresh process of its own.

Each subcommand prints one JSON object. The mount's side runs here so that the bench can
bound every wait (a read a stalled store never answers is killed with its process, by the
parent's timeout); zarr-python's side runs here so that it starts as a new reader would,
with no client, connection or listing cached from an earlier measurement. Timings are taken
inside, after the interpreter and its imports are up.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

READ_SIZE = 1 << 20


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def preads(path: str, offsets: str, size: str) -> dict[str, Any]:
    """``os.pread`` of ``size`` bytes at each offset (a JSON list), each timed; the open is
    timed with the first. The values come back as float32."""
    n = int(size)
    seconds, values = [], []
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        for off in json.loads(offsets):
            got = os.pread(fd, n, off)
            t1 = time.perf_counter()
            seconds.append(t1 - t0)
            t0 = t1
            values.extend(np.frombuffer(got, "<f4").tolist())
    finally:
        os.close(fd)
    return {"seconds": seconds, "values": values}


def sequential(path: str) -> dict[str, Any]:
    """A whole file read 1 MiB at a time into one page-aligned, touched buffer."""
    buf = mmap.mmap(-1, READ_SIZE)
    buf.write(b"\1" * READ_SIZE)
    total = 0
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while n := os.readv(fd, [buf]):
            total += n
    finally:
        os.close(fd)
    return {"seconds": time.perf_counter() - t0, "bytes": total}


def digest(path: str) -> dict[str, Any]:
    """A whole file read 1 MiB at a time, and the SHA-256 of its bytes."""
    found = hashlib.sha256()
    t0 = time.perf_counter()
    total = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(READ_SIZE):
            found.update(chunk)
            total += len(chunk)
    return {"seconds": time.perf_counter() - t0, "bytes": total, "sha256": found.hexdigest()}


def walk(path: str) -> dict[str, Any]:
    """``ls -lR``: every directory listed, every entry stat'ed."""
    t0 = time.perf_counter()
    entries = 0
    for d, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lstat(os.path.join(d, name))
            entries += 1
    return {"seconds": time.perf_counter() - t0, "entries": entries}


def read(path: str) -> dict[str, Any]:
    """A whole (small) file, or the errno its read failed with; the outage rows."""
    t0 = time.perf_counter()
    try:
        with open(path, "rb", buffering=0) as f:
            n = len(f.read())
        return {"ok": True, "seconds": time.perf_counter() - t0, "bytes": n}
    except OSError as e:
        name = os.strerror(e.errno) if e.errno else str(e)
        return {"ok": False, "seconds": time.perf_counter() - t0, "error": name}


def listing(path: str) -> dict[str, Any]:
    """A directory listed and its entries stat'ed, or the errno; the outage rows."""
    t0 = time.perf_counter()
    try:
        names = os.listdir(path)
        for name in names:
            os.lstat(os.path.join(path, name))
        return {"ok": True, "seconds": time.perf_counter() - t0, "entries": len(names)}
    except OSError as e:
        name = os.strerror(e.errno) if e.errno else str(e)
        return {"ok": False, "seconds": time.perf_counter() - t0, "error": name}


def _open_array(url: str, endpoint: str, mode: str = "r") -> Any:
    import zarr

    return zarr.open_array(url, mode=mode, storage_options={"endpoint_url": endpoint})


def zarr_series(url: str, endpoint: str, y: str, x: str) -> dict[str, Any]:
    """zarr-python ``arr[:, y, x]`` (the array opened first, untimed, as the mount's array
    is known once mounted)."""
    arr = _open_array(url, endpoint)
    t0 = time.perf_counter()
    got = arr[:, int(y), int(x)]
    return {"seconds": time.perf_counter() - t0, "values": got.tolist()}


def zarr_tree(url: str, endpoint: str) -> dict[str, Any]:
    """zarr-python opening the root group and every member with its metadata."""
    import zarr

    t0 = time.perf_counter()
    root = zarr.open_group(url, mode="r", storage_options={"endpoint_url": endpoint})
    arrays = groups = 0
    for _, node in root.members(max_depth=None):
        if isinstance(node, zarr.Array):
            arrays += node.shape is not None and node.dtype is not None
        else:
            groups += 1
        dict(node.attrs)
    return {"seconds": time.perf_counter() - t0, "arrays": arrays, "groups": groups}


def zarr_points(url: str, endpoint: str, points: str, pause: str) -> dict[str, Any]:
    """zarr-python ``arr[i, j]`` at each point, the last one after ``pause`` seconds (the
    mount's TTL run out in the mount's turn)."""
    arr = _open_array(url, endpoint)
    pts = json.loads(points)
    seconds, values = [], []
    for k, (i, j) in enumerate(pts):
        if k == len(pts) - 1:
            time.sleep(float(pause))
        t0 = time.perf_counter()
        values.append(float(arr[i, j]))
        seconds.append(time.perf_counter() - t0)
    return {"seconds": seconds, "values": values}


def zarr_write(url: str, endpoint: str) -> dict[str, Any]:
    """zarr-python ``arr[...] = data``, the bench's 64 MiB of field rows."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _bench_data as d

    arr = _open_array(url, endpoint, mode="r+")
    data = d.generate_block(0, arr.shape[0])
    t0, c0 = time.perf_counter(), _cpu()
    arr[...] = data
    return {"seconds": time.perf_counter() - t0, "cpu": _cpu() - c0}


def pwrite(path: str, rows: str) -> dict[str, Any]:
    """The bench's field rows written into a mounted array file by one ``pwrite`` from a
    page-aligned buffer, then ``fsync``: both timed."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _bench_data as d

    data = d.generate_block(0, int(rows))
    buf = mmap.mmap(-1, data.nbytes)
    buf.write(data.tobytes())
    view = memoryview(buf)
    fd = os.open(path, os.O_WRONLY)
    try:
        t0 = time.perf_counter()
        done = 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], done)
        os.fsync(fd)
        seconds = time.perf_counter() - t0
    finally:
        os.close(fd)
    return {"seconds": seconds, "bytes": done}


def plain_get(url: str, endpoint: str, threads: str) -> dict[str, Any]:
    """Every chunk object under ``url`` fetched by s3fs, ``threads`` at once (timed after
    the listing): the link-bound row's reference."""
    import s3fs

    fs = s3fs.S3FileSystem(
        endpoint_url=endpoint,
        skip_instance_cache=True,
        config_kwargs={"max_pool_connections": int(threads)},
    )
    prefix = url.removeprefix("s3://")
    keys = [k for k in fs.find(prefix) if k.rsplit("/", 1)[-1][:1].isdigit()]
    t0, c0 = time.perf_counter(), _cpu()
    got = fs.cat(keys, batch_size=int(threads))
    nbytes = sum(len(v) for v in got.values())
    return {"seconds": time.perf_counter() - t0, "cpu": _cpu() - c0, "bytes": nbytes}


COMMANDS: dict[str, Callable[..., dict[str, Any]]] = {
    "preads": preads,
    "sequential": sequential,
    "digest": digest,
    "walk": walk,
    "read": read,
    "listing": listing,
    "zarr_series": zarr_series,
    "zarr_tree": zarr_tree,
    "zarr_points": zarr_points,
    "zarr_write": zarr_write,
    "pwrite": pwrite,
    "plain_get": plain_get,
}

if __name__ == "__main__":
    print(json.dumps(COMMANDS[sys.argv[1]](*sys.argv[2:])), flush=True)
    os._exit(0)  # no teardown of fsspec's event loop thread
