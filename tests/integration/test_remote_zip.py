"""Zip sources (a local path ending in ``.zip``, or a ``zip::file://`` URL) and ``file://``
URLs through real mounts. zarr-python reading the same data is the oracle."""

from __future__ import annotations

import os
import zipfile

import pytest
import zarr
from helpers.common import assert_tree_and_bytes
from helpers.mounting import mounted
from helpers.remote_servers import write_v2, write_v3

pytestmark = pytest.mark.mount


@pytest.fixture(scope="module")
def zips(tmp_path_factory):
    root = tmp_path_factory.mktemp("zips")
    # v3 written by zarr-python's own ZipStore (no consolidated metadata: listed in the zip)
    v3_zip = root / "v3.zip"
    store = zarr.storage.ZipStore(v3_zip, mode="w")
    try:
        write_v3(store, consolidated=False)
    finally:
        store.close()
    # v2: a directory store zipped with zipfile (deflated members), not consolidated
    v2_dir = root / "v2.zarr"
    write_v2(str(v2_dir), consolidated=False)
    v2_zip = root / "v2.zip"
    with zipfile.ZipFile(v2_zip, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for dirpath, _, files in os.walk(v2_dir):
            for name in files:
                full = os.path.join(dirpath, name)
                z.write(full, os.path.relpath(full, v2_dir))
    v3_dir = root / "v3.zarr"
    write_v3(str(v3_dir), consolidated=True)
    return root


def test_zipstore_v3_by_path(zips):
    path = zips / "v3.zip"
    oracle = zarr.open_group(zarr.storage.ZipStore(path, mode="r"), mode="r")
    with mounted(str(path), tag="zip3") as m:
        assert_tree_and_bytes(m, oracle, "v3")
        assert m.stats()["store_errors"] == 0


def test_zipped_v2_by_path_and_by_url(zips):
    oracle = zarr.open_group(str(zips / "v2.zarr"), mode="r")
    for source in (str(zips / "v2.zip"), f"zip::file://{zips / 'v2.zip'}"):
        with mounted(source, tag="zip2") as m:
            assert_tree_and_bytes(m, oracle, "v2", label=source)


def test_relative_zip_path(zips, monkeypatch):
    """A relative ``.zip`` path is resolved where the command runs."""
    monkeypatch.chdir(zips)
    with mounted("v3.zip", tag="ziprel") as m:
        assert os.path.getsize(m.p("plain")) == 130 * 70 * 8


def test_file_url(zips):
    oracle = zarr.open_group(str(zips / "v3.zarr"), mode="r")
    with mounted(f"file://{zips / 'v3.zarr'}", tag="fileurl") as m:
        assert_tree_and_bytes(m, oracle, "v3")
