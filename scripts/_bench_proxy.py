"""A loopback TCP proxy standing for a distant object store, for scripts/bench (issue #41).

It forwards 127.0.0.1:PORT to an S3 server on loopback and follows HTTP/1.1 framing in
both directions, so that it can:

* add the round trip once to each *request* (before forwarding the bytes that begin a
  request line), never to each piece of traffic: delaying every chunk of an upload or a
  download charges a round trip per chunk and changes the ratios (shared/notes/
  test-tools.md); bodies flow at full speed;
* share one bandwidth budget among all connections (``link_bps``), so that a link-bound
  case is bound by the link and not by how many connections the client opens;
* stand for an outage: ``close_upstream`` (every connection reset, new ones reset at
  once), ``hang`` (connections accepted, nothing answered) and ``restore``;
* count requests by kind (GET, HEAD, PUT, LIST, ...) and the most in flight at once, so
  every row of the bench can say what it cost in requests.

It runs in a process of its own (``ProxyProcess``), told what to do over its stdin, so that
its forwarding does not share a Python lock with whatever the bench measures in-process.
"""

from __future__ import annotations

import collections
import contextlib
import json
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

RECV = 1 << 20
PACE = 64 << 10  # bytes sent per share of the link budget, so connections interleave
MAX_HEAD = 1 << 20


class Link:
    """One bandwidth budget shared by every connection in one direction: each send waits
    for its turn on a single virtual clock, so N connections get 1/N of the link each."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self.lock = threading.Lock()
        self.free_at = 0.0

    def take(self, nbytes: int) -> None:
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.free_at)
            self.free_at = start + nbytes / self.rate
            done = self.free_at
        time.sleep(max(0.0, done - time.monotonic()))


class Framer:
    """Follows the HTTP/1.1 messages of one direction of a connection: where each begins
    (the offsets ``feed`` returns) and, through the callbacks, each head and each end.

    ``body_of(head)`` says how the body after a head is framed: a byte count, ``"chunked"``
    or ``"close"`` (until the connection ends); None marks an informational response (1xx)
    that a final one follows. Anything unparseable turns framing off: the bytes still flow.
    """

    def __init__(
        self,
        body_of: Callable[[bytes], int | str | None],
        on_head: Callable[[bytes], None],
        on_end: Callable[[], None],
    ) -> None:
        self.body_of, self.on_head, self.on_end = body_of, on_head, on_end
        self.state = "idle"
        self.buf = bytearray()
        self.left = 0

    def feed(self, data: bytes) -> list[int]:
        starts: list[int] = []
        i = 0
        while i < len(data) and self.state != "off":
            if self.state == "idle":
                starts.append(i)
                self.state, self.buf = "head", bytearray()
            i = getattr(self, "_" + self.state)(data, i)
        return starts

    def _head(self, data: bytes, i: int) -> int:
        old = len(self.buf)
        self.buf += data[i : i + MAX_HEAD]
        end = self.buf.find(b"\r\n\r\n", max(0, old - 3))
        if end < 0:
            if len(self.buf) > MAX_HEAD:
                self.state = "off"
            return len(data)
        head = bytes(self.buf[: end + 4])
        i += end + 4 - old
        self.on_head(head)
        body = self.body_of(head)
        if body is None:
            self.state = "idle"  # informational: the final response follows
        elif body == "chunked":
            self.state, self.buf = "size", bytearray()
        elif body == "close":
            self.state = "rest"
        else:
            self.left = int(body)
            self._after_body()
        return i

    def _after_body(self) -> None:
        if self.left:
            self.state = "body"
        else:
            self.state = "idle"
            self.on_end()

    def _body(self, data: bytes, i: int) -> int:
        n = min(self.left, len(data) - i)
        self.left -= n
        if not self.left:
            self.state = "idle"
            self.on_end()
        return i + n

    def _rest(self, data: bytes, i: int) -> int:
        return len(data)

    def _size(self, data: bytes, i: int) -> int:
        """A chunk's size line (``chunked`` bodies): the chunk and its CRLF, or the last."""
        old = len(self.buf)
        self.buf += data[i : i + 256]
        end = self.buf.find(b"\r\n")
        if end < 0:
            if len(self.buf) > 1024:
                self.state = "off"
            return len(data)
        try:
            size = int(bytes(self.buf[:end]).split(b";")[0], 16)
        except ValueError:
            self.state = "off"
            return len(data)
        i += end + 2 - old
        if size == 0:
            self.state, self.buf = "trailer", bytearray(b"\r\n")
        else:
            self.state, self.left = "chunk", size + 2
        return i

    def _chunk(self, data: bytes, i: int) -> int:
        n = min(self.left, len(data) - i)
        self.left -= n
        if not self.left:
            self.state, self.buf = "size", bytearray()
        return i + n

    def _trailer(self, data: bytes, i: int) -> int:
        """Trailer fields up to the blank line that ends a chunked body."""
        old = len(self.buf)
        self.buf += data[i : i + 4096]
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return len(data)
        self.state = "idle"
        self.on_end()
        return i + end + 4 - old


def _header(head: bytes, name: bytes) -> bytes | None:
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip()
    return None


def _body_framing(head: bytes) -> int | str:
    if (_header(head, b"transfer-encoding") or b"").lower().endswith(b"chunked"):
        return "chunked"
    length = _header(head, b"content-length")
    return int(length) if length is not None else 0


LISTING = ("list-type=", "prefix=", "delimiter=", "continuation-token=", "marker=")


def request_kind(head: bytes) -> str:
    """GET, HEAD, PUT, DELETE, POST, or LIST: a GET of a bucket (path-style) with no query
    or a listing's parameters (``?location`` and its kind stay GETs)."""
    method, _, rest = head.partition(b" ")
    target = rest.split(b" ", 1)[0].decode("latin-1")
    path, _, query = target.partition("?")
    kind = method.decode("latin-1")
    bucket_only = "/" not in path.strip("/")
    if kind == "GET" and (
        "list-type=" in query or (bucket_only and (not query or any(p in query for p in LISTING)))
    ):
        return "LIST"
    return kind


class Counts:
    """Requests by kind, the most in flight at once, and bytes each way, since a reset."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.reset()

    def reset(self) -> dict[str, Any]:
        with self.lock:
            before = self.snapshot()
            self.kinds: collections.Counter[str] = collections.Counter()
            self.max_in_flight = self.in_flight
            self.up = self.down = 0
            return before

    def snapshot(self) -> dict[str, Any]:
        if not hasattr(self, "kinds"):
            return {}
        return {
            "kinds": dict(self.kinds),
            "max_in_flight": self.max_in_flight,
            "up": self.up,
            "down": self.down,
        }

    def begin(self, kind: str) -> None:
        with self.lock:
            self.kinds[kind] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def note(self, what: str) -> None:
        """Something that is not a request answered: a connection refused or left hung."""
        with self.lock:
            self.kinds[what] += 1

    def end(self, n: int = 1) -> None:
        with self.lock:
            self.in_flight -= n


class Connection:
    """One client connection and its upstream; the requests it has not had answered yet."""

    def __init__(self, proxy: Proxy, client: socket.socket) -> None:
        self.proxy, self.client = proxy, client
        self.upstream: socket.socket | None = None
        self.hung = proxy.mode == "hang"
        if self.hung:
            proxy.counts.note("hung connections")
        self.methods: collections.deque[bytes] = collections.deque()
        self.lock = threading.Lock()
        self.requests = Framer(_body_framing, self._request_head, lambda: None)
        self.responses = Framer(self._response_framing, lambda head: None, self._answered)

    def _request_head(self, head: bytes) -> None:
        with self.lock:
            self.methods.append(head.split(b" ", 1)[0])
        self.proxy.counts.begin(request_kind(head))

    def _response_framing(self, head: bytes) -> int | str | None:
        status = int(head.split(b" ", 2)[1])
        if 100 <= status < 200:
            return None
        with self.lock:
            method = self.methods[0] if self.methods else b""
        if method == b"HEAD" or status in (204, 304):
            return 0
        framing = _body_framing(head)
        if framing == 0 and _header(head, b"content-length") is None:
            return "close"
        return framing

    def _answered(self) -> None:
        with self.lock:
            if not self.methods:
                return
            self.methods.popleft()
        self.proxy.counts.end()

    def start(self) -> None:
        if not self.hung:
            try:
                self.upstream = socket.create_connection(("127.0.0.1", self.proxy.target))
            except OSError:
                self.close(reset=True)
                return
        threading.Thread(target=self._from_client, daemon=True).start()
        if self.upstream is not None:
            threading.Thread(target=self._from_upstream, daemon=True).start()

    def _from_client(self) -> None:
        """Client to store: the round trip before each request's first byte."""
        try:
            while data := self.client.recv(RECV):
                if self.hung or self.proxy.mode == "hang" or self.upstream is None:
                    if not self.hung:
                        self.proxy.counts.note("hung connections")
                    self.hung = True
                    continue  # swallowed: a store that never answers
                starts = self.requests.feed(data)
                cuts = sorted({0, *starts, len(data)})
                for a, b in zip(cuts, cuts[1:], strict=False):
                    if a in starts and self.proxy.latency:
                        time.sleep(self.proxy.latency)
                    self._send(self.upstream, data[a:b], self.proxy.up)
        except OSError:
            pass
        finally:
            self.close()

    def _from_upstream(self) -> None:
        """Store to client: at full speed, or at the shared link's pace."""
        assert self.upstream is not None
        try:
            while data := self.upstream.recv(RECV):
                if self.hung or self.proxy.mode == "hang":
                    self.hung = True
                    continue
                self.responses.feed(data)
                self._send(self.client, data, self.proxy.down)
        except OSError:
            pass
        finally:
            self.close()

    def _send(self, sock: socket.socket, data: bytes, link: Link) -> None:
        view = memoryview(data)
        for i in range(0, len(view), PACE if link.rate else len(view) or 1):
            piece = view[i : i + PACE] if link.rate else view
            link.take(len(piece))
            sock.sendall(piece)
        with self.proxy.counts.lock:
            if link is self.proxy.up:
                self.proxy.counts.up += len(data)
            else:
                self.proxy.counts.down += len(data)

    def close(self, reset: bool = False) -> None:
        """Both sockets shut; a reset (RST) when the store is to look refused."""
        with self.lock:
            unanswered, self.methods = len(self.methods), collections.deque()
        if unanswered:
            self.proxy.counts.end(unanswered)
        for s in (self.client, self.upstream):
            if s is None:
                continue
            with contextlib.suppress(OSError):
                if reset:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                # a close alone would not wake the pump blocked in recv on this socket
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        self.proxy.forget(self)


class Proxy:
    """The proxy itself: 127.0.0.1:``port`` forwarded to 127.0.0.1:``target``."""

    def __init__(self, target: int, latency: float, link_bps: float | None = None) -> None:
        self.target, self.latency = target, latency
        self.up, self.down = Link(link_bps), Link(link_bps)
        self.mode = "normal"
        self.counts = Counts()
        self.conns: set[Connection] = set()
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, client)
            if self.mode == "refuse":
                self.counts.note("refused connections")
                conn.close(reset=True)
                continue
            with self.lock:
                self.conns.add(conn)
            threading.Thread(target=conn.start, daemon=True).start()

    def forget(self, conn: Connection) -> None:
        with self.lock:
            self.conns.discard(conn)

    def set_link(self, link_bps: float | None) -> None:
        self.up.rate = self.down.rate = link_bps

    def close_upstream(self) -> None:
        """The store refuses: every open connection reset, every new one reset at once."""
        self.mode = "refuse"
        self._drop(lambda conn: True)

    def hang(self) -> None:
        """The store never answers: connections are accepted, requests swallowed."""
        self.mode = "hang"

    def restore(self) -> None:
        """The store is back; connections left hung are reset so clients open new ones."""
        self.mode = "normal"
        self._drop(lambda conn: conn.hung)

    def _drop(self, which: Callable[[Connection], bool]) -> None:
        with self.lock:
            doomed = [c for c in self.conns if which(c)]
        for conn in doomed:
            conn.close(reset=True)

    def close(self) -> None:
        self.server.close()
        self._drop(lambda conn: True)


def serve(target: int, latency: float, link_bps: float | None) -> None:
    """The proxy process: prints its port, then answers one JSON command a line."""
    proxy = Proxy(target, latency, link_bps)
    print(json.dumps({"port": proxy.port}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        reply: Any = None
        match cmd["cmd"]:
            case "counts":
                reply = proxy.counts.reset() if cmd.get("reset") else proxy.counts.snapshot()
            case "link":
                proxy.set_link(cmd["bps"])
            case "latency":
                proxy.latency = cmd["seconds"]
            case "close_upstream":
                proxy.close_upstream()
            case "hang":
                proxy.hang()
            case "restore":
                proxy.restore()
        print(json.dumps({"ok": True, "reply": reply}), flush=True)
    proxy.close()


class ProxyProcess:
    """The proxy in a child process, driven by the bench: the same verbs as ``Proxy``."""

    def __init__(self, target: int, latency: float, link_bps: float | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(target), str(latency), str(link_bps or 0)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lock = threading.Lock()
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line:
            self.close()
            raise RuntimeError("the latency proxy did not start")
        self.port: int = json.loads(line)["port"]
        self.url = f"http://127.0.0.1:{self.port}"

    def _ask(self, cmd: str, **kw: Any) -> Any:
        assert self.proc.stdin and self.proc.stdout
        with self.lock:
            self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the latency proxy exited")
        return json.loads(line)["reply"]

    def counts(self, reset: bool = True) -> dict[str, Any]:
        """Requests since the last reset (and a reset, unless told otherwise)."""
        return self._ask("counts", reset=reset)

    def reset(self) -> None:
        self._ask("counts", reset=True)

    def set_link(self, link_bps: float | None) -> None:
        self._ask("link", bps=link_bps)

    def set_latency(self, seconds: float) -> None:
        self._ask("latency", seconds=seconds)

    def close_upstream(self) -> None:
        self._ask("close_upstream")

    def hang(self) -> None:
        self._ask("hang")

    def restore(self) -> None:
        self._ask("restore")

    def close(self) -> None:
        """Ends the child (its stdin closed; killed by its PID if it lingers)."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                if self.proc.stdin:
                    self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> ProxyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def describe(counts: dict[str, Any]) -> str:
    """``GET 240, LIST 1; 10 at most in flight``: a row's requests, for the bench's lines."""
    kinds = counts.get("kinds", {})
    order = ["GET", "HEAD", "LIST", "PUT", "POST", "DELETE"]
    named = sorted(kinds, key=lambda k: (order.index(k) if k in order else len(order), k))
    text = ", ".join(f"{k} {kinds[k]}" for k in named) or "no requests"
    return f"{text}; {counts.get('max_in_flight', 0)} at most in flight"


if __name__ == "__main__":
    serve(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]) or None)
