"""One writer per store: a second rw mount of a source is refused, naming the holder,
unless forced; a killed daemon's lock never blocks the next mount."""

from __future__ import annotations

import os
import signal

import pytest
from helpers import mounting, rw_tools
from helpers.mounting import MountFailed

pytestmark = pytest.mark.mount


@pytest.fixture
def store(tmp_path):
    return rw_tools.make_store(tmp_path, "v3", rw_tools.SPECS["v3"])


def test_second_rw_mount_is_refused_naming_the_first(store):
    with rw_tools.rw_mount(store, tag="lock1") as first:
        with pytest.raises(MountFailed) as e, rw_tools.rw_mount(store, tag="lock2"):
            pass
        assert "mounted read-write already" in str(e.value)
        assert first.path in str(e.value)  # the holder: who has it and where
        with mounting.mounted(store.root, tag="lockro") as ro:  # readers are welcome
            assert os.listdir(ro.path) == ["v3"]  # the lock file is no node
        with rw_tools.rw_mount(store, ["nolock"], tag="lockforce") as forced:
            assert os.listdir(forced.path) == ["v3"]
        first.assert_alive()


def test_a_killed_writers_lock_does_not_block_the_next_mount(store):
    with rw_tools.rw_mount(store, tag="lockkill") as m:
        os.kill(m.proc.pid, signal.SIGKILL)
        assert rw_tools.wait_exit(m.proc, 10) == -signal.SIGKILL
        rw_tools.lazy_unmount_dead(m.path)
    with rw_tools.rw_mount(store, tag="lockagain") as again:
        assert os.listdir(again.path) == ["v3"]
