"""The pyfuse3 adapter and the mount session."""
