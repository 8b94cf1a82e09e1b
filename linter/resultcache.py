"""A cache of per-file check results, keyed by content (ruff's cache, for config tables).

A pre-commit hook or an audit re-checks mostly unchanged files. The diagnostics of a table
depend only on its bytes, its path and the run's configuration; the run's configuration is
hashed into a *run key* (tilefit's own code and data files, the selected rules, the targets,
the estimator and the installed Triton version, per-file ignores), and each file's results are
stored under the SHA-256 of its bytes. A changed file, rule, device file or setting misses.

The cache is one JSON file per run key under ``<cache root>/results/`` (``TILEFIT_CACHE_DIR``;
empty turns caching off, as does ``--no-cache``), written atomically at the end of a run. Fixes
are never cached: runs that plan fixes bypass it.

A corpus audit repeats a few messages, pointers and data objects thousands of times (one
``targets`` list of 22 devices per diagnostic), so the file keeps each distinct one once, in
``values``, and a diagnostic is a flat row that refers to them by index: the file is a third of
the size and reads several times faster than one object per diagnostic.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .atomicfile import write_atomic
from .cachedir import cache_root
from .model import Diagnostic, Position, Severity, Span
from .readfile import read_bytes

FORMAT = 2
_SEVERITY = {s.value: s for s in Severity}


def _code_fingerprint() -> str:
    """Sizes and modification times of tilefit's code and data files (cheap: stat only)."""
    import tilefit
    import tilefit.device_db
    import tilefit.rules

    h = hashlib.sha256(tilefit.__version__.encode())
    # sorted: a set's order follows PYTHONHASHSEED, and identical runs got different keys
    for root in sorted({Path(tilefit.__file__).parent, Path(tilefit.rules.__file__).parent,
                        Path(tilefit.device_db.__file__).parent}):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".py", ".json")):
                    st = os.stat(os.path.join(dirpath, name))
                    h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def run_key(engine, settings, opts) -> str:
    from . import versions

    rules = sorted(r.code for scope in engine._rules.values() for r in scope)
    targets = sorted(repr(d) for d in engine.extra_targets)
    est = engine.estimator
    parts = {
        "format": FORMAT, "code": _code_fingerprint(), "rules": rules, "targets": targets,
        "estimator": [est.mode, est.margin, getattr(est, "_triton_version", None), versions.installed_triton()],
        "per_file_ignores": settings.per_file_ignores, "rule_options": getattr(engine, "rule_options", {}),
        "root": getattr(engine, "root", None),
        "device_files": list(settings.extend_device_db)
        + list(getattr(opts, "device_files", []) or []),
    }
    for p in parts["device_files"]:
        try:
            st = os.stat(p)
            parts.setdefault("device_stats", []).append([p, st.st_size, st.st_mtime_ns])
        except OSError:
            pass
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]


# A row: code, message (value index), start line, start column, end line, end column, start and
# end byte offsets, severity, pointer (value index), target, data (value index), fingerprint.
_MESSAGE, _POINTER, _DATA = 1, 9, 11


def _valid_row(r, values: list) -> bool:
    """A row as :meth:`ResultCache._row` writes it, naming values of the right types: a record
    read back is checked before it is trusted (a damaged or hand-edited file is rebuilt)."""
    if type(r) is not list or len(r) != 13:
        return False
    n = len(values)
    m, p, d = r[_MESSAGE], r[_POINTER], r[_DATA]
    if type(m) is not int or type(p) is not int or type(d) is not int or not (0 <= m < n and 0 <= p < n and 0 <= d < n):
        return False
    pointer = values[p]
    return (type(r[0]) is str and type(values[m]) is str
            and (pointer is None or type(pointer) is str and (not pointer or pointer[0] == "/"))
            and type(values[d]) is dict and all(type(x) is int for x in r[2:8]) and type(r[8]) is str
            and r[8] in _SEVERITY and (r[10] is None or type(r[10]) is str) and type(r[12]) is str)


def _valid_hit(hit, values: list) -> bool:
    return (type(hit) is list and len(hit) == 2 and type(hit[0]) is str and type(hit[1]) is list
            and all(_valid_row(r, values) for r in hit[1]))


def _fresh(data: dict) -> dict:
    """A diagnostic's own copy of a shared data object, its lists copied too (as the engine's)."""
    return {k: list(v) if type(v) is list else v for k, v in data.items()}


class ResultCache:
    def __init__(self, key: str):
        root = cache_root()
        self.file = root / "results" / f"{key}.json" if root is not None else None
        self.entries: dict[str, list] = {}  # path -> [digest, rows]
        self.values: list = []  # the distinct messages, pointers and data objects the rows name
        self._index: dict[str, int] | None = None  # a value's JSON text -> its index, on first put
        self.changed = False
        if self.file is not None and self.file.is_file():
            try:
                data = json.loads(read_bytes(self.file))
            except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested too deep
                data = None
            if (type(data) is dict and data.get("format") == FORMAT and type(data.get("files")) is dict
                    and type(data.get("values")) is list):
                self.entries, self.values = data["files"], data["values"]

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def get(self, path: str, digest: str) -> list[Diagnostic] | None:
        hit = self.entries.get(path)
        values = self.values
        if hit is None or not _valid_hit(hit, values):  # a bad record is a miss, and is rewritten
            return None
        if hit[0] != digest:
            return None
        return [Diagnostic(code=r[0], message=values[r[1]], path=path,
                           span=Span(Position(r[2], r[3]), Position(r[4], r[5]), r[6], r[7]),
                           severity=_SEVERITY[r[8]], pointer=values[r[9]], target=r[10],
                           data=_fresh(values[r[11]]), fingerprint=r[12])
                for r in hit[1]]

    def put(self, path: str, digest: str, diagnostics) -> None:
        self.entries[path] = [digest, [self._row(d) for d in diagnostics]]
        self.changed = True

    def _row(self, d: Diagnostic) -> list:
        s = d.span
        return [d.code, self._value(d.message), s.start.line, s.start.column, s.end.line, s.end.column,
                s.start_offset, s.end_offset, d.severity.value, self._value(d.pointer), d.target,
                self._value(dict(d.data)), d.fingerprint]

    def _value(self, value) -> int:
        if self._index is None:
            try:
                self._index = {json.dumps(v): i for i, v in enumerate(self.values)}
            except (TypeError, ValueError, RecursionError):  # a damaged file: start afresh
                self.entries, self.values, self._index = {}, [], {}
        key = json.dumps(value, default=str)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.values)
            self.values.append(json.loads(key))
        return i

    def _compacted(self) -> tuple[dict, list]:
        """The entries and values with only the values some row still names (a file whose rows
        name no value, e.g. of a damaged cache file, is left out)."""
        used: dict[int, int] = {}
        values: list = []
        entries = {}
        for path, hit in self.entries.items():
            if type(path) is not str or not _valid_hit(hit, self.values):
                continue
            digest, rows = hit
            new_rows = []
            for r in rows:
                r = list(r)
                for col in (_MESSAGE, _POINTER, _DATA):
                    i = used.get(r[col])
                    if i is None:
                        value = self.values[r[col]]
                        i = used[r[col]] = len(values)
                        values.append(value)
                    r[col] = i
                new_rows.append(r)
            entries[path] = [digest, new_rows]
        return entries, values

    def save(self) -> None:
        if self.file is None or not self.changed:
            return
        entries, values = self._compacted()
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.file, json.dumps({"format": FORMAT, "values": values, "files": entries},
                                               separators=(",", ":")))
        except OSError:
            pass  # an unwritable cache only costs time
