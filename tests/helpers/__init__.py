"""Helpers shared by the real-mount integration tests (mounting, test data, oracles)."""
