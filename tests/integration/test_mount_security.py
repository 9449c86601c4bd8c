"""A mount is a security boundary: read-only mounts refuse every write path, rw mounts
change nothing but chunks, and other users get in only as the options say."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess

import numpy as np
import pytest
import zarr
from helpers import rw_tools
from helpers.mounting import mounted

pytestmark = pytest.mark.mount

NOBODY = 65534


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "s.zarr"
    group = zarr.open_group(root, mode="w", zarr_format=2)
    a = group.create_array("a", shape=(64,), chunks=(16,), dtype="<u2")
    a[:] = np.arange(64)
    group.create_group("g")
    return root


def tree_digest(root) -> dict[str, str]:
    """Every file below ``root`` (names and contents), to show nothing changed."""
    found = {}
    for dirpath, dirs, files in os.walk(root):
        found.update({os.path.relpath(os.path.join(dirpath, d), root): "/" for d in dirs})
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = hashlib.sha256(f.read()).hexdigest()
    return found


def write_paths(mnt: str) -> dict[str, object]:
    """Each way of changing a filesystem, as a call on the mounted tree."""
    a, g = os.path.join(mnt, "a"), os.path.join(mnt, "g")
    return {
        "open for writing": lambda: os.close(os.open(a, os.O_WRONLY)),
        "create": lambda: os.close(os.open(os.path.join(g, "new"), os.O_WRONLY | os.O_CREAT)),
        "truncate": lambda: os.truncate(a, 5),
        "chmod": lambda: os.chmod(a, 0o777),
        "chown": lambda: os.chown(a, NOBODY, NOBODY),
        "utime": lambda: os.utime(a, (0, 0)),
        "setxattr": lambda: os.setxattr(a, "user.zarr.dtype", b"<f8"),
        "removexattr": lambda: os.removexattr(a, "user.zarr.dtype"),
        "unlink": lambda: os.unlink(a),
        "rename": lambda: os.rename(a, os.path.join(g, "a")),
        "mkdir": lambda: os.mkdir(os.path.join(g, "d")),
        "rmdir": lambda: os.rmdir(g),
        "symlink": lambda: os.symlink("/etc/passwd", os.path.join(g, "l")),
        "link": lambda: os.link(a, os.path.join(g, "h")),
        "mknod": lambda: os.mknod(os.path.join(g, "fifo"), 0o600 | 0o010000),
    }


def test_read_only_mount_refuses_every_write_path(store):
    before = tree_digest(store)
    with mounted(store, tag="rosec") as m:
        for what, call in write_paths(m.path).items():
            with pytest.raises(OSError) as e:
                call()
            assert e.value.errno == errno.EROFS, f"{what}: {e.value}"
        m.assert_alive()
    assert tree_digest(store) == before


def test_rw_mount_changes_nothing_but_chunks(store):
    before = tree_digest(store)
    with rw_tools.rw_mount(str(store), tag="rwsec") as m:
        for what, call in write_paths(m.path).items():
            if what == "open for writing" or what == "utime":
                call()  # allowed: writes go to chunks, times are the file's own
                continue
            with pytest.raises(OSError) as e:
                call()
            assert e.value.errno in (
                errno.EPERM,
                errno.EINVAL,
                errno.EROFS,
                errno.EACCES,
                errno.ENOTSUP,
            ), f"{what}: {e.value}"
        m.assert_alive()
    after = tree_digest(store)
    assert after.pop(".zarrmount.lock")  # the writer's lock: the one file an rw mount adds
    assert after == before


def nobody_reads(path: str) -> bool:
    """Whether user nobody can read ``path`` (a system tool: our venv may be root's only)."""
    done = subprocess.run(["cat", path], capture_output=True, timeout=30, user=NOBODY, group=NOBODY)
    assert done.returncode == 0 or b"Permission denied" in done.stderr, done.stderr
    return done.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_other_users_get_in_only_with_allow_other(store):
    with mounted(store, tag="own") as m:
        assert not nobody_reads(m.p("a"))
    with mounted(store, ["allow_other"], tag="other") as m:
        assert nobody_reads(m.p("a"))  # files are 0444
    with mounted(store, ["allow_other", "umask=077"], tag="private") as m:
        assert not nobody_reads(m.p("a"))  # 0400 and root's: the mode bits rule
