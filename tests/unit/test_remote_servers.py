"""The loopback servers of ``helpers.remote_servers`` do what the remote tests rely on:
ranges answered with 206, and each fault mode of the proxy (no mount, no S3 needed)."""

from __future__ import annotations

import http.client
import socket
import threading
import time

import pytest
from helpers.remote_servers import FaultProxy, RangeHTTPServer

BODY = bytes(range(256)) * 40  # 10240 bytes


@pytest.fixture
def site(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.bin").write_bytes(BODY)
    with RangeHTTPServer(tmp_path) as server:
        yield server


def _get(url: str, path: str, method: str = "GET", headers=None, timeout: float = 5):
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize(
    "rng,status,start,end",
    [
        (None, 200, 0, len(BODY)),
        ("bytes=0-0", 206, 0, 1),
        ("bytes=100-299", 206, 100, 300),
        ("bytes=10000-", 206, 10000, len(BODY)),
        ("bytes=-260", 206, len(BODY) - 260, len(BODY)),
        ("bytes=10000-99999", 206, 10000, len(BODY)),
    ],
)
def test_range_server_answers_ranges(site, rng, status, start, end):
    code, headers, body = _get(site.url, "/d/f.bin", headers={"Range": rng} if rng else {})
    assert code == status and body == BODY[start:end]
    assert int(headers["Content-Length"]) == end - start
    if status == 206:
        assert headers["Content-Range"] == f"bytes {start}-{end - 1}/{len(BODY)}"


def test_range_server_edges(site):
    assert _get(site.url, "/d/f.bin", headers={"Range": "bytes=20000-"})[0] == 416
    assert _get(site.url, "/d/missing")[0] == 404
    code, headers, body = _get(site.url, "/d/f.bin", "HEAD")
    assert code == 200 and headers["Content-Length"] == str(len(BODY)) and body == b""
    assert [(r.method, r.outcome) for r in site.requests][-3:] == [
        ("GET", "416"),
        ("GET", "404"),
        ("HEAD", "200"),
    ]


@pytest.fixture
def proxy(site):
    with FaultProxy(site.url) as p:
        yield p


def test_proxy_passes_and_records(proxy):
    assert _get(proxy.url, "/d/f.bin", headers={"Range": "bytes=5-9"})[2] == BODY[5:10]
    code, headers, _ = _get(proxy.url, "/d/f.bin", "HEAD")
    assert code == 200 and headers["Content-Length"] == str(len(BODY))  # HEAD keeps it
    assert [(r.method, r.range, r.outcome) for r in proxy.requests] == [
        ("GET", "bytes=5-9", "206"),
        ("HEAD", None, "200"),
    ]


def test_proxy_status_n_times_then_pass(proxy):
    rule = proxy.set("status", r"f\.bin$", status=503, count=2)
    assert [_get(proxy.url, "/d/f.bin")[0] for _ in range(3)] == [503, 503, 200]
    assert rule.applied == 2
    assert _get(proxy.url, "/d/f.bin", "HEAD")[0] == 200  # only GETs match by default
    proxy.set("status", r"other$", status=403)
    assert _get(proxy.url, "/d/f.bin")[0] == 200


def test_proxy_reset_mid_body(proxy):
    proxy.set("reset", r"f\.bin$", count=1, fraction=0.5)
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        _get(proxy.url, "/d/f.bin")
    assert _get(proxy.url, "/d/f.bin")[2] == BODY
    assert proxy.requests[0].outcome == "reset" and proxy.requests[0].nbytes == len(BODY) // 2


def test_proxy_stall_until_released(proxy):
    proxy.set("stall", r"f\.bin$")
    with pytest.raises((TimeoutError, socket.timeout)):
        _get(proxy.url, "/d/f.bin", timeout=0.5)
    # a stalled request ends (connection reset) once the rule changes
    errors = []

    def stalled():
        try:
            _get(proxy.url, "/d/f.bin", timeout=10)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=stalled)
    t.start()
    time.sleep(0.3)
    proxy.set("pass")
    t.join(5)
    assert not t.is_alive() and errors
    assert _get(proxy.url, "/d/f.bin")[2] == BODY


def test_proxy_latency_and_inflight(proxy):
    proxy.latency = 0.2
    threads = [threading.Thread(target=_get, args=(proxy.url, "/d/f.bin")) for _ in range(4)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert 0.2 <= time.monotonic() - t0 < 2
    assert proxy.max_inflight == 4


def test_close_stops_everything(tmp_path):
    before = threading.active_count()
    (tmp_path / "f").write_bytes(b"x")
    server = RangeHTTPServer(tmp_path)
    proxy = FaultProxy(server.url)
    proxy.set("stall", "f$")
    held = socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])))
    held.sendall(b"GET /f HTTP/1.1\r\nHost: x\r\n\r\n")
    idle = socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1])))
    time.sleep(0.2)
    proxy.close()
    server.close()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    held.close()
    idle.close()
    assert threading.active_count() <= before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])), timeout=1)
