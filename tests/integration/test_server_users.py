"""Through the kernel, as other users: on a shared ``rw,allow_other`` mount the kernel
checks the mode bits (``default_permissions``), so another user reads files of mode 0644
but cannot write them; a user without root mounts and unmounts its own store through
the setuid ``fusermount3``, and is told libfuse's reason when it asks for
``allow_other`` without ``user_allow_other`` in /etc/fuse.conf.

Debian's udev makes ``/dev/fuse`` mode 0666; these machines make it 0600, so the test of
an unprivileged mount opens it up for its duration (and puts the mode back)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import site
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import zarr
from helpers.mounting import is_mounted, mounted, remove_mountpoint, wait_until

pytestmark = pytest.mark.mount

USER = "nobody"
WAIT_S = 30.0


def _as_user(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", USER, "--", "env", *[f"{k}={v}" for k, v in (env or {}).items()], *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def shared_store(tmp_path):
    tmp_path.chmod(0o755)
    root = tmp_path / "shared.zarr"
    zarr.create_array(str(root), shape=(16, 16), chunks=(8, 8), dtype="<i4")[...] = np.arange(
        256, dtype="<i4"
    ).reshape(16, 16)
    return str(root)


def test_another_user_reads_but_cannot_write_a_shared_rw_mount(shared_store):
    with mounted(shared_store, ["rw", "allow_other"], tag="share") as m:
        m_dir = os.path.dirname(m.path)
        assert stat.S_IMODE(os.stat(m_dir).st_mode) & 0o005  # others may reach the mount
        path = m.p("array")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
        read = _as_user("/bin/sh", "-c", f"od -An -tx1 -N8 '{path}'")
        assert read.returncode == 0, read.stderr
        expected = zarr.open_array(shared_store, mode="r")[...].tobytes()[:8]
        assert bytes.fromhex(read.stdout.replace(" ", "").strip()) == expected
        write = _as_user("/bin/sh", "-c", f"printf xxxx | dd of='{path}' conv=notrunc")
        assert write.returncode != 0 and "Permission denied" in write.stderr
    assert np.array_equal(
        zarr.open_array(shared_store, mode="r")[...], np.arange(256).reshape(16, 16)
    )


@contextlib.contextmanager
def _fuse_device_for_all():
    """/dev/fuse as Debian's udev leaves it (0666) for the duration."""
    mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    os.chmod("/dev/fuse", 0o666)
    try:
        yield
    finally:
        os.chmod("/dev/fuse", mode)


def _user_env() -> dict[str, str]:
    """The project and its packages for the user, on the interpreter of _python."""
    import zarrmount  # noqa: F401 - where it is, is the user's PYTHONPATH

    packages = [p for p in site.getsitepackages() if os.path.isdir(p)]
    source = os.path.dirname(os.path.dirname(sys.modules["zarrmount"].__file__))
    return {"PYTHONPATH": ":".join([source, *packages]), "HOME": "/tmp"}


@contextlib.contextmanager
def _python():
    """An interpreter of our version the user can run: ours (pyenv's, under root's own
    home, which the user cannot enter) seen through a bind mount in /tmp; Debian's own
    where it is the same version. Yields it and the environment it needs (its library)."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if os.path.exists(f"/usr/bin/{version}"):
        yield f"/usr/bin/{version}", {}
        return
    seen = Path(tempfile.mkdtemp(prefix="zarrmount-it-python-"))
    seen.chmod(0o755)
    subprocess.run(["mount", "--bind", sys.base_prefix, str(seen)], check=True)
    try:
        yield str(seen / "bin" / version), {"LD_LIBRARY_PATH": str(seen / "lib")}
    finally:
        subprocess.run(["umount", str(seen)], check=False)
        if not os.path.ismount(seen):
            seen.rmdir()


@pytest.fixture
def user_dir():
    """A directory under /tmp the user can reach (pytest's own are root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="zarrmount-it-user-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(shutil.which("fusermount3") is None, reason="needs fusermount3")
def test_a_user_mounts_and_unmounts_its_own_store(user_dir):
    base = user_dir
    root = base / "own.zarr"
    zarr.create_array(str(root), shape=(10,), dtype="<u2")[:] = np.arange(10) * 3
    mnt = base / "mnt"
    mnt.mkdir()
    uid = pwd.getpwnam(USER).pw_uid
    for path in (base, mnt, *root.rglob("*"), root):
        os.chown(path, uid, -1)
    with _fuse_device_for_all(), _python() as (python, needs):
        env = {**_user_env(), **needs}
        zarrmount_cmd = [python, "-m", "zarrmount"]
        try:
            refused = _as_user(*zarrmount_cmd, str(root), str(mnt), "-o", "allow_other", env=env)
            assert refused.returncode != 0 and "user_allow_other" in refused.stderr, refused
            done = _as_user(*zarrmount_cmd, str(root), str(mnt), env=env)
            assert done.returncode == 0, done.stderr
            got = _as_user("/bin/sh", "-c", f"od -An -tu2 -v '{mnt}/array'")
            assert got.returncode == 0, got.stderr
            assert [int(v) for v in got.stdout.split()] == list(range(0, 30, 3))
            un = _as_user(*zarrmount_cmd, "-u", str(mnt), env=env)
            assert un.returncode == 0, un.stderr
            assert wait_until(lambda: not is_mounted(mnt), WAIT_S)
        finally:
            if is_mounted(mnt):
                subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
            with contextlib.suppress(OSError):
                remove_mountpoint(str(mnt))
