"""The remote store layer without a mount: fsspec stores (``memory://``, zip), retries and
deadlines, consolidated metadata, ``so.`` options, and reads through the FUSE-shaped API
with a remote store (range requests for shards, no listing on the read path)."""

from __future__ import annotations

import os
import threading
import time
import uuid

import fsspec
import numpy as np
import pytest
import trio
import zarr
from botocore.exceptions import NoCredentialsError, PartialCredentialsError
from helpers.store_doubles import ReadOnlyRemoteDouble

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.options import MountOptions, OptionError
from zarrmount.store import StoreError, open_store
from zarrmount.store.aio import AsyncStore
from zarrmount.store.local import LocalStore
from zarrmount.store.remote import FsspecStore
from zarrmount.store.retry import is_transient, with_retries


@pytest.fixture
def mem_root():
    """A fresh ``memory://`` prefix (the memory filesystem is global to the process)."""
    root = f"memory://zm-{uuid.uuid4().hex}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


# -- FsspecStore ---------------------------------------------------------------------


@pytest.mark.parametrize("key", ["../secret", "a/../../secret", "./a", "a/\0b"])
def test_keys_leaving_the_root_are_refused(mem_root, tmp_path, key):
    """A key from metadata must not reach beside the store's prefix (or its directory)."""
    fs = fsspec.filesystem("memory")
    fs.pipe(f"{mem_root}/secret", b"outside")
    fs.pipe(f"{mem_root}/store/a", b"inside")
    (tmp_path / "secret").write_bytes(b"outside")
    (tmp_path / "store").mkdir()
    for store in (FsspecStore(f"{mem_root}/store"), LocalStore(str(tmp_path / "store"))):
        for call in (store.get, store.list_dir, lambda k, s=store: s.get_range(k, 0, 3)):
            with pytest.raises(StoreError, match="leave the store root"):
                call(key)


def test_fsspec_store_key_value(mem_root):
    store = FsspecStore(mem_root, deadline_s=2)
    assert store.remote and store.deadline_s == 2
    assert store.get("a/b") is None
    store.set("a/b", b"0123456789")
    store.set("a/c/d", b"x")
    store.set("top", b"t")
    assert store.get("a/b") == b"0123456789"
    assert store.get_range("a/b", 2, 3) == b"234"
    assert store.get_range("a/b", -4, 4) == b"6789"  # from the end
    assert store.get_range("a/b", -40, 4) == b"0123"  # clipped to the start
    assert store.get_range("missing", -4, 4) is None
    assert store.list_dir("") == ["a", "top"]
    assert store.list_dir("a") == ["b", "c"]
    store.delete("a/b")
    store.delete("a/b")  # missing: not an error
    assert store.get("a/b") is None


def test_fsspec_store_errors(mem_root, monkeypatch):
    store = FsspecStore(mem_root, deadline_s=2)
    store.set("k", b"v")
    calls = []

    def flaky(path, start=None, end=None):
        calls.append(path)
        if len(calls) < 3:
            raise ConnectionResetError("reset by peer")
        return b"v"

    monkeypatch.setattr(store.fs, "cat_file", flaky)
    assert store.get("k") == b"v"
    assert len(calls) == 3

    def forbidden(path, start=None, end=None):
        calls.append(path)
        raise PermissionError("403 Forbidden")

    calls.clear()
    monkeypatch.setattr(store.fs, "cat_file", forbidden)
    t0 = time.monotonic()
    with pytest.raises(StoreError) as e:
        store.get("some/key")
    assert time.monotonic() - t0 < 0.5 and len(calls) == 1
    assert "some/key" in str(e.value)


def test_open_store_dispatch(tmp_path, mem_root):
    assert isinstance(open_store(str(tmp_path)), LocalStore)
    assert isinstance(open_store(f"file://{tmp_path}"), LocalStore)
    with pytest.raises(StoreError):
        open_store(str(tmp_path / "missing"))
    s = open_store(mem_root, {}, timeout=7)
    assert isinstance(s, FsspecStore) and s.deadline_s == 7
    with pytest.raises(StoreError):
        open_store("nosuchprotocol://x/y")
    import zipfile

    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("zarr.json", b"{}")
        z.writestr("a/b", b"bytes")
    for source in (str(path), f"zip::file://{path}"):
        z = open_store(source)
        assert isinstance(z, FsspecStore)
        assert z.get("a/b") == b"bytes" and z.get_range("a/b", 1, 2) == b"yt"
        assert z.get("nope") is None


def test_ranges_of_a_zip_read_from_many_threads_at_once_are_right(tmp_path):
    """A mount reads a zip source from many worker threads: Python 3.13's zipfile, read
    from several threads at once, returns bytes from the wrong place (a tenth of such
    reads here) unless the store lets one call in at a time."""
    import random
    import threading
    import zipfile

    values = {f"c/{i}": os.urandom(200_000) for i in range(16)}
    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w") as z:
        for key, value in values.items():
            z.writestr(key, value)
    store = open_store(str(path))
    wrong: list[tuple[str, int, int]] = []

    def read(seed: int) -> None:
        draw = random.Random(seed)
        for _ in range(200):
            key = draw.choice(list(values))
            start, length = draw.randrange(190_000), draw.randrange(1, 10_000)
            if store.get_range(key, start, length) != values[key][start : start + length]:
                wrong.append((key, start, length))

    threads = [threading.Thread(target=read, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong, f"{len(wrong)} of 1600 reads wrong, first {wrong[0]}"


# -- retries and deadlines -------------------------------------------------------------


class _Status(Exception):
    def __init__(self, status):
        super().__init__(f"HTTP {status}")
        self.status = status


class _Boto(Exception):
    def __init__(self, status):
        super().__init__(f"boto {status}")
        self.response = {"ResponseMetadata": {"HTTPStatusCode": status}}


@pytest.mark.parametrize(
    "error,transient",
    [
        (ConnectionResetError(), True),
        (TimeoutError(), True),
        (OSError("?"), True),
        (_Status(500), True),
        (_Status(503), True),
        (_Status(429), True),
        (_Status(408), True),
        (_Boto(503), True),
        (_Status(403), False),
        (_Status(404), False),
        (_Boto(403), False),
        (_Status(400), False),
        (FileNotFoundError(), False),
        (PermissionError(), False),
        (_Status(502), True),
        (_Status(501), False),
        (_Status(505), False),
        (_Boto(501), False),
        (NotImplementedError(), False),
        (PartialCredentialsError(provider="explicit", cred_var="aws_access_key_id"), False),
        (NoCredentialsError(), False),
        (OSError("Forbidden: b/o/key\nAccess denied."), False),  # gcsfs's 403
    ],
)
def test_is_transient(error, transient):
    assert is_transient(error) is transient


def test_with_retries_until_success():
    left = [4]

    def fn(_left):
        left[0] -= 1
        if left[0] > 0:
            raise _Status(503)
        return "ok"

    assert with_retries(fn, "k", deadline_s=10) == "ok"
    assert left[0] == 0


def test_with_retries_gives_up_at_the_deadline():
    calls = []

    def fn(left):
        calls.append((time.monotonic(), left))
        raise ConnectionResetError("reset")

    t0 = time.monotonic()
    with pytest.raises(ConnectionResetError):
        with_retries(fn, "k", deadline_s=0.5)
    took = time.monotonic() - t0
    assert took < 0.6 and len(calls) >= 3
    # each try is told the time left of the deadline, what a cancellable backend needs
    for at, left in calls:
        assert 0 <= left <= 0.5 and abs((t0 + 0.5 - at) - left) < 0.05


def test_with_retries_permanent_at_once():
    calls = []

    def fn(_left):
        calls.append(1)
        raise _Boto(403)

    with pytest.raises(_Boto):
        with_retries(fn, "k", deadline_s=10)
    assert calls == [1]


class _HangingStore(ReadOnlyRemoteDouble):
    """A remote store whose gets hang until released."""

    url = "hang://"

    def __init__(self, deadline_s):
        self.deadline_s = deadline_s
        self.release = threading.Event()

    def get(self, key, *, deadline_s=None):
        self.release.wait(30)
        return b"late"


def test_async_store_abandons_a_hung_request():
    store = _HangingStore(deadline_s=0.3)
    astore = AsyncStore(store, concurrency=4)

    async def main():
        t0 = time.monotonic()
        with pytest.raises(StoreError) as e:
            await astore.get("k")
        return time.monotonic() - t0, str(e.value)

    try:
        took, message = trio.run(main)
    finally:
        store.release.set()
    assert took < 0.3 + 1.0 + 0.5
    assert "no answer" in message
    assert astore.stats.errors == 1 and astore.stats.gets == 0


# -- options -----------------------------------------------------------------------------


def test_storage_options_and_remote_options():
    o = MountOptions()
    o.apply("so.endpoint_url=http://127.0.0.1:9000,so.anon=true,so.n=5")
    o.apply('so.config_kwargs={"retries":{"max_attempts":0}}')
    o.apply("so.n=6,timeout=2.5,max_fetches=3")
    assert o.storage_options == {
        "endpoint_url": "http://127.0.0.1:9000",
        "anon": True,
        "n": 6,
        "config_kwargs": {"retries": {"max_attempts": 0}},
    }
    assert o.timeout == 2.5 and o.max_fetches == 3
    assert MountOptions.from_json(o.to_json()) == o
    for bad in ("timeout=0", "timeout=-1", "timeout=x", "max_fetches=0", "so.=1"):
        with pytest.raises(OptionError):
            MountOptions().apply(bad)


# -- hierarchies in a remote store -----------------------------------------------------


@pytest.fixture
def mem_hierarchies(tmp_path, mem_root):
    """v3 (consolidated, sharded), v2 with .zmetadata and v2 without, put into memory://."""
    rng = np.random.default_rng(3)
    data = {
        "sharded": rng.integers(0, 1 << 16, (50, 70), dtype="<u2"),
        "plain": rng.standard_normal((20, 9)),
    }
    g = zarr.open_group(str(tmp_path / "v3"), mode="w", zarr_format=3)
    g.create_array("sub/sharded", shape=(50, 70), chunks=(8, 8), shards=(32, 32), dtype="<u2")[
        :
    ] = data["sharded"]
    g.create_array("plain", shape=(20, 9), chunks=(7, 4), dtype="<f8")[:] = data["plain"]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(tmp_path / "v3"))
    for name, consolidated in (("v2c", True), ("v2", False)):
        g2 = zarr.open_group(str(tmp_path / name), mode="w", zarr_format=2)
        g2.create_array("sub/plain", shape=(20, 9), chunks=(7, 4), dtype="<f8")[:] = data["plain"]
        if consolidated:
            zarr.consolidate_metadata(str(tmp_path / name))
    fs = fsspec.filesystem("memory")
    for name in ("v3", "v2c", "v2"):
        fs.put(str(tmp_path / name), f"{mem_root}/{name}", recursive=True)
    return mem_root, data


class _CountingFsspecStore(FsspecStore):
    """Records gets, range gets and listings (its own count: no private counter used)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.calls: list[tuple] = []

    def list_dir(self, prefix):
        self.calls.append(("list", prefix))
        return super().list_dir(prefix)

    @property
    def listings(self) -> int:
        return sum(1 for c in self.calls if c[0] == "list")

    def get(self, key, *, deadline_s=None):
        self.calls.append(("get", key))
        return super().get(key, deadline_s=deadline_s)

    def get_range(self, key, start, length, *, deadline_s=None):
        self.calls.append(("range", key, start, length))
        return super().get_range(key, start, length, deadline_s=deadline_s)


@pytest.mark.parametrize("name,lists", [("v3", 0), ("v2c", 0), ("v2", 2)])
def test_walk_lists_only_without_consolidated_metadata(mem_hierarchies, name, lists):
    root, _ = mem_hierarchies
    store = _CountingFsspecStore(f"{root}/{name}", deadline_s=5)
    dialect, node, _ = hierarchy.open_hierarchy(store)
    paths = sorted(n.path for n in hierarchy.walk(dialect, node))
    assert "sub" in paths
    assert store.listings == lists


def test_reads_through_a_remote_store(mem_hierarchies):
    """The FUSE-shaped API over a remote store: shards read by ranges (the index once),
    no listing of groups while reading, bytes equal to zarr-python's."""
    root, data = mem_hierarchies
    store = _CountingFsspecStore(f"{root}/v3", deadline_s=5)
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    fs = assemble(dialect, node, pipeline, MountOptions()).fs
    at_mount = len(store.calls)

    async def read(path):
        ino = 1
        for part in path.split("/"):
            ino = (await fs.lookup(ino, part)).ino
        fh = fs.open(ino, os.O_RDONLY)
        size = fs.getattr(ino).size
        return bytes(await fs.read(fh, 0, size))

    assert trio.run(read, "sub/sharded") == data["sharded"].tobytes()
    assert trio.run(read, "plain") == data["plain"].tobytes()
    stats = fs.stats()  # one listing of each array's chunks (their revalidation), no other
    assert store.listings == 0 and stats["store_lists"] == stats["cache_revalidations"] == 2
    shard_calls = [c for c in store.calls if "/sharded/c/" in c[1]]
    assert shard_calls and all(c[0] == "range" for c in shard_calls)
    index_reads = [c for c in shard_calls if c[2] < 0]
    assert len(index_reads) == len({c[1] for c in shard_calls}) == 6  # 2 x 3 shards
    assert fs.stats()["store_gets"] == len(store.calls) - at_mount
