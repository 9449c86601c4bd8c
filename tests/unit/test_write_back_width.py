"""How many write-backs encode and store at once, without FUSE: a local store's four (the
encoders are the limit); a remote store's sixteen, their round trips overlapping (64 MiB
in 4 MiB chunks through a proxy adding 30 ms a request: 1.26x zarr-python's time with
four, 0.98x with sixteen), but never more per array than hold their encoded units within
an eighth of the cache, nor fewer than four."""

from __future__ import annotations

import zarr

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.cache.chunks import REMOTE_WRITE_BACKS, WRITE_BACKS
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.store.remote import FsspecStore


def _writers(store, cache: str):
    """The mount's cache and its arrays' writers, as an rw mount makes them."""
    dialect, node, pipeline = hierarchy.open_hierarchy(store)
    options = MountOptions()
    options.apply(f"rw,cache_size={cache}")
    mount = assemble(dialect, node, pipeline, options)
    arrays = {child.node.path: child.node for child in dialect.children(node)}
    return mount.cache, {name: mount.arrays.open(arrays[name]) for name in ("chunks", "shards")}


def _group(tmp_path) -> str:
    root = str(tmp_path / "g.zarr")
    group = zarr.open_group(root, mode="w", zarr_format=3)
    group.create_array("chunks", shape=(4096, 1024), chunks=(1024, 1024), dtype="<f4")
    group.create_array(  # shards of 64 MiB: an old and a new one held by each write-back
        "shards", shape=(4096, 4096), chunks=(256, 256), shards=(4096, 4096), dtype="<f4"
    )
    return root


def test_a_local_store_writes_back_four_at_once(tmp_path):
    cache, writers = _writers(LocalStore(_group(tmp_path)), "512M")
    assert cache.write_backs.total_tokens == WRITE_BACKS
    assert {w._turns.total_tokens for w in writers.values()} == {WRITE_BACKS}


def test_a_remote_store_writes_back_more_at_once_within_a_share_of_the_cache(tmp_path):
    root = _group(tmp_path)
    cache, writers = _writers(FsspecStore(f"file://{root}"), "512M")
    assert cache.write_backs.total_tokens == REMOTE_WRITE_BACKS == 16
    assert writers["chunks"]._turns.total_tokens == 16  # 16 x 4 MiB = an eighth of 512 MiB
    assert writers["shards"]._turns.total_tokens == WRITE_BACKS  # never fewer
    _, small = _writers(FsspecStore(f"file://{root}"), "128M")
    assert small["chunks"]._turns.total_tokens == WRITE_BACKS  # 16 MiB: four chunks
