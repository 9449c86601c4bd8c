"""Shared fixtures. The real-mount fixtures start the installed ``zarrmount`` console script.

* ``mount_source(source, options=...)`` (fixture ``mount_factory``): a context-managed
  foreground mount (``zarrmount SOURCE MNT -f``), live once ``os.path.ismount`` is true;
  torn down with ``fusermount3 -u`` / ``-uz`` and, only if still alive, SIGKILL by PID.
* ``main_hierarchy`` / ``main_mount``: one big Zarr v2 hierarchy written once per session
  by zarr-python, mounted once.
* ``bad_hierarchy`` / ``bad_mount``: broken metadata, codecs, chunks and names.

Every ``Mount`` has ``read_log()`` / ``wait_for_log(needle)`` for the daemon's stderr log.
"""

from __future__ import annotations

import contextlib
import os
import sys

import pytest
from hypothesis import settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# gcsfs 2026 first asks a gRPC control plane for each bucket's layout, which the GCS
# emulator lacks (a minute per try): the tests' own gcsfs uses the JSON API alone.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

# Property tests draw the same examples on every run, so CI never fails on a draw it
# never made before; ZARRMOUNT_EXPLORE=1 draws new ones, to hunt for bugs.
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("ZARRMOUNT_EXPLORE") else "fixed")

from helpers import mounting  # noqa: E402
from helpers.common import mounted_hierarchy_fixtures  # noqa: E402


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("mount") is not None:
        reason = None
        if not os.path.exists("/dev/fuse"):
            reason = "/dev/fuse is missing"
        elif mounting.shutil.which("fusermount3") is None:
            reason = "fusermount3 is not installed"
        if reason:
            pytest.skip(f"real-mount test: {reason}")


@pytest.fixture(scope="session", autouse=True)
def _no_mount_left_behind(tmp_path_factory):
    """Daemon logs go to a pytest temporary directory. Safety net: after the session, no
    mount made by these tests may remain, nor the journals of their stores."""
    mounting.LOG_DIR = str(tmp_path_factory.mktemp("zarrmount-logs"))
    yield
    # only mountpoints made by this session: another session may be mounting concurrently
    mounting.cleanup_created_mountpoints()
    mounting.remove_journals_of(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def zarrmount_exe() -> str:
    exe = mounting.zarrmount_exe()
    assert os.path.exists(exe), f"{exe} missing: is the project installed in the venv?"
    return exe


@pytest.fixture
def mount_factory():
    """``mount_factory(source, options=(), **kw) -> Mount``; all unmounted after the test."""
    with contextlib.ExitStack() as stack:

        def make(source, options=(), **kw) -> mounting.Mount:
            return stack.enter_context(mounting.mounted(source, options, **kw))

        yield make


def _session_hierarchy(kind: str, filename: str) -> tuple:
    """The fixtures ``{kind}_hierarchy``, ``{kind}_mount`` and ``live_{kind}`` (the session
    mount, checked to be alive before and after the test: a clear failure if the daemon
    died in an earlier test) of the hierarchy ``helpers.zarrdata.build_{kind}`` writes."""

    def build(path):
        # zarrdata imports zarr-python: imported only once a test needs the hierarchy
        from helpers import zarrdata

        return getattr(zarrdata, f"build_{kind}")(path)

    return mounted_hierarchy_fixtures(
        build,
        f"zarr-{kind}",
        filename,
        kind,
        names=(f"{kind}_hierarchy", f"{kind}_mount", f"live_{kind}"),
        scope="session",
    )


main_hierarchy, main_mount, live_main = _session_hierarchy("main", "data.zarr")
bad_hierarchy, bad_mount, live_bad = _session_hierarchy("bad", "bad.zarr")
