"""An array whose codec chain builds but cannot decode what it encodes is hidden with the
reason (never shown as a file whose every read fails); its siblings are not."""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest
import zarr
from numcodecs.abc import Codec

from zarrmount import hierarchy
from zarrmount.format.model import HiddenNode
from zarrmount.store.local import LocalStore


class _Broken(Codec):
    """Encodes as zlib does; decoding always fails (a codec's bug, as met in the wild)."""

    codec_id = "zarrmount-test-broken"

    def encode(self, buf):
        return numcodecs.Zlib().encode(buf)

    def decode(self, buf, out=None):
        raise ValueError("destination buffer too small")


@pytest.fixture(autouse=True)
def broken_codec():
    numcodecs.register_codec(_Broken)
    yield
    numcodecs.registry.codec_registry.pop(_Broken.codec_id, None)


def test_a_chain_that_cannot_decode_hides_only_its_array(tmp_path):
    root = tmp_path / "g.zarr"
    group = zarr.open_group(str(root), mode="w", zarr_format=2)
    group.create_array(
        "good", shape=(100,), chunks=(10,), dtype="<i4", compressors=numcodecs.Zlib()
    )
    group["good"][:] = np.arange(100, dtype="<i4")
    group.create_array("bad", shape=(100,), chunks=(10,), dtype="<i4", compressors=numcodecs.Zlib())
    doc = json.loads((root / "bad" / ".zarray").read_text())
    doc["compressor"] = {"id": _Broken.codec_id}
    (root / "bad" / ".zarray").write_text(json.dumps(doc))

    dialect, group_node, _ = hierarchy.open_hierarchy(LocalStore(str(root)))
    children = {c.name: c.node for c in dialect.children(group_node)}
    assert not isinstance(children["good"], HiddenNode)
    assert isinstance(children["bad"], HiddenNode)
    assert "cannot decode what they encode" in children["bad"].reason
    assert "destination buffer too small" in children["bad"].reason
