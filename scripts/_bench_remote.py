"""The remote case of scripts/bench: an S3 endpoint on loopback with added latency.

A moto S3 server runs in its own process on 127.0.0.1; a proxy in front of it
(scripts/_bench_proxy.py) delays every request by ``--latency-ms`` (default 20). The 1 GiB
blosc-lz4 array is uploaded once (directly, no latency), then read cold through the proxy:
sequentially through a zarrmount mount of ``s3://...`` with each client (fsspec's s3fs,
obstore), by zarr-python ``arr[:]`` via s3fs, and by plain GETs of every chunk object (s3fs,
obstore, and obstore with a one-thread decode of each chunk: the parts of the read but
FUSE); then a remount that reads from the disk cache against a mount of a local copy, and
the disk cache's size while a quarter of the array fits. Each line gives the daemon's (or
the GET process's) CPU seconds per GB: on two shared cores, with the S3 server and the
proxy on the same cores, CPU is what the ratios come down to.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import contextlib

import _bench_data as d  # noqa: E402
import _bench_sys as b  # noqa: E402
from _bench_proxy import ProxyProcess  # noqa: E402

# The server, and the local directories it holds as objects before it answers (argv[1]:
# a JSON list of [bucket, key prefix, directory]): put straight into moto's backend, tens of
# thousands of objects a second, where PUTs over HTTP manage about 400 a second here.
MOTO = """
import json, os, sys
from moto.server import ThreadedMotoServer
s = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
s.start()
if len(sys.argv) > 1:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for bucket, prefix, root in json.loads(sys.argv[1]):
        if bucket not in backend.buckets:
            backend.create_bucket(bucket, "us-east-1")
        for d, _, files in os.walk(root):
            for name in files:
                if name == "bench-complete.json":
                    continue
                path = os.path.join(d, name)
                with open(path, "rb") as f:
                    backend.put_object(bucket, prefix + os.path.relpath(path, root), f.read())
print("PORT", s.get_host_and_port()[1], flush=True)
sys.stdin.read()  # until the parent closes our stdin
s.stop()
"""


KEYS_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
}
URL = "s3://bench/data.zarr"
# Chunk fetches a sequential reader of the mount keeps in flight (its read-ahead: a quarter
# of the default 512 MiB cache, in 4 MiB chunks): the plain GET runs as many at once.
CONCURRENCY = 32


@contextlib.contextmanager
def moto(preload: list[tuple[str, str, Path]] = ()):
    """A moto S3 server in its own process holding ``preload``'s directories (bucket, key
    prefix, directory); its port."""
    loads = json.dumps([[bucket, prefix, str(root)] for bucket, prefix, root in preload])
    server = subprocess.Popen(
        [sys.executable, "-c", MOTO, *([loads] if preload else [])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = ""
        while not line.startswith("PORT "):
            line = server.stdout.readline()
            if not line:
                raise b.BenchError("the moto S3 server did not start")
        yield int(line.split()[1])
    finally:
        if server.poll() is None:
            server.stdin.close()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()


def _upload(direct: str, rows: int) -> None:
    import s3fs

    s3fs.S3FileSystem(endpoint_url=direct).mkdir("bench")
    arr = d.create_v2(URL, (rows, d.NCOLS), storage_options={"endpoint_url": direct})
    for r0 in range(0, rows, d.CHUNKS[0]):
        arr[r0 : r0 + d.CHUNKS[0]] = d.generate_block(r0, min(rows, r0 + d.CHUNKS[0]))


class Reads:
    """Cold sequential reads of the array through fresh mounts (dd-like 1 MiB reads)."""

    def __init__(self, args, work: Path, nbytes: int) -> None:
        self.args, self.work, self.nbytes = args, work, nbytes
        self.mnt = work / "mnt"
        self.buf = __import__("mmap").mmap(-1, b.READ_SIZE)

    def read(self, source: str, *options: str, file: str = "array") -> tuple[float, dict]:
        """GB/s of a cold read of ``source``'s array (``file`` in the mount), and the
        daemon's statistics (with ``cpu_s_per_gb``, its CPU seconds per GB read)."""
        b.unmount(self.args.zarrmount, self.mnt)
        self.mnt.mkdir(exist_ok=True)
        opts = ",".join([f"log={self.work / 'zarrmount.log'}", *options])
        subprocess.run([self.args.zarrmount, source, str(self.mnt), "-o", opts], check=True)
        try:
            b.touch_and_free()
            pid = b.daemon_pid(self.mnt)
            cpu0 = b.cpu_seconds(pid)
            dt = b.read_sequential(self.mnt / file, self.buf, self.nbytes)
            cpu1 = b.cpu_seconds(pid)
            stats = b.daemon_stats(self.mnt) or {}
            if cpu0 is not None and cpu1 is not None:
                stats["cpu_s_per_gb"] = (cpu1 - cpu0) / (self.nbytes / 1e9)
        finally:
            b.unmount(self.args.zarrmount, self.mnt)
        return self.nbytes / dt / 1e9, stats


# A GET of every chunk object, CONCURRENCY at once, in a process of its own (as the daemon
# is): by s3fs (the fsspec client), by obstore (the other), and by obstore with each chunk
# decoded by one thread as it arrives (the parts of a cold read but FUSE). It prints the
# seconds and its CPU seconds after the listing.
PLAIN_GET = """
import asyncio, os, resource, sys, time
import numcodecs, numpy as np
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
how, endpoint, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
if how == "s3fs":
    import s3fs
    fs = s3fs.S3FileSystem(endpoint_url=endpoint, skip_instance_cache=True)
    keys = [k for k in fs.find("bench/data.zarr") if k.rsplit("/", 1)[-1][0].isdigit()]
    t0, c0 = time.perf_counter(), cpu()
    fs.cat(keys, batch_size=concurrency)
    print(time.perf_counter() - t0, cpu() - c0)
    sys.exit()
import obstore
from obstore.store import S3Store
store = S3Store("bench", prefix="data.zarr", endpoint=endpoint,
                client_options={"allow_http": True})
keys = [m["path"] for page in obstore.list(store) for m in page if m["path"][0].isdigit()]
codec = numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
out = np.empty(CHUNK_BYTES, np.uint8)
async def main():
    sem = asyncio.Semaphore(concurrency)
    async def one(key):
        async with sem:
            got = await (await obstore.get_async(store, key)).bytes_async()
        if how == "obstore+decode":
            await asyncio.to_thread(codec.decode, memoryview(got), out)
    await asyncio.gather(*map(one, keys))
t0, c0 = time.perf_counter(), cpu()
asyncio.run(main())
print(time.perf_counter() - t0, cpu() - c0, flush=True)
os._exit(0)  # no interpreter teardown under obstore's runtime (it aborted here once)
"""


def _plain_get(how: str, slow: str, nbytes: int) -> tuple[float, float]:
    """GB/s of the array's chunk objects fetched ``how`` (s3fs, obstore, obstore+decode),
    and CPU seconds per GB."""
    code = PLAIN_GET.replace("CHUNK_BYTES", str(d.CHUNKS[0] * d.CHUNKS[1] * 4))
    done = subprocess.run(
        [sys.executable, "-c", code, how, slow, str(CONCURRENCY)],
        check=True,
        capture_output=True,
        text=True,
    )
    seconds, cpu = map(float, done.stdout.split())
    return nbytes / seconds / 1e9, cpu / (nbytes / 1e9)


def _zarr_read(slow: str, shape: tuple[int, int]) -> float:
    a = zarr.open_array(URL, mode="r", storage_options={"endpoint_url": slow})
    t0 = time.perf_counter()
    res = a[:]
    seconds = time.perf_counter() - t0
    if res.shape != shape:
        raise b.BenchError("zarr-python returned the wrong shape")
    return res.nbytes / seconds / 1e9


def latency_ms(args, default: float = 20.0) -> float:
    """``--latency-ms``, else the case's own default (this case's figures were always taken
    at 20 ms; the latency case's at 30)."""
    return default if args.latency_ms is None else args.latency_ms


def run(args, work: Path) -> list[str]:
    os.environ.update(KEYS_ENV)
    proxy = None
    with moto() as port:
        try:
            direct = f"http://127.0.0.1:{port}"
            rows = d.rows_for(args.size_gib)
            nbytes = rows * d.NCOLS * 4
            _upload(direct, rows)
            proxy = ProxyProcess(port, latency_ms(args) / 1000)
            slow = f"http://127.0.0.1:{proxy.port}"
            b.log(
                f"  uploaded {nbytes / 1e9:.2f} GB to moto; read through +{latency_ms(args):g} ms"
            )
            reads = Reads(args, work, nbytes)
            lines = _cold(args, reads, slow, rows)
            lines += _disk_cache(args, reads, slow, direct, work)
            _check_row(args, reads.mnt, direct, rows)
        finally:
            if proxy is not None:
                proxy.close()
    return lines


# What _cold measures, in turn: (name, how).
COLD = (
    ("mount", "fsspec"),
    ("mount", "obstore"),
    ("zarr", ""),
    ("get", "s3fs"),
    ("get", "obstore"),
    ("get", "obstore+decode"),
)


def _cold(args, reads: Reads, slow: str, rows: int) -> list[str]:
    """The mount (either client) against zarr-python and plain GETs of the same objects,
    in turns (reversed every other repetition)."""
    gbps: dict[tuple[str, str], list[float]] = {case: [] for case in COLD}
    cpu: dict[tuple[str, str], list[float]] = {case: [] for case in COLD}
    for rep in range(args.reps):
        for case in COLD if rep % 2 == 0 else COLD[::-1]:
            which, how = case
            per_gb = None
            if which == "mount":
                rate, stats = reads.read(URL, f"so.endpoint_url={slow}", f"client={how}")
                per_gb = stats.get("cpu_s_per_gb")
            elif which == "zarr":
                rate = _zarr_read(slow, (rows, d.NCOLS))
            else:
                rate, per_gb = _plain_get(how, slow, reads.nbytes)
            gbps[case].append(rate)
            if per_gb is not None:
                cpu[case].append(per_gb)
            b.log(f"  remote cold {which:<5} {how:<14} {rate:6.3f} GB/s  CPU/GB {per_gb or 0:.2f}")
    med = {case: statistics.median(v) for case, v in gbps.items()}
    lines = [
        f"remote S3 read (+{latency_ms(args):g} ms per request, v2 lz4 4 MiB chunks, "
        f"{CONCURRENCY} GETs at once; GB/s of decoded data, CPU s per GB)"
    ]
    for case in COLD:
        per_gb = f"{statistics.median(cpu[case]):.2f}" if cpu[case] else "-"
        lines.append(f"  {case[0]:<5} {case[1]:<14} {med[case]:6.3f} GB/s  CPU/GB {per_gb}")
    for client in ("fsspec", "obstore"):
        mount = med[("mount", client)]
        against = ", ".join(
            f"GET by {how} {mount / med[('get', how)]:.2f}x"
            for how in ("s3fs", "obstore", "obstore+decode")
        )
        lines.append(
            f"  mount ({client}): zarr-python {mount / med[('zarr', '')]:.2f}x; {against} "
            "(target >= 0.8 of a plain GET)"
        )
    return lines


def _disk_cache(args, reads: Reads, slow: str, direct: str, work: Path) -> list[str]:
    """A remount with the disk cache filled against a mount of a local copy of the same
    array, alternating; then a cache of a quarter of the array, read through once."""
    import s3fs

    disk, local = work / "disk-cache", work / "remote-copy.zarr"
    shutil.rmtree(disk, ignore_errors=True)
    shutil.rmtree(local, ignore_errors=True)
    s3fs.S3FileSystem(endpoint_url=direct).get("bench/data.zarr", str(local), recursive=True)
    cached = (f"so.endpoint_url={slow}", f"disk_cache={disk}")
    reads.read(URL, *cached)  # fills it
    found: dict[str, list[float]] = {"disk": [], "local": []}
    chunk_gets = []
    for rep in range(args.reps):
        for which in ("disk", "local") if rep % 2 == 0 else ("local", "disk"):
            if which == "disk":
                b.read_tree(disk)
                gbps, stats = reads.read(URL, *cached)
                chunk_gets.append(stats.get("store_get_bytes", 0) >= d.CHUNKS[1] * 4)
            else:
                b.read_tree(local)
                gbps, _ = reads.read(str(local))
            found[which].append(gbps)
            b.log(f"  remount {which:<5} {gbps:6.3f} GB/s")
    k, loc = statistics.median(found["disk"]), statistics.median(found["local"])
    small = reads.nbytes // 4
    shutil.rmtree(disk, ignore_errors=True)
    reads.read(URL, *cached, f"disk_cache_size={small}", "cache_size=64M")
    used = sum(f.stat().st_size for f in disk.rglob("*") if f.is_file())
    shutil.rmtree(disk, ignore_errors=True)
    shutil.rmtree(local, ignore_errors=True)
    return [
        f"remount from the disk cache against a local store of the same array  "
        f"{k:.3f} GB/s  local {loc:.3f} GB/s  ratio {k / loc:.2f}x (target >= 0.8); "
        f"a chunk object fetched in {sum(chunk_gets)} of {len(chunk_gets)} remounts",
        f"disk cache of {small >> 20} MiB streaming {reads.nbytes >> 20} MiB: "
        f"{used >> 20} MiB on disk after ({'within' if used <= small else 'OVER'} the limit)",
    ]


def _check_row(args, mnt: Path, direct: str, rows: int) -> None:
    check = zarr.open_array(URL, mode="r", storage_options={"endpoint_url": direct})
    b.unmount(args.zarrmount, mnt)
    subprocess.run([args.zarrmount, URL, str(mnt), "-o", f"so.endpoint_url={direct}"], check=True)
    try:
        row = rows // 2
        with open(mnt / "array", "rb") as f:
            f.seek(row * d.NCOLS * 4)
            got = np.frombuffer(f.read(d.NCOLS * 4), "<f4")
        if not np.array_equal(got, check[row]):
            raise b.BenchError("remote: the mount's row differs from zarr-python's")
    finally:
        b.unmount(args.zarrmount, mnt)
