"""Small functions that write Zarr test stores, shared by the v2, v3 and draft builders.

* ``core``: chunk grids, the chunk-file writer (key, padding, encoding, oracle), JSON files,
  zarr-python writes with its warnings silenced;
* ``data``: deterministic test values;
* ``v2``: ``.zarray``/``.zattrs``/``.zgroup`` documents, arrays by hand or by zarr-python;
* ``v3``: ``zarr.json`` documents, arrays by hand or by zarr-python, the zarr-python oracle,
  shard rewriting;
* ``draft``: the May 2022 editor's-draft layout (entry point, ``meta/``, ``data/``).

The hierarchies themselves (which arrays, with which data) are tables of cases in
``helpers.zarrdata`` (v2) and ``helpers.v3_fixtures`` (v3 and the draft).
"""
