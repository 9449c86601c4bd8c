"""zarr_implementations conformance data (written by zarr-python 2): every mounted array
reads byte-equal to the reference image."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest
from helpers import shared_dir

pytestmark = pytest.mark.mount

CONFORMANCE = shared_dir() / "conformance" / "zarr_implementations"
ZARR_ZR = CONFORMANCE / "examples" / "zarr.zr"
REFERENCE = CONFORMANCE / "data" / "reference_image.png"
EXPECTED_ARRAYS = {"raw", "zlib", "gzip", "blosc"}


@pytest.fixture(scope="module")
def reference_bytes() -> tuple[bytes, tuple[int, ...]]:
    if not ZARR_ZR.is_dir() or not REFERENCE.is_file():
        pytest.skip(f"conformance data not present under {CONFORMANCE}")
    from PIL import Image

    with Image.open(REFERENCE) as img:
        arr = np.asarray(img)
    return np.ascontiguousarray(arr).tobytes(), arr.shape


@pytest.fixture(scope="module")
def conformance_mount(reference_bytes):
    from helpers.mounting import mounted

    # the shared directory is read-only: it is mounted in place, nothing is copied
    with mounted(ZARR_ZR, tag="conf") as m:
        yield m


def test_every_array_equals_reference_image(conformance_mount, reference_bytes):
    want, shape = reference_bytes
    found = {}
    for dirpath, _dirs, files in os.walk(conformance_mount.path):
        for name in files:
            full = os.path.join(dirpath, name)
            if stat.S_ISREG(os.lstat(full).st_mode):
                found[os.path.relpath(full, conformance_mount.path)] = full
    assert set(found) >= EXPECTED_ARRAYS, sorted(found)
    bad = {}
    for rel, full in sorted(found.items()):
        with open(full, "rb") as f:
            got = f.read()
        if got != want:
            bad[rel] = (
                f"{len(got)} bytes, {'equal length' if len(got) == len(want) else 'len differs'}"
            )
        assert json.loads(os.getxattr(full, "user.zarr.shape")) == list(shape)
        assert os.getxattr(full, "user.zarr.dtype").decode() == "|u1"
    assert not bad, bad
    conformance_mount.assert_alive()
