"""Loopback servers for the remote-source tests, and the hierarchies they serve.

* :class:`MotoS3` - a moto S3 endpoint in its **own process** (the FUSE daemon and the tests
  both talk to it over HTTP). One per test session, shared through a reference count
  (:func:`shared_moto`), so every test module can ask for the session fixture ``s3``.
* :class:`RangeHTTPServer` - a static file server on a thread that answers ``Range`` with 206
  (``http.server`` alone ignores ranges) and records every request.
* :class:`FaultProxy` - a threaded HTTP proxy on loopback (in front of the S3 server) whose
  behaviour tests switch at run time: added latency, an HTTP status (503, 429, 403, 404...)
  N times or for ever, a connection reset in the middle of the body, or a stall (no answer
  until released). It records every request and the peak number in flight;
  :attr:`FaultProxy.data_requests` (and ``count(..., lease=False)``) leave out those for
  the writer lease object an rw mount keeps at the store root.

Everything listens on 127.0.0.1 only, stops at teardown (servers, threads, sockets,
processes started here, by PID) and every wait is bounded.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import os
import re
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest

from zarrmount.store.local import LOCK_NAME as LEASE_NAME

LOOPBACK = "127.0.0.1"
BUCKET = "zm-remote"
S3_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "x",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# Longest any handler thread may wait for anything (a stalled request, an upstream answer).
MAX_WAIT_S = 120.0

# ---------------------------------------------------------------------------------------
# moto S3 in its own process
# ---------------------------------------------------------------------------------------

_MOTO_SCRIPT = r"""
import os, sys, threading, time
from moto.server import ThreadedMotoServer

server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
print("PORT", server.get_host_and_port()[1], flush=True)
os.dup2(2, 1)  # nothing more on the pipe: a full pipe nobody reads would block the server
parent = os.getppid()

def orphan_watch():
    # The test process died without closing our stdin: stop on our own.
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(3)

threading.Thread(target=orphan_watch, daemon=True).start()
sys.stdin.read()          # EOF: the test session is done with us
server.stop()
"""


class MotoS3:
    """``python -c ThreadedMotoServer(...)`` as a child process; stops on stdin EOF."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self, timeout: float = 60.0) -> None:
        env = dict(os.environ, **S3_CREDENTIALS)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _MOTO_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            text=True,
        )
        line_box: list[str] = []
        reader = threading.Thread(
            target=lambda: line_box.append(self.proc.stdout.readline()), daemon=True
        )
        reader.start()
        reader.join(timeout)
        line = line_box[0] if line_box else ""
        if not line.startswith("PORT "):
            self._stderr.seek(0)
            err = self._stderr.read().decode("utf-8", "replace")[-3000:]
            self.stop()
            raise RuntimeError(f"moto server did not start: {line!r}\n{err}")
        self.port = int(line.split()[1])
        # the endpoint answers HTTP once the port is printed; check anyway (bounded)
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection((LOOPBACK, self.port), timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)  # only the process we started, by PID
            proc.wait(timeout=10)
        with contextlib.suppress(OSError):
            proc.stdout.close()
        self._stderr.close()


_moto_lock = threading.Lock()
_moto: MotoS3 | None = None
_moto_refs = 0
_saved_env: dict[str, str | None] = {}


@contextlib.contextmanager
def shared_moto() -> Iterator[MotoS3]:
    """The one moto server of this process, started on first use, stopped by the last user.

    While it runs, the test process has the fake AWS credentials in its environment (the
    FUSE daemons inherit them): credentials come from the backend's usual chain.
    """
    global _moto, _moto_refs
    with _moto_lock:
        if _moto is None:
            server = MotoS3()
            server.start()
            _moto = server
            for k, v in S3_CREDENTIALS.items():
                _saved_env[k] = os.environ.get(k)
                os.environ[k] = v
        _moto_refs += 1
        server = _moto
    try:
        yield server
    finally:
        with _moto_lock:
            _moto_refs -= 1
            if _moto_refs == 0:
                _moto = None
                server.stop()
                for k, v in _saved_env.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                _saved_env.clear()


def s3fs_for(endpoint: str):
    """A fresh s3fs filesystem (no instance or listing cache) talking to ``endpoint``."""
    import s3fs

    return s3fs.S3FileSystem(
        endpoint_url=endpoint,
        key="x",
        secret="x",
        skip_instance_cache=True,
        use_listings_cache=False,
    )


def zarr_s3_store(url: str, endpoint: str, read_only: bool = False):
    import zarr

    return zarr.storage.FsspecStore.from_url(
        url,
        storage_options={
            "endpoint_url": endpoint,
            "key": "x",
            "secret": "x",
            "skip_instance_cache": True,
            "use_listings_cache": False,
        },
        read_only=read_only,
    )


@pytest.fixture(scope="session", name="s3")
def s3_fixture() -> Iterator[MotoS3]:
    """A moto S3 server (own process) with bucket :data:`BUCKET`; one per session."""
    with shared_moto() as server:
        fs = s3fs_for(server.url)
        if not fs.exists(BUCKET):
            fs.mkdir(BUCKET)
        yield server


# ---------------------------------------------------------------------------------------
# Shared plumbing: threaded servers that close every connection at teardown
# ---------------------------------------------------------------------------------------


class _TrackingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A threading HTTP server that knows its open connections, to cut them at close."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, handler) -> None:
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__((LOOPBACK, 0), handler)

    def process_request(self, request, client_address):
        with self.conn_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.conn_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address) -> None:
        pass  # resets and clients that went away are part of these tests

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        with self.conn_lock:
            conns = list(self.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP RST (SO_LINGER 0), as a crashing peer would."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    outcome: str  # HTTP status as text, "reset" or "stall"
    nbytes: int = 0  # body bytes sent to the client

    @property
    def is_lease(self) -> bool:
        """Whether this is a request for the writer lease object (``.zarrmount.lock`` at
        the store root) that an rw mount of an object store takes, renews and deletes."""
        return self.path.partition("?")[0].endswith("/" + LEASE_NAME)


# ---------------------------------------------------------------------------------------
# Static HTTP server with ranges
# ---------------------------------------------------------------------------------------

_RANGE_RE = re.compile(r"bytes=(\d*)-(\d*)")


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    server: _RangeServer

    def log_message(self, *args) -> None:
        pass

    def _record(self, outcome: str, nbytes: int) -> None:
        self.server.record(
            Request(self.command, self.path, self.headers.get("Range"), outcome, nbytes)
        )

    def send_head(self):
        path = self.translate_path(self.path)
        rng = self.headers.get("Range")
        if not os.path.isfile(path):
            self._record("404", 0)
            self.send_error(404, "not found")
            return None
        size = os.path.getsize(path)
        if not rng:
            self._record("200", 0 if self.command == "HEAD" else size)
            f = open(path, "rb")  # noqa: SIM115 - closed by the base class
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            self._remaining = None
            return f
        m = _RANGE_RE.fullmatch(rng.strip())
        if not m or m.groups() == ("", ""):
            return self._unsatisfiable(size)
        a, b = m.groups()
        if a == "":  # suffix: the last b bytes
            start, end = max(size - int(b), 0), size - 1
        else:
            start, end = int(a), min(int(b), size - 1) if b else size - 1
        if start >= size or end < start:
            return self._unsatisfiable(size)
        n = end - start + 1
        self._record("206", 0 if self.command == "HEAD" else n)
        f = open(path, "rb")  # noqa: SIM115 - closed by the base class
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(n))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self._remaining = n
        return f

    def _unsatisfiable(self, size: int):
        self._record("416", 0)
        self.send_response(416)
        self.send_header("Content-Range", f"bytes */{size}")
        self.send_header("Content-Length", "0")
        self.end_headers()
        return None

    def copyfile(self, source, outputfile) -> None:
        remaining = getattr(self, "_remaining", None)
        if remaining is None:
            super().copyfile(source, outputfile)
            return
        while remaining > 0:
            block = source.read(min(remaining, 1 << 16))
            if not block:
                break
            outputfile.write(block)
            remaining -= len(block)


class _RangeServer(_TrackingServer):
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.requests: list[Request] = []
        self._lock = threading.Lock()

        def handler(*args, **kwargs):
            return _RangeHandler(*args, directory=directory, **kwargs)

        super().__init__(handler)

    def record(self, req: Request) -> None:
        with self._lock:
            self.requests.append(req)


class RangeHTTPServer:
    """Serves ``directory`` at :attr:`url`; answers ``Range`` with 206 (or 416)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self._server = _RangeServer(os.fspath(directory))
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()

    @property
    def requests(self) -> list[Request]:
        with self._server._lock:
            return list(self._server.requests)

    def clear(self) -> None:
        with self._server._lock:
            self._server.requests.clear()

    def close(self) -> None:
        self._server.stop()
        self._thread.join(10)

    def __enter__(self) -> RangeHTTPServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------
# Fault-injecting proxy
# ---------------------------------------------------------------------------------------

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "expect",
}
_ERROR_CODES = {
    403: "AccessDenied",
    404: "NoSuchKey",
    429: "SlowDown",
    500: "InternalError",
    502: "BadGateway",
    503: "SlowDown",
}


@dataclass
class Rule:
    """What the proxy does to requests whose method is in ``methods`` and whose path
    matches the regex ``match``: ``mode`` is ``pass``, ``status`` (answer ``status`` with
    an S3 error document of ``code``),
    ``reset`` (forward, send ``fraction`` of the body, then RST), ``drop`` (RST at once,
    nothing forwarded: the store is down) or ``stall`` (no answer until released).
    ``count``: how many requests get the fault (None: all of them)."""

    mode: str = "pass"
    match: str = ""
    methods: tuple[str, ...] = ("GET",)
    count: int | None = None
    status: int = 503
    fraction: float = 0.5
    code: str | None = None  # the S3 error code in the body (default: by status)
    applied: int = 0
    released: threading.Event = field(default_factory=threading.Event)

    def claims(self, method: str, path: str) -> bool:
        """Whether this request gets the fault (and count it); caller holds the lock."""
        if self.mode == "pass" or method not in self.methods:
            return False
        if not re.search(self.match, path):
            return False
        if self.count is not None and self.applied >= self.count:
            return False
        self.applied += 1
        return True


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real endpoint
    server: _ProxyServer

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.server.proxy._handle(self)

    do_HEAD = do_PUT = do_POST = do_DELETE = do_GET  # noqa: N815

    def finish(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            super().finish()


class _ProxyServer(_TrackingServer):
    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        super().__init__(_ProxyHandler)


def _read_body(req: http.server.BaseHTTPRequestHandler) -> bytes | None:
    if req.headers.get("Transfer-Encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int(req.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while req.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                break
            parts.append(req.rfile.read(size))
            req.rfile.readline()
        return b"".join(parts)
    length = int(req.headers.get("Content-Length") or 0)
    return req.rfile.read(length) if length else None


class FaultProxy:
    """A fault-injecting HTTP proxy in front of ``upstream`` (``http://host:port``).

    ``set(mode, ...)`` installs a :class:`Rule` (and releases requests stalled by the old
    one); :attr:`latency` delays every request; :attr:`requests` is the log.
    """

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").rstrip("/").partition(":")
        self.upstream = (host, int(port or 80))
        self.latency = 0.0
        self._lock = threading.Lock()
        self._rule = Rule()
        self._requests: list[Request] = []
        self.inflight = 0
        self.max_inflight = 0
        self._closed = threading.Event()
        self._server = _ProxyServer(self)
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()

    # -- control ---------------------------------------------------------------

    def set(
        self,
        mode: str = "pass",
        match: str = "",
        *,
        methods=("GET",),
        count: int | None = None,
        status: int = 503,
        fraction: float = 0.5,
        code: str | None = None,
    ) -> Rule:
        assert mode in ("pass", "status", "reset", "drop", "stall"), mode
        rule = Rule(mode, match, tuple(methods), count, status, fraction, code)
        with self._lock:
            old, self._rule = self._rule, rule
        old.released.set()
        return rule

    def down(self, mode: str = "drop") -> Rule:
        """The store down for every request: ``drop`` (gone) or ``stall`` (hung)."""
        return self.set(mode, "", methods=("GET", "HEAD", "PUT", "POST", "DELETE"))

    def clear(self) -> None:
        """Pass everything, no latency, empty log, peak in-flight count reset."""
        self.set("pass")
        self.latency = 0.0
        with self._lock:
            self._requests.clear()
            self.max_inflight = self.inflight

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    @property
    def data_requests(self) -> list[Request]:
        """:attr:`requests` but those for an rw mount's writer lease object."""
        return [r for r in self.requests if not r.is_lease]

    def count(
        self,
        method: str | None = None,
        match: str = "",
        outcome: str | None = None,
        *,
        lease: bool = True,
    ) -> int:
        """How many logged requests match; ``lease=False`` leaves out the writer lease's."""
        return sum(
            1
            for r in (self.requests if lease else self.data_requests)
            if (method is None or r.method == method)
            and re.search(match, r.path)
            and (outcome is None or r.outcome == outcome)
        )

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            rule = self._rule
        rule.released.set()
        self._server.stop()
        self._thread.join(10)

    # -- handling ----------------------------------------------------------------

    def _log(self, req, outcome: str, nbytes: int = 0) -> None:
        with self._lock:
            self._requests.append(
                Request(req.command, req.path, req.headers.get("Range"), outcome, nbytes)
            )

    def _handle(self, req: _ProxyHandler) -> None:
        with self._lock:
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            rule = self._rule
            faulty = rule.claims(req.command, req.path)
        try:
            self._handle_one(req, rule if faulty else None)
        finally:
            with self._lock:
                self.inflight -= 1

    def _handle_one(self, req: _ProxyHandler, rule: Rule | None) -> None:
        if self.latency:
            time.sleep(self.latency)
        body = _read_body(req)
        if rule is not None and rule.mode == "drop":
            self._log(req, "drop")
            req.close_connection = True
            _reset(req.connection)
            return
        if rule is not None and rule.mode == "stall":
            self._log(req, "stall")
            # No answer until the test releases the rule or the proxy closes (bounded).
            rule.released.wait(MAX_WAIT_S)
            req.close_connection = True
            _reset(req.connection)
            return
        if rule is not None and rule.mode == "status":
            code = rule.status
            payload = (
                b""
                if req.command == "HEAD"
                else (
                    f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>'
                    f"{rule.code or _ERROR_CODES.get(code, 'Error')}</Code>"
                    f"<Message>injected by the test proxy</Message>"
                    f"<Resource>{req.path}</Resource></Error>"
                ).encode()
            )
            self._log(req, str(code))
            req.send_response(code)
            req.send_header("Content-Type", "application/xml")
            req.send_header("Content-Length", str(len(payload)))
            if code in (429, 503):
                req.send_header("Retry-After", "0")
            req.end_headers()
            req.wfile.write(payload)
            return
        headers = {k: v for k, v in req.headers.items() if k.lower() not in _HOP_BY_HOP}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.request(req.command, req.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        req.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() in _HOP_BY_HOP:
                continue
            if k.lower() == "content-length" and req.command != "HEAD":
                continue  # set below from the body we really send
            req.send_header(k, v)
        if req.command != "HEAD":
            req.send_header("Content-Length", str(len(data)))
        # Logged before the headers go out: an answer with no body (HEAD, PUT, DELETE) is
        # complete for the client with them, and it may look at the log at once.
        if req.command == "HEAD":
            self._log(req, str(resp.status))
            req.end_headers()
            return
        if rule is not None and rule.mode == "reset":
            part = data[: int(len(data) * rule.fraction)]
            self._log(req, "reset", len(part))
            req.end_headers()
            with contextlib.suppress(OSError):
                req.wfile.write(part)
                req.wfile.flush()
            req.close_connection = True
            _reset(req.connection)
            return
        self._log(req, str(resp.status), len(data))
        req.end_headers()
        req.wfile.write(data)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------
# Hierarchies written with zarr-python (to S3, a directory, or a zip file)
# ---------------------------------------------------------------------------------------

RNG_SEED = 20240611


# the sparse arrays: only these regions are written, their other chunks left to the fill value
SPARSE_WRITTEN = {"v2/sparse": np.s_[10:20, 40:60], "v3/sub/sparse_sharded": np.s_[0:8, 0:8]}


def _data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(RNG_SEED)
    data = {
        "v2/ints": rng.integers(-(2**31), 2**31 - 1, (200, 300), dtype="<i4"),
        "v2/grp/sub/floats": rng.standard_normal((37, 19, 23)).astype("<f8"),
        "v2/fortran": rng.integers(0, 2**16, (50, 70), dtype="<u2"),
        "v2/bigend": rng.standard_normal((333,)).astype(">f4"),
        "v2/sparse": np.full((90, 90), 7, dtype="<i2"),
        "v3/plain": rng.standard_normal((130, 70)).astype("<f8"),
        "v3/sub/sharded": rng.integers(0, 60000, (100, 90), dtype="<u2"),
        "v3/sub/sparse_sharded": np.full((64, 64), -1, dtype="<i4"),
        "v3/bigend": rng.integers(-1000, 1000, (45, 31), dtype="<i8"),
        "v3/bytes_only": rng.integers(0, 255, (1000,), dtype="u1"),
    }
    for key, region in SPARSE_WRITTEN.items():  # 0, 1, 2... in the written region
        part = data[key][region]
        part[...] = np.arange(part.size, dtype=part.dtype).reshape(part.shape)
    return data


DATA = _data()


def _write_data(group, key: str, **create) -> None:
    """Array ``DATA[key]`` in ``group``, named by the last part of ``key``; of a sparse array
    only its ``SPARSE_WRITTEN`` region."""
    from helpers.arrays import write_array

    name = key.rpartition("/")[2]
    write_array(group, name, DATA[key], region=SPARSE_WRITTEN.get(key, ...), **create)


def write_v2(store, consolidated: bool) -> None:
    """A Zarr v2 hierarchy: blosc/zlib/none, nested groups, order F, big-endian, sparse."""
    import numcodecs
    import zarr

    root = zarr.open_group(store, mode="w", zarr_format=2, attributes={"kind": "v2"})
    _write_data(
        root, "v2/ints", chunks=(64, 64), compressors=numcodecs.Blosc(cname="lz4", shuffle=1)
    )
    sub = root.create_group("grp").create_group("sub")
    _write_data(sub, "v2/grp/sub/floats", chunks=(10, 8, 9), compressors=numcodecs.Zlib(level=3))
    _write_data(root, "v2/fortran", chunks=(16, 32), order="F", compressors=None)
    _write_data(root, "v2/bigend", chunks=(100,))
    _write_data(root, "v2/sparse", chunks=(30, 30), fill_value=7)
    if consolidated:
        zarr.consolidate_metadata(store)


def write_v3(store, consolidated: bool) -> None:
    """A Zarr v3 hierarchy: zstd, a sharded array (partial shards, absent inner chunks),
    big-endian bytes codec, an uncompressed array."""
    import zarr
    from zarr.codecs import BytesCodec, ZstdCodec

    root = zarr.open_group(store, mode="w", zarr_format=3, attributes={"kind": "v3"})
    _write_data(root, "v3/plain", chunks=(32, 32), compressors=ZstdCodec(level=1))
    sub = root.create_group("sub")
    _write_data(sub, "v3/sub/sharded", chunks=(16, 16), shards=(64, 64))
    _write_data(sub, "v3/sub/sparse_sharded", chunks=(8, 8), shards=(32, 32), fill_value=-1)
    big_endian = BytesCodec(endian="big")
    _write_data(root, "v3/bigend", chunks=(20, 20), serializer=big_endian, compressors=None)
    _write_data(root, "v3/bytes_only", chunks=(128,), compressors=None)
    if consolidated:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "consolidated metadata is not in the v3 spec"
            zarr.consolidate_metadata(store)


V2_ARRAYS = ["ints", "grp/sub/floats", "fortran", "bigend", "sparse"]
V3_ARRAYS = ["plain", "sub/sharded", "sub/sparse_sharded", "bigend", "bytes_only"]


def expected_bytes(oracle_group, kind: str, name: str, file_path: str | os.PathLike) -> bytes:
    """What the mount must show for array ``name``: zarr-python's ``arr[:]`` (the oracle),
    in the byte order the file declares (``user.zarr.dtype``), C order.

    Also checks the oracle against the data the hierarchy was written from.
    """
    import json

    arr = oracle_group[name][:]
    label = os.getxattr(file_path, "user.zarr.dtype").decode()
    dtype = np.dtype(json.loads(label) if label.startswith("[") else label)
    np.testing.assert_array_equal(
        arr, DATA[f"{kind}/{name}"], err_msg=f"oracle disagrees on {kind}/{name}"
    )
    return np.ascontiguousarray(arr.astype(dtype)).tobytes()


def read_all(path: str | os.PathLike) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# ---------------------------------------------------------------------------------------
# The shared S3 hierarchies (written once per moto server)
# ---------------------------------------------------------------------------------------


@dataclass
class S3Data:
    endpoint: str  # the moto server itself (tests put a FaultProxy in front where needed)
    v2: str  # s3:// URL of a Zarr v2 hierarchy without consolidated metadata
    v3: str  # s3:// URL of a Zarr v3 hierarchy with consolidated metadata
    v3_plain: str  # the same v3 hierarchy without consolidated metadata

    def oracle(self, url: str):
        """zarr-python's view of the hierarchy at ``url`` (through s3fs)."""
        import zarr

        return zarr.open_group(zarr_s3_store(url, self.endpoint, read_only=True), mode="r")


_written: dict[int, S3Data] = {}


def s3_hierarchies(server: MotoS3) -> S3Data:
    """Write the read-only test hierarchies to ``server`` (once per server)."""
    found = _written.get(server.port)
    if found is None:
        base = f"s3://{BUCKET}/shared"
        found = S3Data(server.url, f"{base}/v2.zarr", f"{base}/v3.zarr", f"{base}/v3plain.zarr")
        write_v2(zarr_s3_store(found.v2, server.url), consolidated=False)
        write_v3(zarr_s3_store(found.v3, server.url), consolidated=True)
        write_v3(zarr_s3_store(found.v3_plain, server.url), consolidated=False)
        _written[server.port] = found
    return found


@pytest.fixture(scope="session", name="s3_data")
def s3_data_fixture(s3) -> S3Data:
    return s3_hierarchies(s3)


def tree(mountpoint: str | os.PathLike) -> tuple[set[str], set[str]]:
    """(directories, files) below ``mountpoint``, as relative paths."""
    dirs, files = set(), set()
    root = os.fspath(mountpoint)
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for d in dirnames:
            dirs.add(os.path.normpath(os.path.join(rel, d)))
        for f in filenames:
            files.add(os.path.normpath(os.path.join(rel, f)))
    return dirs, files


V2_DIRS = {"grp", "grp/sub"}
V3_DIRS = {"sub"}
