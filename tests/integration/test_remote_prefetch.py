"""Sequential readers of a remote (S3) source: prefetch along the C-order walk, each chunk
fetched once. Sanity checks, not timing: counters and request logs, with latency added
between the daemon and S3 so that prefetch and reads overlap as they would for real."""

from __future__ import annotations

import os
import re
import subprocess
import time
import warnings

import numpy as np
import pytest
from helpers.mounting import mounted
from helpers.remote_servers import (  # noqa: F401 - fixtures
    BUCKET,
    FaultProxy,
    read_all,
    s3_fixture,
    zarr_s3_store,
)

from zarrmount.array.prefetch import LEAST_CHUNKS

pytestmark = pytest.mark.mount

MIB = 1 << 20
URL = f"s3://{BUCKET}/prefetch/data.zarr"
SEQ1D_CHUNK = 32768 * 8  # bytes: 256 KiB chunks of <f8


@pytest.fixture(scope="module")
def data(s3):
    """Three arrays with 32+ chunks each: 1-D, 2-D and sharded."""
    import zarr
    from zarr.codecs import ZstdCodec

    rng = np.random.default_rng(7)
    arrays = {
        "seq1d": rng.standard_normal(1 << 20),  # 8 MiB, 32 chunks
        "seq2d": rng.standard_normal((512, 1024)).astype("<f4"),  # 2 MiB, 8 x 4 chunks
        "seqsh": rng.integers(0, 1000, (256, 1024), dtype="<u2"),  # 4 shards, 64 inner
    }
    root = zarr.open_group(zarr_s3_store(URL, s3.url), mode="w", zarr_format=3)
    root.create_array("seq1d", shape=(1 << 20,), chunks=(32768,), dtype="<f8", compressors=None)[
        :
    ] = arrays["seq1d"]
    root.create_array(
        "seq2d", shape=(512, 1024), chunks=(64, 256), dtype="<f4", compressors=ZstdCodec(level=1)
    )[:] = arrays["seq2d"]
    root.create_array("seqsh", shape=(256, 1024), chunks=(32, 128), shards=(128, 512), dtype="<u2")[
        :
    ] = arrays["seqsh"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "consolidated metadata is not in the v3 spec"
        zarr.consolidate_metadata(zarr_s3_store(URL, s3.url))
    check = zarr.open_group(zarr_s3_store(URL, s3.url, read_only=True), mode="r")
    for name, arr in arrays.items():  # zarr-python is the oracle
        np.testing.assert_array_equal(check[name][:], arr)
    return {name: np.ascontiguousarray(a).tobytes() for name, a in arrays.items()}


@pytest.fixture
def proxy(s3):
    with FaultProxy(s3.url) as p:
        yield p


def _settled(m, expected: int, timeout: float = 10.0) -> int:
    """``store_gets`` once prefetches are done: waits for ``expected``, then makes sure
    nothing more comes."""
    deadline = time.monotonic() + timeout
    while m.stats()["store_gets"] < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    return m.stats()["store_gets"]


def _dd(src: str, dst) -> None:
    subprocess.run(
        ["dd", f"if={src}", f"of={dst}", "bs=1M", "status=none"], check=True, timeout=120
    )


@pytest.mark.parametrize("name,nchunks", [("seq1d", 32), ("seq2d", 32)])
def test_dd_with_latency_fetches_each_chunk_once(data, proxy, tmp_path, name, nchunks):
    proxy.latency = 0.05
    with mounted(URL, [f"so.endpoint_url={proxy.url}"], tag="pfdd") as m:
        assert m.stats()["store_gets"] == 0
        proxy.clear()
        proxy.latency = 0.05
        _dd(m.p(name), tmp_path / "out")
        assert (tmp_path / "out").read_bytes() == data[name]
        assert _settled(m, nchunks) == nchunks
        gets = [
            r.path
            for r in proxy.requests
            if r.method == "GET" and re.search(rf"/{name}/c/[\d/]+$", r.path)
        ]
        assert len(gets) == nchunks and len(set(gets)) == nchunks, sorted(gets)
        stats = m.stats()
        assert stats["store_errors"] == 0 and m.group_lists() == 0


def test_dd_sharded_with_latency(data, proxy, tmp_path):
    """Sharded: one index fetch per shard and one range request per inner chunk."""
    proxy.latency = 0.05
    with mounted(URL, [f"so.endpoint_url={proxy.url}"], tag="pfsh") as m:
        proxy.clear()
        proxy.latency = 0.05
        _dd(m.p("seqsh"), tmp_path / "out")
        assert (tmp_path / "out").read_bytes() == data["seqsh"]
        assert _settled(m, 64 + 4) == 64 + 4
        gets = [
            (r.path, r.range) for r in proxy.requests if r.method == "GET" and "/seqsh/c/" in r.path
        ]
        assert len(gets) == 68 and len(set(gets)) == 68
        assert all(rng for _, rng in gets)


def test_prefetch_keeps_between_its_least_and_a_quarter_of_the_cache_ahead(data, s3):
    """direct_io (the daemon sees exactly our reads), cache_size=8M: after three
    sequential 1 MiB reads the reader is sequential, and at least the least window
    (LEAST_CHUNKS chunks) and at most a quarter of the cache (2 MiB) ahead of it is
    fetched, however the measured pace set it between; the rest of the file, read on,
    is fetched once."""
    opts = [f"so.endpoint_url={s3.url}", "direct_io", "cache_size=8M"]
    with mounted(URL, opts, tag="pfwin") as m:
        fd = os.open(m.p("seq1d"), os.O_RDONLY)
        try:
            for i in range(3):
                assert os.pread(fd, MIB, i * MIB) == data["seq1d"][i * MIB : (i + 1) * MIB]
            read_chunks = 3 * MIB // SEQ1D_CHUNK  # 12
            most = (8 * MIB // 4) // SEQ1D_CHUNK  # 8
            fetched = _settled(m, read_chunks + LEAST_CHUNKS)
            assert read_chunks + LEAST_CHUNKS <= fetched <= read_chunks + most
            for i in range(3, 8):
                assert os.pread(fd, MIB, i * MIB) == data["seq1d"][i * MIB : (i + 1) * MIB]
            assert _settled(m, 32) == 32
        finally:
            os.close(fd)


def test_no_prefetch_for_a_random_reader(data, s3):
    opts = [f"so.endpoint_url={s3.url}", "direct_io"]
    with mounted(URL, opts, tag="pfrand") as m:
        fd = os.open(m.p("seq1d"), os.O_RDONLY)
        try:
            for off in (5 * MIB, 1 * MIB, 7 * MIB, 3 * MIB, 6 * MIB + 4096):
                assert os.pread(fd, 4096, off) == data["seq1d"][off : off + 4096]
        finally:
            os.close(fd)
        assert _settled(m, 5) == 5
