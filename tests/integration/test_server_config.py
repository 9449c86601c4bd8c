"""Through the kernel: a mount described by ``--config FILE`` (TOML) or given fsspec options
as ``--storage-options JSON``, against a moto S3 endpoint: the options reach fsspec, and
credentials (holding commas) never show in the log, the statistics, ``/proc/mounts`` or
the daemon's command line; a missing bucket is named as such; ``-u --config`` unmounts;
a mountpoint left dead by a killed daemon does not stop the next start."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import numpy as np
import pytest
from helpers.mounting import (
    is_mounted,
    mounted,
    new_mountpoint,
    remove_mountpoint,
    run_cli,
    wait_until,
)
from helpers.remote_servers import (  # noqa: F401 - fixtures
    BUCKET,
    expected_bytes,
    s3_data_fixture,
    s3_fixture,
)

pytestmark = pytest.mark.mount

# S3 access keys are letters and digits; a secret may hold anything (commas: no -o then)
KEY, SECRET = "AKIAZARRMOUNTTESTKEY", "se,cr=et/with,commas"


def _config(tmp_path, source: str, mountpoint: str, endpoint: str, **options) -> str:
    lines = [f'source = "{source}"', f'mountpoint = "{mountpoint}"', "[options]"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in options.items()]
    lines += [
        "[storage_options]",
        f'endpoint_url = "{endpoint}"',
        f'key = "{KEY}"',
        f'secret = "{SECRET}"',
    ]
    path = tmp_path / "data.conf"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return str(path)


def _no_credentials(*texts: str) -> None:
    for text in texts:
        assert KEY not in text and SECRET not in text and "with,commas" not in text


def test_config_file_mounts_and_credentials_never_show(s3_data, tmp_path):
    mnt = new_mountpoint("config")
    log = tmp_path / "z.log"
    conf = _config(tmp_path, s3_data.v2, mnt, s3_data.endpoint, log=str(log), cache_size="64M")
    try:
        done = run_cli(["--config", conf], timeout=60)
        assert done.returncode == 0, done.stderr
        assert is_mounted(mnt)
        path = os.path.join(mnt, "ints")
        with open(path, "rb") as f:
            assert f.read() == expected_bytes(s3_data.oracle(s3_data.v2), "v2", "ints", path)
        stats = run_cli(["--stats", "--config", conf, "--json"], timeout=60)
        assert stats.returncode == 0 and json.loads(stats.stdout)["store_gets"] >= 1
        pid = int(os.getxattr(mnt, "user.zarrmount.pid"))
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read().decode(errors="replace")
        with open("/proc/self/mounts") as f:
            mounts = f.read()
        un = run_cli(["-u", "--config", conf], timeout=60)
        assert un.returncode == 0, un.stderr
        assert not is_mounted(mnt)
        _no_credentials(log.read_text(), stats.stdout, cmdline, mounts, done.stderr)
        assert "so.key=(hidden)" in log.read_text()
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-uz", mnt], check=False)
        remove_mountpoint(mnt)


def test_storage_options_json_reach_fsspec(s3_data, tmp_path):
    options = json.dumps({"endpoint_url": s3_data.endpoint, "key": KEY, "secret": SECRET})
    mnt = new_mountpoint("so-json")
    try:
        done = run_cli([s3_data.v3, mnt, "--storage-options", options], timeout=60)
        assert done.returncode == 0, done.stderr  # without the endpoint: no such bucket
        assert os.listdir(mnt)
        assert run_cli(["-u", mnt], timeout=60).returncode == 0
    finally:
        remove_mountpoint(mnt)


def test_so_json_file_reaches_fsspec(s3_data, tmp_path):
    path = tmp_path / "so.json"
    options = {"endpoint_url": s3_data.endpoint, "key": KEY, "secret": SECRET}
    path.write_text(json.dumps(options))
    with mounted(s3_data.v2, [f"so_json={path}"], tag="so-file") as m:
        assert "ints" in os.listdir(m.path)
        _no_credentials(m.read_log())


def test_a_missing_bucket_is_named(s3_data):
    mnt = new_mountpoint("nobucket")
    try:
        done = run_cli(
            ["s3://no-such-bucket-here/x.zarr", mnt, "-o", f"so.endpoint_url={s3_data.endpoint}"],
            timeout=60,
        )
        assert done.returncode != 0 and "does not exist" in done.stderr, done.stderr
        assert not is_mounted(mnt)
    finally:
        remove_mountpoint(mnt)


def test_a_dead_mount_left_by_a_killed_daemon_does_not_stop_the_next_start(tmp_path):
    import zarr

    root = str(tmp_path / "d.zarr")
    zarr.create_array(root, shape=(8,), dtype="u1")[:] = np.arange(8)
    with mounted(root, tag="dead") as m:
        m.proc.send_signal(signal.SIGKILL)
        m.proc.wait()
        with pytest.raises(OSError):
            os.listdir(m.path)  # Transport endpoint is not connected
        again = run_cli([root, m.path], timeout=60)
        assert again.returncode == 0, again.stderr
        assert np.fromfile(os.path.join(m.path, "array"), dtype="u1").tolist() == list(range(8))
        assert run_cli(["-u", m.path], timeout=60).returncode == 0
        assert wait_until(lambda: not is_mounted(m.path), 10)


def test_u_and_cleanup_clear_a_dead_mount(tmp_path):
    import zarr

    root = str(tmp_path / "d.zarr")
    zarr.create_array(root, shape=(8,), dtype="u1")
    with mounted(root, tag="dead-u") as m:
        m.proc.send_signal(signal.SIGKILL)
        m.proc.wait()
        done = run_cli(["-u", m.path], timeout=60)
        assert done.returncode == 0, done.stderr
        assert not is_mounted(m.path) and os.path.isdir(m.path)
        assert run_cli(["--cleanup", m.path], timeout=60).returncode == 0  # nothing to do
