"""``scripts/setup-env`` (run by scripts/demo and scripts/test) on a machine where another
package manager holds the lock, as unattended upgrades do on a fresh machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parents[2] / "scripts" / "setup-env"
HOLD_S = 30
# Holds a lock the way apt and dpkg do (fcntl) or the way flock(1) does, then says so.
HOLDER = """
import fcntl, sys, time
f = open(sys.argv[1], "r+")
(fcntl.lockf if sys.argv[2] == "fcntl" else fcntl.flock)(f, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("apt-get") is None, reason="needs root and apt-get"
)


def hold(path: str, kind: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path, kind, str(HOLD_S)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "held\n"
    return proc


def test_setup_waits_for_the_package_managers_lock_then_succeeds(tmp_path):
    # dpkg-query says no package is installed, so set-up runs apt-get install (a no-op here:
    # they are installed) and must wait for both locks first.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dpkg-query").write_text("#!/bin/sh\nexit 1\n")
    (fake / "dpkg-query").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    holders = [hold("/var/lib/dpkg/lock-frontend", "flock"), hold("/var/lib/dpkg/lock", "fcntl")]
    try:
        done = subprocess.run([SETUP], env=env, capture_output=True, text=True, timeout=600)
        released = [h.poll() is not None for h in holders]
    finally:
        for h in holders:
            h.kill()
            h.wait()
    assert done.returncode == 0, done.stderr
    assert released == [True, True], "set-up finished while the lock was still held"
    assert "waiting for the package manager's lock, held by" in done.stderr, done.stderr
    for h in holders:
        assert f"{h.pid} (python" in done.stderr, done.stderr


FIND = SETUP.parent / "find-python"
PYENV = Path(os.environ.get("PYENV_ROOT", "/root/.pyenv")) / "versions"


def _find(path: str, pyenv_root: str) -> subprocess.CompletedProcess:
    env = {"PATH": path, "PYENV_ROOT": pyenv_root, "HOME": "/nonexistent"}
    return subprocess.run([FIND], capture_output=True, text=True, env=env, check=True)


def test_the_venv_python_is_the_newest_at_least_3_12_on_path_or_in_pyenv(tmp_path):
    """A python3.12 on PATH and a 3.13 in pyenv: the 3.13; with neither, python3 and a
    line saying what is missing."""
    older = sorted(PYENV.glob("3.12*/bin/python3.12"))
    newer = sorted(PYENV.glob("3.13*/bin/python3"))
    if not older or not newer:
        pytest.skip("needs pyenv's Python 3.12 and 3.13")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3.12").symlink_to(older[-1])
    pyenv = tmp_path / "pyenv" / "versions" / "3.13.0" / "bin"
    pyenv.mkdir(parents=True)
    (pyenv / "python3").symlink_to(newer[-1])
    found = _find(f"{bin_dir}:/usr/bin:/bin", str(tmp_path / "pyenv"))
    assert found.stdout.strip() == str(pyenv / "python3") and not found.stderr
    alone = _find(f"{bin_dir}:/usr/bin:/bin", "/nonexistent")
    assert alone.stdout.strip() == str(bin_dir / "python3.12")
    none = _find("/usr/bin:/bin", "/nonexistent")
    assert none.stdout.strip() == "/usr/bin/python3"
    assert "no Python >= 3.12" in none.stderr
