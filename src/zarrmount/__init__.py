"""zarrmount: mount a Zarr hierarchy as a FUSE filesystem."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("zarrmount")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "unknown"
