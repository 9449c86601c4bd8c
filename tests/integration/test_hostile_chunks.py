"""Decompression bombs: small stored chunks that inflate to, or claim, a gigabyte where the
chunk holds 1 MiB. Reads touching them fail with EIO and a log line naming the key; the
daemon, run under an address-space limit, stays within its cache budget plus 150 MiB and a
healthy sibling reads what zarr-python reads.

Arrays are written by zarr-python; the bombs replace their chunks afterwards.
"""

from __future__ import annotations

import errno
import os
import struct
import zlib

import numcodecs
import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.mounting import mounted
from helpers.oracle import read_file

from zarrmount.codecs.zstd_prefix import zstd

pytestmark = pytest.mark.mount

MIB = 1 << 20
BOMB = 1 << 30  # what the bombs inflate to
CACHE = 64 * MIB
LIMIT = ["prlimit", f"--as={4 << 30}", "--"]  # a bomb that got through fails, not the machine
SHAPE, CHUNK = (1 << 20,), (1 << 18,)  # 4 chunks of 1 MiB (uint32)


def _stream(compressor, size: int) -> bytes:
    """``size`` zero bytes through a streaming compressor, never held whole."""
    block = bytes(MIB)
    parts = [compressor.compress(block) for _ in range(size // MIB)]
    return b"".join(parts) + compressor.flush()


def _zstd(pledged: bool) -> bytes:
    compressor = zstd.ZstdCompressor()
    if pledged:
        compressor.set_pledged_input_size(BOMB)
    return _stream(compressor, BOMB)


def _patched(chunk: bytes, at: int) -> bytes:
    """A valid chunk whose header claims 2 GiB."""
    return chunk[:at] + struct.pack("<i", (1 << 31) - 1) + chunk[at + 4 :]


# name: (zarr format, compressor, the bomb from the valid stored chunk)
BOMBS = {
    "zlib": (2, numcodecs.Zlib(1), lambda _: _stream(zlib.compressobj(1), BOMB)),
    "gzip": (3, zarr.codecs.GzipCodec(level=1),
             lambda _: _stream(zlib.compressobj(1, wbits=31), BOMB)),
    "zstd-claims": (2, numcodecs.Zstd(1), lambda _: _zstd(pledged=True)),
    "zstd-stream": (3, zarr.codecs.ZstdCodec(level=1), lambda _: _zstd(pledged=False)),
    "lz4-header": (2, numcodecs.LZ4(), lambda c: _patched(c, 0)),
    "blosc-header": (2, numcodecs.Blosc("lz4"), lambda c: _patched(c, 4)),
}


def _chunk_path(root, name: str, fmt: int) -> str:
    return os.path.join(root, name, "0" if fmt == 2 else "c/0")


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    stores = {}
    for name, (fmt, compressor, bomb) in BOMBS.items():
        root = str(tmp_path_factory.mktemp(name) / "data.zarr")
        group = zarr.open_group(root, mode="w", zarr_format=fmt)
        for array in ("bomb", "healthy"):
            a = group.create_array(array, shape=SHAPE, chunks=CHUNK, dtype="<u4",
                                   compressors=compressor)
            a[:] = np.arange(SHAPE[0], dtype="<u4")
        path = _chunk_path(root, "bomb", fmt)
        with open(path, "rb") as f:
            valid = f.read()
        with open(path, "wb") as f:
            f.write(bomb(valid))
        stores[name] = root
    return stores


@pytest.mark.parametrize("name", BOMBS)
def test_bomb_fails_its_reads_within_the_budget(bombs, name):
    root = bombs[name]
    fmt = BOMBS[name][0]
    expected = zarr.open_array(root, path="healthy", mode="r")[:].tobytes()
    with mounted(root, [f"cache_size={CACHE // MIB}M"], tag="bomb", wrapper=LIMIT) as m:
        with rw_tools.RssSampler(m.proc.pid) as rss:
            fd = os.open(m.p("bomb"), os.O_RDONLY)
            try:
                for offset, size in ((0, MIB), (4096, 4096)):  # whole chunk, and a part
                    with pytest.raises(OSError) as e:
                        os.pread(fd, size, offset)
                    assert e.value.errno == errno.EIO
                assert os.pread(fd, 16, MIB) == expected[MIB : MIB + 16]  # chunk 1 is fine
            finally:
                os.close(fd)
            assert read_file(m.p("healthy")) == expected
        key = "bomb/0" if fmt == 2 else "bomb/c/0"
        assert m.wait_for_log(key), m.read_log()[-2000:]
        m.assert_alive()
    print(f"{name}: peak RSS {rss.peak_kib // 1024} MiB")
    assert rss.peak_kib * 1024 <= CACHE + 150 * MIB
