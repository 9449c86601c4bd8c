"""``-o metrics=ADDR:PORT``: the mount's statistics as Prometheus metrics, served by the
``prometheus_client`` library (the ``metrics`` extra: ``zarrmount[metrics]``) on loopback
unless an address is given, with histograms of read latency and store request latency.
Counters are read when scraped, from the HTTP server's thread."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

# Statistics that go up and down; every other one only grows.
GAUGES = {
    "uptime_s",
    "cache_dirty_bytes",
    "cache_loading",
    "cache_used_bytes",
    "cache_capacity_bytes",
    "cache_entries",
    "disk_cache_used_bytes",
    "open_handles",
    "inodes",
    "journal_segments",
    "memory_rss_bytes",
    "memory_heap_bytes",
    "memory_python_blocks",
}
# Seconds: from a 4 KiB read served from the cache (tens of microseconds) to a stalled store.
BUCKETS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)


class MetricsUnavailable(Exception):
    """The ``prometheus_client`` library is not installed."""


def parse_address(text: str) -> tuple[str, int]:
    """``PORT``, ``ADDR:PORT`` or ``[ADDR]:PORT``; loopback when no address is given."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad port in {text!r}")
    return host or "127.0.0.1", int(port)


class _Statistics:
    """A collector reading the statistics when scraped."""

    def __init__(self, stats: Callable[[], dict[str, int]]) -> None:
        self.stats = stats

    def collect(self) -> Iterator:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        for name, value in self._read().items():
            metric = f"zarrmount_{name}"
            if name in GAUGES:
                yield GaugeMetricFamily(metric, name.replace("_", " "), value=value)
            else:
                yield CounterMetricFamily(metric, name.replace("_", " "), value=value)

    def _read(self) -> dict[str, int]:
        for _ in range(3):  # the counters change in the mount's thread meanwhile
            try:
                return self.stats()
            except RuntimeError:
                continue
        return {}


def serve(
    address: str, stats: Callable[[], dict[str, int]]
) -> tuple[Callable[[float], None], Callable[[float], None]]:
    """Serve the metrics at ``address``; returns what observes a read's and a store
    request's latency in seconds."""
    try:
        from prometheus_client import CollectorRegistry, Histogram, start_http_server
    except ImportError:
        raise MetricsUnavailable(
            "-o metrics needs the prometheus_client library: pip install 'zarrmount[metrics]'"
        ) from None
    registry = CollectorRegistry()
    registry.register(_Statistics(stats))
    reads = Histogram(
        "zarrmount_read_seconds", "time to answer a read", buckets=BUCKETS, registry=registry
    )
    store = Histogram(
        "zarrmount_store_request_seconds",
        "time a store request took, retries included",
        buckets=BUCKETS,
        registry=registry,
    )
    host, port = parse_address(address)
    start_http_server(port, addr=host, registry=registry)
    log.info("metrics at http://%s:%d/metrics", host, port)
    return reads.observe, store.observe
