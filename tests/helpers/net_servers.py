"""Servers on loopback for the remote-store tests: S3 (moto, own process), a static HTTP
server that answers Range requests, and a fault-injecting HTTP proxy.

Everything listens on 127.0.0.1 and stops at teardown; request loops are bounded.
"""

from __future__ import annotations

import http.client
import http.server
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MOTO = """
import sys
from moto.server import ThreadedMotoServer
s = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
s.start()
print("PORT", s.get_host_and_port()[1], flush=True)
sys.stdin.read()
s.stop()
"""

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto S3 endpoint in its own process; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-c", MOTO],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = ""
        deadline = time.monotonic() + 60
        while not line.startswith("PORT ") and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                raise RuntimeError("moto server did not start")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with ``Range: bytes=a-b`` / ``bytes=-n`` answered by 206."""

    def log_message(self, *args) -> None:
        pass

    def send_head(self):
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if not rng or not os.path.isfile(path):
            return super().send_head()
        size = os.path.getsize(path)
        m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
        if not m:
            self.send_error(416)
            return None
        a, b = m.groups()
        if a == "":
            start, end = max(size - int(b), 0), size - 1
        else:
            start, end = int(a), min(int(b) if b else size - 1, size - 1)
        if start >= size:
            self.send_error(416)
            return None
        f = open(path, "rb")  # noqa: SIM115 - closed by copyfile's caller
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        self._remaining = end - start + 1
        return f

    def copyfile(self, source, outputfile):
        remaining = getattr(self, "_remaining", None)
        if remaining is None:
            return super().copyfile(source, outputfile)
        outputfile.write(source.read(remaining))


@contextmanager
def range_http_server(directory: str) -> Iterator[str]:
    handler = lambda *a, **k: _RangeHandler(*a, directory=directory, **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class FaultProxy:
    """An HTTP proxy in front of ``upstream`` whose behaviour tests switch at run time.

    Modes: ``pass``; ``fail503`` (the next ``count`` GETs of keys matching ``match`` get
    503); ``reset`` (the next ``count`` matching GETs send half the body, then drop the
    connection); ``forbid`` (matching GETs get 403); ``stall`` (matching GETs never get an
    answer until the proxy stops); ``latency`` (every request waits ``delay`` s first).
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.mode, self.match, self.count, self.delay = "pass", "", 0, 0.0
        self.hits = 0
        self.stop = threading.Event()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                proxy.handle(self)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward  # noqa: N815

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def set(self, mode: str, match: str = "", count: int = 0, delay: float = 0.0) -> None:
        self.mode, self.match, self.count, self.delay, self.hits = mode, match, count, delay, 0

    def _faulty(self, req) -> bool:
        if req.command != "GET" or self.match not in req.path:
            return False
        if self.mode in ("fail503", "reset") and self.hits >= self.count:
            return False
        self.hits += 1
        return True

    def handle(self, req) -> None:
        if self.delay:
            time.sleep(self.delay)
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else None
        faulty = self.mode != "pass" and self._faulty(req)
        if faulty and self.mode == "stall":
            self.stop.wait(120)
            req.close_connection = True
            return
        if faulty and self.mode in ("fail503", "forbid"):
            code = 503 if self.mode == "fail503" else 403
            payload = (
                f"<Error><Code>{'SlowDown' if code == 503 else 'AccessDenied'}</Code>"
                f"<Message>injected</Message></Error>"
            ).encode()
            req.send_response(code)
            req.send_header("Content-Type", "application/xml")
            req.send_header("Content-Length", str(len(payload)))
            req.end_headers()
            req.wfile.write(payload)
            return
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        headers = {k: v for k, v in req.headers.items() if k.lower() != "host"}
        conn.request(req.command, req.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        req.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                req.send_header(k, v)
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        if faulty and self.mode == "reset" and req.command == "GET":
            req.wfile.write(data[: len(data) // 2])
            req.wfile.flush()
            req.close_connection = True
            req.connection.shutdown(2)
            return
        if req.command != "HEAD":
            req.wfile.write(data)
        conn.close()

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
