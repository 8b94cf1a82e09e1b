"""A cache of per-file check results, keyed by content (ruff's cache, for config tables).

A pre-commit hook or an audit re-checks mostly unchanged files. The diagnostics of a table
depend only on its bytes, its path and the run's configuration; the run's configuration is
hashed into a *run key* (tilefit's own code and data files, the selected rules, the targets,
the estimator and the installed Triton version, per-file ignores), and each file's results are
stored under the SHA-256 of its bytes. A changed file, rule, device file or setting misses.

The cache is one JSON file per run key under ``<cache root>/results/`` (``TILEFIT_CACHE_DIR``;
empty turns caching off, as does ``--no-cache``), written atomically at the end of a run. Fixes
are never cached: runs that plan fixes bypass it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from .cachedir import cache_root
from .model import Diagnostic, Position, Severity, Span

FORMAT = 1
_SEVERITY = {s.value: s for s in Severity}


def _code_fingerprint() -> str:
    """Sizes and modification times of tilefit's code and data files (cheap: stat only)."""
    import tilefit
    import tilefit.device_db
    import tilefit.rules

    h = hashlib.sha256(tilefit.__version__.encode())
    for root in {Path(tilefit.__file__).parent, Path(tilefit.rules.__file__).parent,
                 Path(tilefit.device_db.__file__).parent}:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".py", ".json")):
                    st = os.stat(os.path.join(dirpath, name))
                    h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def run_key(engine, settings, opts) -> str:
    from .smem.analytic import installed_triton_version

    rules = sorted(r.code for scope in engine._rules.values() for r in scope)
    targets = sorted(repr(d) for d in engine.extra_targets)
    est = engine.estimator
    parts = {
        "format": FORMAT, "code": _code_fingerprint(), "rules": rules, "targets": targets,
        "estimator": [est.mode, est.margin, getattr(est, "_triton_version", None), installed_triton_version()],
        "per_file_ignores": settings.per_file_ignores, "device_files": list(settings.extend_device_db)
        + list(getattr(opts, "device_files", []) or []),
    }
    for p in parts["device_files"]:
        try:
            st = os.stat(p)
            parts.setdefault("device_stats", []).append([p, st.st_size, st.st_mtime_ns])
        except OSError:
            pass
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _to_json(d: Diagnostic) -> list:
    s = d.span
    return [d.code, d.message, s.start.line, s.start.column, s.end.line, s.end.column, s.start_offset,
            s.end_offset, d.severity.value, d.pointer, d.target, dict(d.data), d.fingerprint]


def _from_json(path: str, r: list) -> Diagnostic:
    return Diagnostic(code=r[0], message=r[1], path=path,
                      span=Span(Position(r[2], r[3]), Position(r[4], r[5]), r[6], r[7]),
                      severity=_SEVERITY[r[8]], pointer=r[9], target=r[10], data=r[11], fingerprint=r[12])


class ResultCache:
    def __init__(self, key: str):
        root = cache_root()
        self.file = root / "results" / f"{key}.json" if root is not None else None
        self.entries: dict[str, list] = {}
        self.changed = False
        if self.file is not None and self.file.is_file():
            try:
                data = json.loads(self.file.read_text(encoding="utf-8"))
                if data.get("format") == FORMAT:
                    self.entries = data["files"]
            except (OSError, ValueError, KeyError, TypeError):
                self.entries = {}

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def get(self, path: str, digest: str) -> list[Diagnostic] | None:
        hit = self.entries.get(path)
        if hit is None or hit[0] != digest:
            return None
        try:
            return [_from_json(path, r) for r in hit[1]]
        except (TypeError, ValueError, IndexError):
            return None

    def put(self, path: str, digest: str, diagnostics) -> None:
        self.entries[path] = [digest, [_to_json(d) for d in diagnostics]]
        self.changed = True

    def save(self) -> None:
        if self.file is None or not self.changed:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".results-", dir=self.file.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"format": FORMAT, "files": self.entries}, fh, separators=(",", ":"))
            os.replace(tmp, self.file)
        except OSError:
            pass  # an unwritable cache only costs time
