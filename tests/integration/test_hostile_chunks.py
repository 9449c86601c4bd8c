"""Decompression bombs: small stored chunks that inflate to, or claim, a gigabyte where the
chunk holds 1 MiB. Reads touching them fail with EIO and a log line naming the key; the
daemon, run under an address-space limit, stays within its cache budget plus 150 MiB and a
healthy sibling reads what zarr-python reads.

Arrays are written by zarr-python; the bombs replace their chunks afterwards.
"""

from __future__ import annotations

import asyncio
import errno
import os
import struct
import zlib

import google_crc32c
import numcodecs
import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.mounting import mounted
from helpers.oracle import read_file
from zarr.core.buffer import default_buffer_prototype
from zarr.core.buffer.cpu import Buffer

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
    "gzip": (
        3,
        zarr.codecs.GzipCodec(level=1),
        lambda _: _stream(zlib.compressobj(1, wbits=31), BOMB),
    ),
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
            a = group.create_array(
                array, shape=SHAPE, chunks=CHUNK, dtype="<u4", compressors=compressor
            )
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
    _assert_contained(root, "bomb/0" if fmt == 2 else "bomb/c/0", expected, name)


@pytest.mark.parametrize("name", ["gzip", "zstd-stream"])
def test_a_bomb_in_an_icechunk_repository_fails_its_reads_within_the_budget(tmp_path, name):
    icechunk = pytest.importorskip("icechunk", reason="Icechunk 2 needs Python >= 3.12")
    icechunk.set_logs_filter("error")
    _, compressor, bomb = BOMBS[name]
    path = str(tmp_path / "repo")
    session = icechunk.Repository.create(icechunk.local_filesystem_storage(path)).writable_session(
        "main"
    )
    group = zarr.open_group(session.store, mode="w")
    for array in ("bomb", "healthy"):
        a = group.create_array(
            array, shape=SHAPE, chunks=CHUNK, dtype="<u4", compressors=compressor
        )
        a[:] = np.arange(SHAPE[0], dtype="<u4")
    expected = group["healthy"][:].tobytes()
    valid = asyncio.run(session.store.get("bomb/c/0", default_buffer_prototype())).to_bytes()
    asyncio.run(session.store.set("bomb/c/0", Buffer.from_bytes(bomb(valid))))
    session.commit("a bomb")
    _assert_contained(f"icechunk+file://{path}", "bomb/c/0", expected, f"icechunk {name}")


def _assert_contained(source: str, key: str, expected: bytes, name: str) -> None:
    """Reads of chunk 0 of ``bomb`` fail with EIO, the log names ``key``, the rest of it
    and ``healthy`` read right, and the daemon stays within its budget."""
    with mounted(source, [f"cache_size={CACHE // MIB}M"], tag="bomb", wrapper=LIMIT) as m:
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
        assert m.wait_for_log(key), m.read_log()[-2000:]
        m.assert_alive()
    print(f"{name}: peak RSS {rss.peak_kib // 1024} MiB")
    assert rss.peak_kib * 1024 <= CACHE + 150 * MIB


# -- shards: damaged indexes -----------------------------------------------------------

SHARD_INDEX = 4 * 16 + 4  # 2 x 2 inner chunks, (offset, length) as uint64, then crc32c


def _index(shard: bytes) -> np.ndarray:
    return np.frombuffer(shard[-SHARD_INDEX:-4], "<u8").reshape(2, 2, 2).copy()


def _with_index(shard: bytes, index: np.ndarray, crc: int | None = None) -> bytes:
    body = index.astype("<u8").tobytes()
    crc = google_crc32c.value(body) if crc is None else crc
    return shard[:-SHARD_INDEX] + body + struct.pack("<I", crc)


def _entry(shard: bytes, offset: int | None = None, length: int | None = None) -> bytes:
    index = _index(shard)
    index[1, 1] = (
        len(shard) + 100 if offset is None else offset,
        index[1, 1, 1] if length is None else length,
    )
    return _with_index(shard, index)


# name: (the damaged shard, is inner chunk (0, 0) still readable)
SHARDS = {
    "entry-past-the-end": (lambda s: _entry(s), True),
    "entry-of-2**63-bytes": (lambda s: _entry(s, offset=0, length=1 << 63), True),
    "entry-at-2**63": (lambda s: _entry(s, offset=1 << 63, length=16), True),
    "index-checksum-wrong": (lambda s: _with_index(s, _index(s), crc=0), False),
    "shorter-than-its-index": (lambda s: s[: SHARD_INDEX - 8], False),
}
ROWS = 256  # (256, 256) uint32, one shard of 2 x 2 inner chunks of 128 x 128


@pytest.mark.parametrize("name", SHARDS)
def test_damaged_shard_index_fails_only_what_it_must(tmp_path, name):
    damage, healthy_inner = SHARDS[name]
    root = str(tmp_path / "s.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=3)
    values = np.arange(ROWS * ROWS, dtype="<u4").reshape(ROWS, ROWS)
    for array in ("bad", "healthy"):
        a = group.create_array(
            array,
            shape=(ROWS, ROWS),
            chunks=(128, 128),
            shards=(ROWS, ROWS),
            dtype="<u4",
            compressors=None,
        )
        a[:] = values
    path = os.path.join(root, "bad", "c", "0", "0")
    with open(path, "rb") as f:
        shard = f.read()
    with open(path, "wb") as f:
        f.write(damage(shard))
    expected = zarr.open_array(root, path="healthy", mode="r")[:].tobytes()
    row = ROWS * 4
    # direct_io: reads are exactly the application's (through the page cache a page of
    # row 128 holds bytes of inner chunks (1, 0) and (1, 1) alike)
    with mounted(root, ["direct_io"], tag="shardidx", wrapper=LIMIT) as m:
        fd = os.open(m.p("bad"), os.O_RDONLY)
        try:
            with pytest.raises(OSError) as e:
                os.pread(fd, 64, 200 * row + 200 * 4)  # inner chunk (1, 1)
            assert e.value.errno == errno.EIO
            if healthy_inner:
                assert os.pread(fd, 64, 3 * row) == expected[3 * row : 3 * row + 64]
            else:
                with pytest.raises(OSError):
                    os.pread(fd, 64, 3 * row)
        finally:
            os.close(fd)
        assert read_file(m.p("healthy")) == expected
        assert m.wait_for_log("bad/c/0/0"), m.read_log()[-2000:]
        m.assert_alive()
