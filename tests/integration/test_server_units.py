"""What a server install is made of, checked without installing or mounting anything:
``systemd-analyze verify`` accepts the template unit (as an instance) and the example .mount
unit; the template keeps out of a private mount namespace, where its FUSE mount would be
invisible to the host; every line of ``systemd/fstab.example`` and the example config file
parse with the mount option parser; ``scripts/install-system`` answers ``--help`` and
refuses bad prefixes before it touches anything."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from zarrmount.options import MountOptions

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "systemd"
INSTALL = ROOT / "scripts" / "install-system"
LINK = "/usr/local/bin/zarrmount"  # what install-system links and the units run
VERIFY_FLAGS = ["--man=no", "--generators=no"]  # no man pages looked up, no fstab read

# [Service] settings that give the unit a mount namespace of its own (systemd.exec(5); in
# systemd's source, exec_needs_mount_namespace()), with the values that do not.
NAMESPACING: dict[str, set[str]] = {
    name: {"", "no", "false", "0", "off"}
    for name in (
        "PrivateTmp",
        "PrivateDevices",
        "PrivateMounts",
        "PrivateIPC",
        "ProtectSystem",
        "ProtectHome",
        "ProtectKernelTunables",
        "ProtectKernelModules",
        "ProtectKernelLogs",
        "ProtectControlGroups",
        "DynamicUser",
        "MountAPIVFS",
        "ReadWritePaths",
        "ReadOnlyPaths",
        "InaccessiblePaths",
        "ExecPaths",
        "NoExecPaths",
        "BindPaths",
        "BindReadOnlyPaths",
        "TemporaryFileSystem",
        "RootDirectory",
        "RootImage",
        "MountImages",
        "ExtensionImages",
        "ExtensionDirectories",
        "LogNamespace",
    )
}
NAMESPACING["ProtectProc"] = {"", "default"}
NAMESPACING["ProcSubset"] = {"", "all"}
NAMESPACING["MountFlags"] = {"", "shared"}
# Options only fstab and mount(8) give: the daemon must accept and ignore them.
FSTAB_WORDS = [
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "_netdev",
    "user",
    "users",
    "nouser",
    "x-systemd.automount",
    "x-systemd.mount-timeout=30",
    "x-systemd.requires=network-online.target",
    "x-systemd.idle-timeout=600",
]


def unit_settings(path: Path) -> list[tuple[str, str, str]]:
    """``(section, key, value)`` of a unit file, in order (keys may repeat)."""
    section, settings = "", []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: not KEY=VALUE: {raw!r}"
        settings.append((section, key.strip(), value.strip()))
    return settings


@pytest.fixture(scope="module")
def systemd_analyze() -> str:
    """The ``systemd-analyze`` command; Debian's systemd package is installed if it is
    missing (as root, with apt-get), else the tests that need it are skipped."""
    exe = shutil.which("systemd-analyze")
    if exe is None:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            pytest.skip("systemd-analyze is missing; installing systemd needs root and apt-get")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=1200", "systemd"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, done.stdout + done.stderr
        exe = shutil.which("systemd-analyze")
        assert exe, "systemd is installed but systemd-analyze is not on PATH"
    return exe


def verify(systemd_analyze: str, unit: Path) -> None:
    """``systemd-analyze verify`` exits 0 and says nothing about ``unit``: it only warns
    (exit 0) about unknown keys and values it cannot parse."""
    done = subprocess.run(
        [systemd_analyze, "verify", *VERIFY_FLAGS, str(unit)],
        cwd=unit.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    about_unit = [line for line in output.splitlines() if unit.name in line]
    assert done.returncode == 0 and not about_unit, output


# --------------------------------------------------------------------------- systemd units


def test_template_unit_verifies_as_an_instance(systemd_analyze, tmp_path):
    if not os.access(LINK, os.X_OK):
        pytest.skip(f"{LINK} is missing: verify needs ExecStart's command (install-system)")
    unit = tmp_path / "zarrmount@data.service"
    shutil.copyfile(UNITS / "zarrmount@.service", unit)
    verify(systemd_analyze, unit)


def test_mount_unit_verifies_and_is_named_after_where(systemd_analyze, tmp_path):
    src = UNITS / "mnt-data.mount"
    where = dict((k, v) for s, k, v in unit_settings(src) if s == "Mount")["Where"]
    escape = shutil.which("systemd-escape")
    if escape is not None:
        name = subprocess.run(
            [escape, "-p", "--suffix=mount", where], capture_output=True, text=True, check=True
        ).stdout.strip()
        assert src.name == name, f"systemd loads {where} only from a unit named {name}"
    existed = os.path.lexists(where)
    unit = tmp_path / src.name
    shutil.copyfile(src, unit)
    verify(systemd_analyze, unit)  # Where= need not exist
    assert os.path.lexists(where) == existed, f"verify made {where}"


def test_template_unit_makes_no_private_mount_namespace():
    """A FUSE mount made inside a namespace of the unit's own is invisible to the host."""
    bad = []
    for section, key, value in unit_settings(UNITS / "zarrmount@.service"):
        allowed = NAMESPACING.get(key)
        if section == "Service" and allowed is not None and value.lower() not in allowed:
            bad.append(f"{key}={value}")
    assert not bad, f"these give the service a mount namespace of its own: {bad}"


def test_units_run_the_command_install_system_links():
    script = INSTALL.read_text()
    assert re.search(rf"^LINK={re.escape(LINK)}$", script, re.M), "install-system's LINK moved"
    ours = {"ExecStart", "ExecStop", "ExecStopPost"}  # ExecReload only signals the daemon
    commands = [
        (key, value) for _, key, value in unit_settings(UNITS / "zarrmount@.service") if key in ours
    ]
    assert {k for k, _ in commands} == ours
    for key, value in commands:
        assert value.lstrip("-").split()[0] == LINK, f"{key}={value}"


# --------------------------------------------------------------------------- fstab, config


def fstab_lines() -> list[str]:
    text = (UNITS / "fstab.example").read_text()
    return [s for s in (line.strip() for line in text.splitlines()) if s and s[0] != "#"]


def test_fstab_example_lines_parse():
    lines = fstab_lines()
    assert len(lines) >= 3
    for line in lines:
        fields = line.split()
        assert len(fields) == 6, line
        source, mountpoint, fstype, opts, dump, passno = fields
        assert fstype == "fuse.zarrmount", line
        assert mountpoint.startswith("/") and (dump, passno) == ("0", "0"), line
        MountOptions().apply(opts)  # raises OptionError on a word the daemon refuses
        # every user can read fstab: no credentials in it
        names = {o.partition("=")[0] for o in opts.split(",")}
        assert not names & {"so.key", "so.secret", "so.token", "so.password"}, line
    assert any("writable" in line.split()[3].split(",") for line in lines)


@pytest.mark.parametrize("word", FSTAB_WORDS)
def test_fstab_only_words_are_accepted(word):
    options = MountOptions()
    options.apply(word)
    assert options == MountOptions(), f"{word} changed an option"


def test_example_config_parses():
    with open(UNITS / "example.conf", "rb") as f:
        config = tomllib.load(f)
    assert isinstance(config["source"], str) and config["mountpoint"].startswith("/")
    options = MountOptions()
    for name, value in config["options"].items():
        options.apply(name if value is True else f"{name}={value}")
    assert options.read_only and options.allow_other and options.cache_size == 1 << 30
    assert isinstance(config["storage_options"], dict)


def test_example_config_loads_with_the_daemons_loader():
    config = pytest.importorskip("zarrmount.config", reason="this daemon has no --config")
    found = config.load(str(UNITS / "example.conf"))
    assert (found.source, found.mountpoint) == ("s3://bucket/path.zarr", "/mnt/data")
    assert found.options.read_only and found.options.cache_size == 1 << 30
    assert set(found.options.storage_options) == {"endpoint_url", "key", "secret"}


# --------------------------------------------------------------------------- install-system


def test_install_system_help():
    done = subprocess.run([INSTALL, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    for word in ("--prefix", "--extras", "--uninstall", "--force"):
        assert word in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("prefix", "reason"),
    [
        ("relative/dir", "must be an absolute path"),
        ("/opt/a/../b", "must be a plain path"),
        ("/usr", "is a system directory"),
        ("/", "is a system directory"),
        ("/usr/local/", "is a system directory"),
    ],
)
def test_install_system_refuses_bad_prefixes(prefix, reason, tmp_path):
    # --uninstall: if the checks ever went, it would still find no virtualenv there
    done = subprocess.run(
        [INSTALL, "--uninstall", "--prefix", prefix],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and reason in done.stderr, done.stderr
