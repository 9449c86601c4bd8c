"""A read of an array of many chunks waits for no listing, through the kernel.

An array of 10,000 chunks in S3 (moto behind a logging proxy), written by zarr-python
in a few of them: single elements are read through a fresh mount, and again after the
TTLs have run out. The bytes equal zarr-python's, and the proxy's log shows no LIST of
the array's keys, only GETs of the chunks in the rows read (an absent chunk: a 404).
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
import zarr
from helpers.common import fault_fixture, fault_proxy_fixture
from helpers.mounting import mounted
from helpers.remote_servers import BUCKET, s3_fixture, zarr_s3_store  # noqa: F401

pytestmark = pytest.mark.mount

SHAPE, CHUNKS = (800, 1000), (8, 10)  # 10,000 chunks
TTL = 1

proxy = fault_proxy_fixture()
fault = fault_fixture()


@pytest.fixture(scope="module")
def many(s3) -> str:
    url = f"s3://{BUCKET}/nolist.zarr"
    group = zarr.open_group(zarr_s3_store(url, s3.url), mode="w")
    array = group.create_array("many", shape=SHAPE, chunks=CHUNKS, dtype="<f4", fill_value=-1)
    array[:16, :20] = np.arange(16 * 20, dtype="<f4").reshape(16, 20)  # 4 chunks stored
    return url


def _element(m, i: int, j: int) -> float:
    fd = os.open(m.p("many"), os.O_RDONLY)
    try:
        raw = os.pread(fd, 4, (i * SHAPE[1] + j) * 4)
    finally:
        os.close(fd)
    return float(np.frombuffer(raw, "<f4")[0])


def _lists(fault) -> list:
    """Listings of the array's keys (its group's own listing is made again after a TTL)."""
    return [r for r in fault.requests if "list-type" in r.path and "many" in r.path]


def test_single_elements_of_an_array_of_10000_chunks_need_no_listing(s3, fault, many):
    oracle = zarr.open_group(zarr_s3_store(many, s3.url, read_only=True), mode="r")["many"]
    options = [f"so.endpoint_url={fault.url}", f"metadata_ttl={TTL}", f"negative_ttl={TTL}"]
    with mounted(many, options, tag="nolist") as m:
        os.listdir(m.p())
        cells = [(3, 7), (500, 500), (9, 11)]
        got = [_element(m, i, j) for i, j in cells]
        time.sleep(TTL + 0.5)  # past every TTL: the next reads revalidate
        got += [_element(m, i, j) for i, j in cells]
        assert got == [float(oracle[i, j]) for i, j in cells * 2]
        assert not _lists(fault), _lists(fault)
        chunk_gets = {r.path for r in fault.requests if r.method == "GET" and "/c/" in r.path}
        rows = {i // CHUNKS[0] for i, _ in cells}  # a page of the file: a row of chunks
        assert {int(p.split("/c/")[1].split("/")[0]) for p in chunk_gets} == rows
