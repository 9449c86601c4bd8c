"""``ls -lR`` of a fresh mount of a remote hierarchy without consolidated metadata, as the
proxy in front of S3 sees it: a group's children's metadata documents are fetched at
once (several requests in flight), each with one GET and no HEAD before it, each once;
and the listing is zarr-python's members, each array's file of its C-order size.

HEAD requests would remain only where the hierarchy's root documents are revalidated
after ``metadata_ttl`` (one HEAD each, for their validators): the mounts here keep their
listings for the test's length, so none is expected at all.
"""

from __future__ import annotations

import collections
import math
import os
import re
import subprocess

import numpy as np
import pytest
import zarr
from helpers.common import fault_fixture, fault_proxy_fixture
from helpers.mounting import mounted
from helpers.remote_servers import BUCKET, s3_fixture, zarr_s3_store  # noqa: F401 - fixtures

pytestmark = pytest.mark.mount

LATENCY_S = 0.05  # per request: overlapping requests are in flight together
WIDE = 14  # arrays in the group "wide"
DOCUMENT = re.compile(r"/(zarr\.json|\.zarray|\.zgroup|\.zattrs)$")

proxy = fault_proxy_fixture()
fault = fault_fixture()


def _write(url: str, endpoint: str, fmt: int) -> None:
    """Groups ``wide`` (WIDE arrays of several dtypes and shapes), ``few/inner`` and an
    empty one, and an array at the root; written by zarr-python, not consolidated."""
    root = zarr.open_group(zarr_s3_store(url, endpoint), mode="w", zarr_format=fmt)
    wide = root.create_group("wide")
    dtypes = ("<i2", "<f8", "u1", "<u4", ">f4", "<i8", "b1")
    for i in range(WIDE):
        shape = (i + 2, 7) if i % 2 else (3 * i + 1,)
        arr = wide.create_array(f"a{i:02d}", shape=shape, dtype=dtypes[i % 7], chunks=shape)
        arr[...] = 1
    few = root.create_group("few")
    few.create_array("x", shape=(5, 6, 2), dtype="<f4", chunks=(2, 6, 2))[...] = 2.5
    few.create_group("inner").create_array("y", shape=(9,), dtype="<i4", chunks=(4,))[...] = 3
    root.create_group("empty")
    root.create_array("top", shape=(4, 4), dtype="<u2", chunks=(4, 4))[...] = 4


@pytest.fixture(scope="module")
def hierarchies(s3) -> dict[int, str]:
    urls = {fmt: f"s3://{BUCKET}/listing/v{fmt}.zarr" for fmt in (2, 3)}
    for fmt, url in urls.items():
        _write(url, s3.url, fmt)
    return urls


def _members(url: str, endpoint: str) -> dict[str, int | None]:
    """zarr-python's members below the root: an array's C-order size, None for a group."""
    root = zarr.open_group(zarr_s3_store(url, endpoint, read_only=True), mode="r")
    return {
        path: None
        if isinstance(node, zarr.Group)
        else math.prod(node.shape) * np.dtype(node.dtype).itemsize
        for path, node in root.members(max_depth=None)
    }


def _listed(output: str, top: str) -> dict[str, int | None]:
    """``ls -lRn`` output as paths below ``top``: a file's size, None for a directory."""
    found, where = {}, ""
    for line in output.splitlines():
        if line.endswith(":") and line.startswith(top):
            where = os.path.relpath(line[:-1], top)
            where = "" if where == "." else where
        elif line[:1] in ("-", "d"):
            mode, _, _, _, size, _, name = line.split(maxsplit=6)
            path = f"{where}/{name}" if where else name
            found[path] = None if mode.startswith("d") else int(size)
    return found


@pytest.mark.parametrize("fmt", [2, 3], ids=["v2", "v3"])
def test_recursive_listing_fetches_documents_at_once_without_head(hierarchies, s3, fault, fmt):
    url = hierarchies[fmt]
    options = [f"so.endpoint_url={fault.url}", "metadata_ttl=600", "negative_ttl=600"]
    with mounted(url, options, tag="lslr") as m:
        fault.clear()
        fault.latency = LATENCY_S
        assert len(os.listdir(m.p("wide"))) == WIDE
        wide_peak = fault.max_inflight
        ls = ["ls", "-lRn", "--time-style=+%s", m.path]  # one word for the time
        output = subprocess.run(ls, capture_output=True, text=True, check=True).stdout
        requests = fault.requests
    assert wide_peak >= 2, "the documents of wide's children were fetched one at a time"
    assert not [r for r in requests if r.method == "HEAD"]
    documents = collections.Counter(r.path for r in requests if DOCUMENT.search(r.path))
    assert documents and max(documents.values()) == 1, documents.most_common(3)
    assert {r.outcome for r in requests} <= {"200", "206", "404"}
    assert _listed(output, m.path) == _members(url, s3.url)
