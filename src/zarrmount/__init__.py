"""zarrmount: mount a Zarr hierarchy as a FUSE filesystem."""
