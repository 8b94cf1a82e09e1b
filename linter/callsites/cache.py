"""Compile results of scanned kernels, on disk next to the exact estimator's records.

The exact estimator's :class:`tilefit.smem.cache.CompileCache` keys records by a
``KernelSpec`` of one of our reference kernels. A kernel taken from a user's file has no spec: it
is identified by its scratch module (:mod:`tilefit.pysource.extract`, named by the hash of its
content) and the launch plan (argument kinds, values as Triton specialises them --
:mod:`tilefit.callsites.speckey` --, ``num_warps``, ``num_stages``, options).
Records use the same root, layout and format as the exact estimator's::

    <cache dir>/exact/v1/triton-<version>/<arch>/scratch-<module hash>/<sha256(plan key)>.json

with the same guarantees (JSON only, atomic writes, a record that does not match its key is
ignored). A warm lookup needs neither triton nor torch. The root is
:func:`tilefit.cachedir.cache_root` (``TILEFIT_CACHE_DIR=""`` turns the disk cache off).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from tilefit.atomicfile import write_atomic
from tilefit.smem.cache import SCHEMA, _safe, read_record
from tilefit import versions
from tilefit.smem.exact import ExactResult


class ScratchCompileCache:
    def __init__(self, cache_dir: str | os.PathLike, triton: str | None = None):
        self.root = Path(cache_dir).expanduser()
        self.triton = triton or versions.installed_triton() or "none"
        self.hits = 0
        self.misses = 0

    def path(self, module_hash: str, key: str, arch: str) -> Path:
        name = hashlib.sha256(key.encode()).hexdigest()[:32] + ".json"
        return (self.root / "exact" / f"v{SCHEMA}" / _safe(f"triton-{self.triton}") / _safe(arch)
                / f"scratch-{module_hash[:20]}" / name)

    def get(self, module_hash: str, key: str, arch: str) -> ExactResult | None:
        result = read_record(self.path(module_hash, key, arch), key, arch, self.triton, module_hash)
        if result is None:
            self.misses += 1
        else:
            self.hits += 1
        return result

    def put(self, module_hash: str, key: str, arch: str, result: ExactResult, kernel: str = "") -> Path | None:
        path = self.path(module_hash, key, arch)
        record = {"schema": SCHEMA, "key": key, "kernel": kernel, "arch": arch, "triton": self.triton,
                  "source_hash": module_hash, "result": result.to_json()}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
        except OSError:
            return None  # an unwritable cache only costs time
        return path
