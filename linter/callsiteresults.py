"""The call-site results of a tree, reused while no file they were computed from changed.

A launch's verdict depends on more than its own file: the kernel, the wrapper that calls it,
the module constants and defaults it reads may each be in another module, and an autotune
list collects the launches of its kernel from the whole tree. So the results of a run's
Python files are kept together, with what they were computed from:

* the run's configuration (:func:`tilefit.resultcache.run_key`: tilefit's code and data, rules,
  targets, estimator, Triton version, ignores; plus the ``[tool.tilefit.kernels]`` table, the
  scenarios and whether coverage is counted);
* the SHA-256 of every file scanned: the files given and the files followed through imports.

A warm run over an unchanged tree takes the diagnostics, errors and coverage figures from the
record and parses nothing. Which files are unchanged is decided without reading them: a
per-file index (:class:`StatIndex`) keeps each file's size, ``mtime_ns``, ``ctime_ns`` and
inode with its digest, and a file whose four are the same is not read again. When any file
changed, the whole run is repeated (its compiles come from the compile cache).

Records live under ``<cache root>/callsites/v1/``: one file per run configuration and set of
paths (a new record replaces the old one), JSON only, written atomically; a record that does
not parse or does not match is a miss. A run with ``--allow-import`` (the imported modules may
import anything) or whose compiles timed out or crashed (the machine's load, not the kernel)
is not stored.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Sequence

from tilefit.atomicfile import write_atomic
from tilefit.readfile import read_bytes

FORMAT = 1


def _stat_key(st: os.stat_result) -> list:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class StatIndex:
    """``path -> digest`` of files, read again only when their stat changed."""

    def __init__(self, file: Path | None):
        self.file = file
        self.entries: dict[str, list] = {}
        self.changed = False
        if file is not None and file.is_file():
            try:
                data = json.loads(read_bytes(file))
            except (OSError, ValueError, RecursionError):
                data = None
            if type(data) is dict and data.get("format") == FORMAT and type(data.get("files")) is dict:
                self.entries = data["files"]

    def digest(self, path: str) -> str | None:
        """The SHA-256 of ``path``'s bytes (None: it cannot be read)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = _stat_key(st)
        hit = self.entries.get(path)
        if type(hit) is list and len(hit) == 2 and hit[0] == key and type(hit[1]) is str:
            return hit[1]
        try:
            data = read_bytes(path)
        except OSError:
            return None
        digest = hashlib.sha256(data).hexdigest()
        self.entries[path] = [key, digest]
        self.changed = True
        return digest

    def save(self) -> None:
        if self.file is None or not self.changed:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.file, json.dumps({"format": FORMAT, "files": self.entries}, separators=(",", ":")))
        except OSError:
            pass


def _root() -> Path | None:
    from tilefit.cachedir import cache_root

    root = cache_root()
    return None if root is None else Path(root) / "callsites" / f"v{FORMAT}"


def _scenario_key(s) -> list:
    return [s.name, sorted((str(k), repr(v)) for k, v in s.values.items()),
            sorted((str(k), list(v)) for k, v in s.dtypes.items()),
            # the dimensions and the quantisation schemes (a table's facts bind them too)
            sorted((str(k), repr(v)) for k, v in s.dims.items()), repr(s.facts.get("quant")),
            # the facts only variants read (dcp_sizes, kv_quant, batch_sizes: values of their own)
            sorted((str(k), repr(v)) for k, v in s.facts.items())]


def config_key(run_key: str, options) -> str:
    """The run key with the call-site options that change results (and the MoE config lookup the
    application installed: without it ``config`` dicts stay unbound)."""
    from tilefit.callsites.moeconfigs import lookup_name

    parts = {"run": run_key, "kernels": options.kernels, "coverage": bool(options.coverage),
             "scenarios": [_scenario_key(s) for s in options.scenarios], "moe_lookup": lookup_name()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()[:32]


class CallsiteRunCache:
    """The stored results of one run configuration over one set of Python files."""

    def __init__(self, run_key: str, options, paths: Sequence[str]):
        root = _root()
        self.paths = sorted(os.path.abspath(p) for p in paths)
        self.key = config_key(run_key, options)
        names = hashlib.sha256("\n".join(self.paths).encode()).hexdigest()[:16]
        self.file = root / f"{self.key}-{names}.json" if root is not None else None
        self.index = StatIndex(root / "stat.json" if root is not None else None)
        self.enabled = root is not None and not options.allow_import

    def _digests(self, paths: Iterable[str]) -> dict[str, str | None]:
        return {p: self.index.digest(p) for p in paths}

    def get(self):
        """A :class:`tilefit.pyengine.PythonRun` of the stored results, or None."""
        if not self.enabled or self.file is None or not self.file.is_file():
            return None
        try:
            data = json.loads(read_bytes(self.file))
        except (OSError, ValueError, RecursionError):
            return None
        try:
            if data.get("format") != FORMAT or data.get("key") != self.key or data.get("paths") != self.paths:
                return None
            inputs = data["inputs"]
            if type(inputs) is not dict or self._digests(inputs) != inputs:
                return None
            diagnostics = _decode(data["diagnostics"])
            errors = [str(e) for e in data["errors"]]
            coverage = _coverage_of(data["coverage"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        finally:
            self.index.save()
        from tilefit.pyengine import PythonRun

        return PythonRun(diagnostics, None, None, None, errors, coverage)

    def put(self, run) -> None:
        """Store ``run`` (a :class:`tilefit.pyengine.PythonRun` just computed)."""
        if not self.enabled or self.file is None or run.project is None:
            return
        ev = run.evaluator
        if ev is not None and any(getattr(r, "error_stage", None) in ("timeout", "crash")
                                  for r in ev._results.values()):
            return  # this run's load decided those, not the kernels
        if run.project.evaluator.stopped_by_time:
            return  # so it did for a site the clock stopped (a site the step budget stops is stored)
        scanned = sorted({os.path.abspath(m.path) for m in run.project.all_modules()} | set(self.paths))
        inputs = self._digests(scanned)
        record = {"format": FORMAT, "key": self.key, "paths": self.paths, "inputs": inputs,
                  "diagnostics": _encode(run.diagnostics), "errors": list(run.errors),
                  "coverage": run.coverage.to_json() if run.coverage is not None else None}
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.file, json.dumps(record, separators=(",", ":"), default=str))
        except OSError:
            pass
        self.index.save()


def _encode(diagnostics) -> dict:
    from tilefit.resultcache import ResultCache

    rc = ResultCache.in_memory()
    by_path: dict[str, list] = {}
    for d in diagnostics:
        by_path.setdefault(d.path, []).append(d)
    order = [d.path for d in diagnostics]
    for path, diags in by_path.items():
        rc.put(path, "", diags)
    return {"values": rc.values, "files": rc.entries, "order": list(dict.fromkeys(order))}


def _decode(data: dict) -> list:
    from tilefit.resultcache import ResultCache

    rc = ResultCache.in_memory(data["files"], data["values"])
    out = []
    for path in data["order"]:
        hit = rc.get(path, "")
        if hit is None:
            raise ValueError(f"a damaged record for {path}")
        out.extend(hit)
    out.sort(key=lambda d: d.sort_key)
    return out


def _coverage_of(data):
    if data is None:
        return None
    import collections

    from tilefit.callsites.coverage import Coverage

    return Coverage(launches=int(data["launches"]), launches_evaluated=int(data["launches_evaluated"]),
                    autotunes=int(data["autotune_lists"]), autotunes_evaluated=int(data["autotune_lists_evaluated"]),
                    unresolved=int(data["unresolved_launches"]), off_platform=int(data["off_platform_launches"]),
                    reasons=collections.Counter({str(k): int(v) for k, v in data["not_evaluated_by_reason"].items()}),
                    targets=int(data["targets"]))
