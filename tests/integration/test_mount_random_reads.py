"""Property test: random ``os.pread`` (offset, size) on multi-dimensional arrays with small
odd chunks (edges, missing chunks, F order, "/" keys) equal the same slice of the oracle."""

from __future__ import annotations

import contextlib
import math
import os

import pytest
from helpers.oracle import assert_bytes_equal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.mount

TARGETS = [
    "multi/m1",  # >i2 (13,17,3) chunks (4,5,2)
    "multi/m2",  # <f8 F order, "/" keys, missing chunks, NaN fill
    "multi/m3",  # <u4 (37,29) chunks (5,7), missing chunks, bitshuffle blosc
    "multi/m4",  # <c8 4-d
    "multi/m5",  # structured, base64 fill, missing chunks
    "dtypes/struct_deep_F",  # hand-written nested structured, F order, "/" keys
    "filters/chain_partial",  # delta + shuffle + blosc, missing chunks
]


def boundary_offsets(shape, chunks, itemsize) -> list[int]:
    """Byte offsets where a C-order run crosses a chunk or an array edge on the last axis,
    and where each row of the last axis begins."""
    if not shape:
        return [0, itemsize]
    last, clast = shape[-1], chunks[-1]
    cuts = sorted({0, last} | set(range(clast, last, clast)))
    rows = math.prod(shape[:-1])
    row_bytes = last * itemsize
    out = set()
    for r in range(0, rows, max(1, rows // 16)):
        for c in cuts:
            out.add(r * row_bytes + c * itemsize)
    out.add(rows * row_bytes)
    return sorted(out)


@pytest.fixture(scope="module")
def targets(main_mount, main_hierarchy):
    fds = {}
    with contextlib.ExitStack() as stack:
        for path in TARGETS:
            case = main_hierarchy.arrays[path]
            fd = os.open(main_mount.p(path), os.O_RDONLY)
            stack.callback(os.close, fd)
            # O_DIRECT: the daemon itself sees the unaligned offset and size (no page cache)
            dfd = os.open(main_mount.p(path), os.O_RDONLY | os.O_DIRECT)
            stack.callback(os.close, dfd)
            bounds = boundary_offsets(case.shape, case.chunks, case.dtype.itemsize)
            fds[path] = ({"cached": fd, "direct": dfd}, case, bounds)
        yield fds


@settings(
    deadline=None,
    max_examples=80,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=False,
)
@given(data=st.data())
def test_random_pread_equals_oracle(live_main, targets, data):
    path = data.draw(st.sampled_from(TARGETS), label="array")
    fds, case, bounds = targets[path]
    fd = fds[data.draw(st.sampled_from(["cached", "direct"]), label="fd")]
    n = case.nbytes
    base = data.draw(st.one_of(st.integers(0, n + 64), st.sampled_from(bounds)), label="base")
    offset = max(0, base + data.draw(st.integers(-3, 3), label="jitter"))
    size = data.draw(
        st.one_of(st.integers(0, 64), st.integers(0, n + 128), st.just(n - offset + 5)),
        label="size",
    )
    size = max(0, size)
    got = os.pread(fd, size, offset)
    want = case.expected[offset : offset + size]  # past EOF -> short read, possibly empty
    assert len(got) == len(want), (path, offset, size, len(got), len(want))
    assert_bytes_equal(got, want, None)


def test_pread_edges_exhaustive_small(live_main, main_hierarchy):
    """Every single-byte and every 7-byte window of a small array, and reads past EOF."""
    case = main_hierarchy.arrays["edge/chunk_bigger"]
    fd = os.open(live_main.p("edge/chunk_bigger"), os.O_RDONLY)
    try:
        n = case.nbytes
        for off in range(n + 3):
            assert os.pread(fd, 1, off) == case.expected[off : off + 1]
            assert os.pread(fd, 7, off) == case.expected[off : off + 7]
        assert os.pread(fd, 1 << 20, 0) == case.expected
        assert os.pread(fd, 10, n) == b""
        assert os.pread(fd, 10, n + 4096) == b""
    finally:
        os.close(fd)
