"""zarrmount: mount a Zarr hierarchy as a FUSE filesystem."""


def __getattr__(name: str) -> str:
    """``__version__``, looked up when asked for: reading the package's metadata costs a
    short command (``zarrmount warm``) a fifth of its start."""
    if name != "__version__":
        raise AttributeError(f"module 'zarrmount' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("zarrmount")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"
