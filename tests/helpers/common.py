"""Fixtures and checks that several real-mount test modules share.

* :func:`mounted_hierarchy_fixtures`: the write-once, mount-once, check-alive trio of
  fixtures that every module testing one shared hierarchy needs;
* :func:`fault_proxy_fixture`: a :class:`FaultProxy` in front of the session's moto S3;
* :func:`assert_listing_matches`: the mounted tree equals the hierarchy's groups and arrays;
  :func:`assert_not_found`, :func:`assert_regular_file`, :func:`assert_array_file`: what one
  node must look like;
* :func:`inspect_nodes`, :func:`hidden_node_problems`, :func:`shown_node_problems`: what
  ``zarrmount --inspect --json`` says about hidden and shown nodes;
* :func:`assert_tree_and_bytes`: a remote source's tree and bytes equal zarr-python's.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import pytest

from helpers.mounting import mounted, run_cli
from helpers.oracle import assert_bytes_equal, read_file
from helpers.remote_servers import (
    V2_ARRAYS,
    V2_DIRS,
    V3_ARRAYS,
    V3_DIRS,
    FaultProxy,
    expected_bytes,
    read_all,
    tree,
)

# ---------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------


def mounted_hierarchy_fixtures(
    build: Callable,
    dirname: str,
    filename: str,
    tag: str,
    *,
    names: tuple[str, str, str],
    scope: str = "module",
) -> tuple:
    """Three fixtures, named ``names`` = (hierarchy, mount, live): the hierarchy written once
    by ``build(<tmp dirname>/filename)``, mounted once, and that mount checked alive before
    and after each test (a daemon that died in an earlier test fails clearly, not as a
    puzzling read error). Assign them to module names so that pytest finds them."""
    hierarchy_name, mount_name, live_name = names

    @pytest.fixture(scope=scope, name=hierarchy_name)
    def hierarchy(tmp_path_factory):
        """The hierarchy, written once for the scope."""
        return build(tmp_path_factory.mktemp(dirname) / filename)

    @pytest.fixture(scope=scope, name=mount_name)
    def mount(request):
        """The hierarchy mounted once for the scope; unmounted at its end."""
        with mounted(request.getfixturevalue(hierarchy_name).root, tag=tag) as m:
            yield m

    @pytest.fixture(name=live_name)
    def live(request):
        """The shared mount, checked alive before and after the test."""
        m = request.getfixturevalue(mount_name)
        m.assert_alive()
        yield m
        m.assert_alive()

    return hierarchy, mount, live


def fault_proxy_fixture():
    """The module fixture ``proxy``: a pass-through :class:`FaultProxy` in front of moto, so
    that tests see (and can break) every request the daemon makes."""

    @pytest.fixture(scope="module", name="proxy")
    def proxy(s3):
        with FaultProxy(s3.url) as p:
            yield p

    return proxy


def fault_fixture():
    """The test fixture ``fault``: the module's ``proxy``, passing everything again (stalls
    released) before and after the test."""

    @pytest.fixture(name="fault")
    def fault(proxy):
        proxy.clear()
        yield proxy
        proxy.clear()

    return fault


# ---------------------------------------------------------------------------------------
# listing
# ---------------------------------------------------------------------------------------


def listed_kinds(mountpoint: str | os.PathLike) -> dict[str, str]:
    """Every path below ``mountpoint``: "dir", "file" (regular file) or "other"."""
    root = os.fspath(mountpoint)
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        rel = "" if rel == "." else rel
        for d in dirnames:
            seen[os.path.join(rel, d) if rel else d] = "dir"
        for f in filenames:
            full = os.path.join(dirpath, f)
            kind = "file" if stat.S_ISREG(os.lstat(full).st_mode) else "other"
            seen[os.path.join(rel, f) if rel else f] = kind
    return seen


def assert_listing_matches(mountpoint: str | os.PathLike, hierarchy) -> None:
    """Groups are directories, arrays regular files; nothing missing, nothing extra (the
    message names the differences instead of printing two huge dicts)."""
    expected = {p: "dir" for p in hierarchy.groups if p} | {p: "file" for p in hierarchy.arrays}
    seen = listed_kinds(mountpoint)
    missing = sorted(set(expected) - set(seen))
    extra = sorted(set(seen) - set(expected))
    wrong = sorted(p for p in set(expected) & set(seen) if expected[p] != seen[p])
    assert not missing and not extra and not wrong, (
        f"missing={missing[:20]} extra={extra[:20]} wrong_kind={wrong[:20]}"
    )


def assert_not_found(m, paths: Iterable[str]) -> None:
    """Each path fails ``stat`` with ENOENT: hidden nodes cannot even be looked up by name,
    not just left out of listings."""
    for path in paths:
        with pytest.raises(FileNotFoundError):
            os.stat(m.p(path))


def assert_regular_file(path: str | os.PathLike, nbytes: int) -> os.stat_result:
    """``path`` is a regular file of ``nbytes`` bytes (what an array must look like to
    tools that ``fread``); its ``stat`` for further checks."""
    st = os.stat(path)
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size == nbytes
    return st


def assert_array_file(path: str | os.PathLike, case) -> os.stat_result:
    """``path`` is a regular file of ``case.nbytes`` holding ``case.expected`` (the array's
    C-order bytes), read whole with plain ``read``; its ``stat`` for further checks."""
    st = assert_regular_file(path, case.nbytes)
    assert_bytes_equal(read_file(path), case.expected, case.dtype)
    return st


# ---------------------------------------------------------------------------------------
# zarrmount --inspect --json
# ---------------------------------------------------------------------------------------


def inspect_nodes(source: str | os.PathLike) -> dict[str, dict]:
    """The nodes ``zarrmount --inspect SOURCE --json`` reports, by path (it must succeed)."""
    res = run_cli(["--inspect", str(source), "--json"])
    assert res.returncode == 0, res.stderr
    return {n["path"]: n for n in json.loads(res.stdout)["nodes"]}


def hidden_node_problems(nodes: Mapping[str, dict], paths: Iterable[str]) -> list[str]:
    """How ``nodes`` misreport nodes that must be hidden: each must be listed, not shown,
    and carry a reason (a user must learn why a node is missing from the mount)."""
    problems = []
    for path in paths:
        node = nodes.get(path)
        if node is None:
            problems.append(f"{path!r}: not listed")
            continue
        if node.get("shown") is not False:
            problems.append(f"{path!r}: shown={node.get('shown')!r}")
        if not isinstance(node.get("reason"), str) or not node["reason"].strip():
            problems.append(f"{path!r}: no reason ({node.get('reason')!r})")
    return problems


def shown_node_problems(nodes: Mapping[str, dict], paths: Iterable[str]) -> list[str]:
    """How ``nodes`` misreport nodes that must be shown: listed, shown, without a reason."""
    problems = []
    for path in paths:
        node = nodes.get(path)
        if node is None or node.get("shown") is not True or "reason" in node:
            problems.append(f"{path!r}: expected shown without reason, got {node!r}")
    return problems


# ---------------------------------------------------------------------------------------
# remote sources (the hierarchies of helpers.remote_servers)
# ---------------------------------------------------------------------------------------

TREES = {"v2": (V2_DIRS, V2_ARRAYS), "v3": (V3_DIRS, V3_ARRAYS)}


def assert_arrays_read_back(m, oracle, kind: str, names: Iterable[str]) -> None:
    """Each array file, read whole through the mount, holds zarr-python's bytes."""
    for name in names:
        path = m.p(name)
        assert_bytes_equal(
            read_all(path), expected_bytes(oracle, kind, name, path), np.dtype(oracle[name].dtype)
        )


def assert_tree_and_bytes(m, oracle, kind: str, label: str = "") -> None:
    """The mount of a ``kind`` ("v2"/"v3") hierarchy of helpers.remote_servers lists exactly
    its groups and arrays, and every array reads back as zarr-python reads it."""
    dirs, arrays = TREES[kind]
    assert tree(m.path) == (dirs, set(arrays)), label
    assert_arrays_read_back(m, oracle, kind, arrays)
