"""Consolidated metadata opened again (a reload, a TTL): a document as it was is not parsed
again; a changed one is, and its nodes described as before are the ones listed before (the
mount's directories hold those: not twice); the metadata read before is let go. What is
listed is what zarr-python lists."""

from __future__ import annotations

import gc
import weakref

import trio
import zarr
from helpers.stores.core import quiet

from zarrmount import hierarchy
from zarrmount.assemble import assemble
from zarrmount.format.model import GroupNode
from zarrmount.options import MountOptions
from zarrmount.store.local import LocalStore
from zarrmount.vfs.table import ROOT_INODE


def _write(root: str, zarr_format: int) -> zarr.Group:
    with quiet():
        group = zarr.open_group(root, mode="w", zarr_format=zarr_format)
        sub = group.create_group("g")
        sub.create_array("a", shape=(3,), dtype="<i2")
        sub.create_array("b", shape=(2, 2), dtype="<f8")
        zarr.consolidate_metadata(root)
    return group


def _change(root: str, group: zarr.Group) -> None:
    with quiet():
        group["g"].create_array("c", shape=(5,), dtype="u1")
        group["g/b"].attrs["units"] = "m"
        zarr.consolidate_metadata(root)


def _children(dialect: hierarchy.Dialect, path: str) -> dict:
    return {c.name: c for c in dialect.children(GroupNode(path, 3))}


def _zarr_members(root: str, path: str) -> dict[str, dict]:
    with quiet():
        group = zarr.open_group(root, mode="r", use_consolidated=True)[path]
        return {name: dict(node.attrs) for name, node in group.members()}


def test_a_changed_document_keeps_the_nodes_described_as_before(tmp_path):
    root = str(tmp_path / "c.zarr")
    group = _write(root, 3)
    store = LocalStore(root)
    first, _, _ = hierarchy.open_hierarchy(store)
    before = _children(first, "g")
    assert hierarchy.open_hierarchy(store, first)[0] is first  # nothing parsed again
    _change(root, group)
    second, _, _ = hierarchy.open_hierarchy(store, first)
    after = _children(second, "g")
    expected = _zarr_members(root, "g")
    assert sorted(after) == sorted(expected) == ["a", "b", "c"]
    assert after["a"] is before["a"]
    assert after["b"] is not before["b"]
    assert after["b"].node.meta.attributes == expected["b"] == {"units": "m"}


def test_v2_consolidated_metadata_as_it_was_is_not_parsed_again(tmp_path):
    root = str(tmp_path / "c.zarr")
    group = _write(root, 2)
    store = LocalStore(root)
    first, _, _ = hierarchy.open_hierarchy(store)
    second, _, _ = hierarchy.open_hierarchy(store, first)
    assert second.consolidated is first.consolidated
    _change(root, group)
    third, _, _ = hierarchy.open_hierarchy(store, second)
    assert third.consolidated is not first.consolidated
    assert sorted(_children(third, "g")) == sorted(_zarr_members(root, "g"))


def test_a_reload_lets_go_of_the_metadata_read_before(tmp_path):
    root = str(tmp_path / "c.zarr")
    group = _write(root, 3)
    dialect, node, pipeline = hierarchy.open_hierarchy(LocalStore(root))
    fs = assemble(dialect, node, pipeline, MountOptions(sidecars=[])).fs
    read_before = weakref.ref(dialect.consolidated)
    del dialect

    async def main() -> None:
        top = await fs.table[ROOT_INODE].children()
        await fs.table[top["g"]].children()
        _change(root, group)
        tree = fs.table.tree
        done = await fs.reload(*await tree.reopen())
        assert sorted(done.added) == ["g/c"]
        listed = await fs.table[top["g"]].children()
        assert sorted(listed) == sorted(_zarr_members(root, "g"))

    trio.run(main)
    gc.collect()
    assert read_before() is None
