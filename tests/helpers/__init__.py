"""Helpers shared by the real-mount integration tests (mounting, test data, oracles)."""

from pathlib import Path


def shared_dir() -> Path:
    """The team's shared/ folder: beside the repository (as CI has it), else /work/shared."""
    beside = Path(__file__).resolve().parents[3] / "shared"
    return beside if beside.is_dir() else Path("/work/shared")
