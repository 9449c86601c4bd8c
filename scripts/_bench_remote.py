"""The remote case of scripts/bench: an S3 endpoint on loopback with added latency.

A moto S3 server runs in its own process on 127.0.0.1; a small TCP proxy in front of it
delays every request by ``--latency-ms`` (default 20). The 1 GiB blosc-lz4 array is
uploaded once (directly, no latency), then read cold through the proxy: sequentially
through a zarrmount mount of ``s3://...``, and by zarr-python ``arr[:]`` via s3fs.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import contextlib

import _bench_data as d  # noqa: E402
import _bench_sys as b  # noqa: E402

MOTO = """
import sys, time
from moto.server import ThreadedMotoServer
s = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
s.start()
print("PORT", s.get_host_and_port()[1], flush=True)
sys.stdin.read()  # until the parent closes our stdin
s.stop()
"""


class LatencyProxy:
    """Forwards 127.0.0.1:port to target, holding each client send back by ``delay`` s."""

    def __init__(self, target_port: int, delay: float) -> None:
        self.target, self.delay = target_port, delay
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, delayed: bool) -> None:
        try:
            while data := src.recv(1 << 20):
                if delayed:
                    time.sleep(self.delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.stopped = True
        self.server.close()


def run(args, work: Path) -> list[str]:
    moto = subprocess.Popen(
        [sys.executable, "-c", MOTO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    proxy = None
    try:
        line = ""
        while not line.startswith("PORT "):
            line = moto.stdout.readline()
            if not line:
                raise b.BenchError("the moto S3 server did not start")
        port = int(line.split()[1])
        direct = f"http://127.0.0.1:{port}"
        env = {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
        }
        os.environ.update(env)
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=direct)
        fs.mkdir("bench")
        rows, cols = d.rows_for(args.size_gib), d.NCOLS
        nbytes = rows * cols * 4
        url = "s3://bench/data.zarr"
        arr = zarr.create_array(
            url,
            shape=(rows, cols),
            chunks=d.CHUNKS,
            dtype="<f4",
            compressors=d.DATASETS[1].codec(),
            zarr_format=2,
            fill_value=0.0,
            storage_options={"endpoint_url": direct},
        )
        for r0 in range(0, rows, d.CHUNKS[0]):
            arr[r0 : r0 + d.CHUNKS[0]] = d.generate_block(r0, min(rows, r0 + d.CHUNKS[0]))
        proxy = LatencyProxy(port, args.latency_ms / 1000)
        slow = f"http://127.0.0.1:{proxy.port}"
        b.log(f"  uploaded {nbytes / 1e9:.2f} GB to moto; reading through +{args.latency_ms} ms")
        mnt = work / "mnt"
        buf = __import__("mmap").mmap(-1, b.READ_SIZE)
        mount_r, zarr_r = [], []
        for rep in range(args.reps):
            for which in ("mount", "zarr") if rep % 2 == 0 else ("zarr", "mount"):
                if which == "mount":
                    b.unmount(args.zarrmount, mnt)
                    mnt.mkdir(exist_ok=True)
                    subprocess.run(
                        [
                            args.zarrmount,
                            url,
                            str(mnt),
                            "-o",
                            f"so.endpoint_url={slow},log={work / 'zarrmount.log'}",
                        ],
                        check=True,
                        env={**os.environ, **env},
                    )
                    try:
                        dt = b.read_sequential(mnt / "array", buf, nbytes)
                    finally:
                        b.unmount(args.zarrmount, mnt)
                    mount_r.append(nbytes / dt / 1e9)
                    b.log(f"  remote mount (dd-like 1 MiB reads)  {mount_r[-1]:6.3f} GB/s")
                else:
                    a = zarr.open_array(url, mode="r", storage_options={"endpoint_url": slow})
                    t0 = time.perf_counter()
                    res = a[:]
                    zarr_r.append(nbytes / (time.perf_counter() - t0) / 1e9)
                    if res.shape != (rows, cols):
                        raise b.BenchError("zarr-python returned the wrong shape")
                    del res
                    b.log(f"  remote zarr arr[:]                  {zarr_r[-1]:6.3f} GB/s")
        check = zarr.open_array(url, mode="r", storage_options={"endpoint_url": direct})
        b.unmount(args.zarrmount, mnt)
        subprocess.run(
            [args.zarrmount, url, str(mnt), "-o", f"so.endpoint_url={direct}"],
            check=True,
            env={**os.environ, **env},
        )
        try:
            row = rows // 2
            with open(mnt / "array", "rb") as f:
                f.seek(row * cols * 4)
                got = np.frombuffer(f.read(cols * 4), "<f4")
            if not np.array_equal(got, check[row]):
                raise b.BenchError("remote: the mount's row differs from zarr-python's")
        finally:
            b.unmount(args.zarrmount, mnt)
    finally:
        if proxy is not None:
            proxy.close()
        if moto.poll() is None:
            moto.stdin.close()
            try:
                moto.wait(timeout=20)
            except subprocess.TimeoutExpired:
                moto.kill()
    m, z = statistics.median(mount_r), statistics.median(zarr_r)
    return [
        f"remote S3 read (+{args.latency_ms} ms per request, v2 lz4 4 MiB chunks)  "
        f"mount {m:.3f} GB/s  zarr-python {z:.3f} GB/s  ratio {m / z:.2f}x"
    ]
