"""A cache of per-file check results, keyed by content (ruff's cache, for config tables).

A pre-commit hook or an audit re-checks mostly unchanged files. The diagnostics of a table
depend only on its bytes, its path and the run's configuration; the run's configuration is
hashed into a *run key* (tilefit's own code and data files, the selected rules, the targets,
the estimator and the installed Triton version, per-file ignores), and each file's results are
stored under the SHA-256 of its bytes. A changed file, rule, device file or setting misses.

The cache is one JSON file per run key under ``<cache root>/results/`` (``TILEFIT_CACHE_DIR``;
empty turns caching off, as does ``--no-cache``), written atomically at the end of a run, with
the SHA-256 of its bytes in ``<cache root>/results-digests/``: a file read back with that digest
holds only records this module wrote, so its rows are not validated one by one again (any other
file's are, and a bad record is a miss). A run that plans fixes
(``--output-format json``, ``full``, ``html``) caches each diagnostic's fix with it, under a run key
that adds the planner's settings, the performance model's and the calibrations' files
(:func:`run_key`'s ``planner``), and the planner's whole plans (:mod:`tilefit.fix.stored`: what
``full``'s hints and the ``html`` report read) beside them in ``<key>.plans.json``, read only by a
run that asks for them (:meth:`ResultCache.plans`), and what a kept report needs of them (how many
entries have a faster unsafe fix) in ``<key>.summary.json`` (:meth:`ResultCache.summary`: a warm
``full`` report or a kept html page reads that small file, not the plans); a run that applies
fixes (``--fix``) bypasses the cache.

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
from .jsonenc import dumps_default_str
from .model import Applicability, Diagnostic, Edit, Fix, Position, Severity, Span, build_frozen
from .readfile import read_bytes
from tilefit.rules.est001_no_estimate import timed_out

FORMAT = 3
_SEVERITY = {s.value: s for s in Severity}
# the cache file's JSON, as json.dumps(..., separators=(",", ":")) writes it; without the
# encoder's cycle check (every value is JSON data read back or encoded by this module, no cycle)
_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


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


def _planner_key(planner) -> dict:
    """What a planned fix depends on beyond the check: the planner's settings
    (:meth:`tilefit.planning.RunPlanner.cache_settings`) and the
    performance model that ranks candidates (bundled files are in the code fingerprint; the
    user's calibration and ``TILEFIT_PERF_MODEL_PATH`` files are stat-ed here)."""
    from .perf.coefficients import ENV_VAR

    settings = dict(planner.cache_settings())
    coefficients = settings.pop("coefficients", None)
    files = []
    for p in filter(None, os.environ.get(ENV_VAR, "").split(os.pathsep)):
        try:
            st = os.stat(p)
            files.append([p, st.st_size, st.st_mtime_ns])
        except OSError:
            files.append([p, None, None])
    return {"settings": settings, "isolated_perf": os.environ.get("TILEFIT_ISOLATED_PERF", ""), "perf_files": files,
            "calibration": _calibration_hash(),
            "coefficients": coefficients}


def _calibration_hash() -> str:
    """SHA-256 of the contents of the calibration files a plan rests on beyond tilefit's own
    data: the user data folder's shared-memory and performance models and the files
    ``TILEFIT_PERF_MODEL_PATH`` names (the run key stats them too; contents are hashed here, so a
    calibration rewritten within the same size and timestamp still invalidates the plans)."""
    from . import userdata
    from .perf.coefficients import ENV_VAR

    paths = []
    for kind in (userdata.SMEM_MODEL, userdata.PERF_MODEL):
        folder = userdata.model_folder(kind)
        if folder is not None and folder.is_dir():
            paths.extend(sorted(folder.glob("*.json")))
    for p in filter(None, os.environ.get(ENV_VAR, "").split(os.pathsep)):
        p = Path(p)
        paths.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    h = hashlib.sha256()
    for p in paths:
        try:
            data = p.read_bytes()
        except OSError:
            data = b""
        h.update(f"{p}:{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def run_key(engine, settings, opts, planner=None) -> str:
    """The run's configuration as a hash; with ``planner``, that of the fixes it plans too."""
    from . import userdata, versions

    rules = sorted(r.code for scope in engine._rules.values() for r in scope)
    targets = sorted(repr(d) for d in engine.extra_targets)
    est = engine.estimator
    parts = {
        "format": FORMAT, "code": _code_fingerprint(), "rules": rules, "targets": targets,
        "estimator": [est.mode, est.margin, getattr(est, "_triton_version", None), versions.installed_triton()],
        "per_file_ignores": settings.per_file_ignores, "rule_options": getattr(engine, "rule_options", {}),
        "root": getattr(engine, "root", None),
        "user_models": userdata.fingerprint(),  # tilefit calibrate's files in the user data folder
        "device_files": list(settings.extend_device_db)
        + list(getattr(opts, "device_files", []) or []),
        "fixes": None if planner is None else _planner_key(planner),
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
_MESSAGE, _POINTER, _DATA, _FIX = 1, 9, 11, 13
_VALUE_COLUMNS = (_MESSAGE, _POINTER, _DATA, _FIX)
_APPLICABILITY = {int(a): a for a in Applicability}


def _fix_value(fix: Fix | None):
    if fix is None:
        return None
    return {"title": fix.title, "applicability": int(fix.applicability), "expected": dict(fix.expected),
            "edits": [[e.start_offset, e.end_offset, e.content,
                       [e.start.line, e.start.column] if e.start else None,
                       [e.end.line, e.end.column] if e.end else None] for e in fix.edits]}


def _fix_of(value) -> Fix | None:
    if value is None:
        return None
    return Fix(title=value["title"], applicability=_APPLICABILITY[value["applicability"]],
               expected=dict(value["expected"]),
               edits=tuple(Edit(a, b, content, Position(*start) if start else None, Position(*end) if end else None)
                           for a, b, content, start, end in value["edits"]))


def _valid_row(r, values: list) -> bool:
    """A row as :meth:`ResultCache._rows` writes it, naming values of the right types: a record
    read back is checked before it is trusted (a damaged or hand-edited file is rebuilt)."""
    if type(r) is not list or len(r) != 14:
        return False
    n = len(values)
    m, p, d, f = r[_MESSAGE], r[_POINTER], r[_DATA], r[_FIX]
    # written out, not any()/all() over generators: a warm check validates every row it reads
    if not (type(m) is int and type(p) is int and type(d) is int and type(f) is int
            and 0 <= m < n and 0 <= p < n and 0 <= d < n and 0 <= f < n):
        return False
    if values[f] is not None and type(values[f]) is not dict:
        return False
    pointer = values[p]
    return (type(r[0]) is str and type(values[m]) is str
            and (pointer is None or type(pointer) is str and (not pointer or pointer[0] == "/"))
            and type(values[d]) is dict and type(r[2]) is int and type(r[3]) is int and type(r[4]) is int
            and type(r[5]) is int and type(r[6]) is int and type(r[7]) is int and type(r[8]) is str
            and r[8] in _SEVERITY and (r[10] is None or type(r[10]) is str) and type(r[12]) is str)


def _valid_hit(hit, values: list) -> bool:
    if not (type(hit) is list and len(hit) == 2 and type(hit[0]) is str and type(hit[1]) is list):
        return False
    for r in hit[1]:
        if not _valid_row(r, values):
            return False
    return True


def keepable(diagnostics, awaits_compile: bool) -> bool:
    """Whether a file's check may be kept: not when it awaits a deferred compile (the next pass
    gives its verdicts) nor when it reports a compile that ran out of time (this run's: the next
    may finish it)."""
    return not awaits_compile and not any(timed_out(d) for d in diagnostics)


_join = "".join


def _data_key(data) -> tuple | None:
    """A key of a diagnostic's data object (a dict of strings, lists of strings and scalars: what
    the engine's hold) that two objects share only where their JSON texts are equal, found at a
    third of the repr's cost (the lists' strings hashed once, not each quoted): each member's
    name (a string) with its value, a list as a tuple of its strings, a number, boolean or None
    with its type (1, 1.0 and true are equal in Python, not in JSON), a float by its repr (0.0
    and -0.0); None for anything else (another type of data, or of value), which is indexed by
    its repr (:meth:`ResultCache._data_value`). A check's diagnostics repeat a few hundred data
    objects thousands of times, each with a ``targets`` list of up to 22 devices."""
    if type(data) is not dict:
        return None
    parts = []
    try:
        _join(data)  # the names are strings (TypeError otherwise)
        for name, value in data.items():
            kind = type(value)
            if kind is list:
                _join(value)  # strings only (TypeError otherwise): their JSON texts are equal where they are
                parts.append((name, tuple(value)))
            elif kind is str or kind is int or kind is bool or value is None:
                parts.append((name, kind, value))
            elif kind is float:
                parts.append((name, kind, repr(value)))
            else:
                return None
    except TypeError:
        return None
    return tuple(parts)


def _list_members(data: dict) -> tuple:
    """The names of a shared data object's list members: a diagnostic's own copy of it is
    ``dict(data)`` with those copied too (as the engine's)."""
    return tuple(k for k, v in data.items() if type(v) is list)


def read_side_file(file: Path | None, member: str, fmt: int) -> dict:
    """The ``member`` dict of a file kept beside a run's results (``{"format": fmt, member:
    {...}}``: the fixer's plans, the HTML page's verdicts); {} when it is missing, unreadable,
    not JSON, of another format or of the wrong shape (a miss only costs time)."""
    if file is None or not file.is_file():
        return {}
    try:
        data = json.loads(read_bytes(file))
    except (OSError, ValueError, RecursionError):
        return {}
    if type(data) is dict and data.get("format") == fmt and type(data.get(member)) is dict:
        return data[member]
    return {}


class SideRecords:
    """A file of per-file records kept beside a run's results (``{"format", "files": {path:
    [digest, record]}}``: the fixer's plans, their summaries), read on the first ask."""

    def __init__(self, file: Path | None):
        self.file = file
        self._stored: dict[str, list] | None = None  # path -> [digest, record], read on first use
        self.new: dict[str, list | None] = {}  # what this run stored (None: no record)

    def stored(self) -> dict:
        if self._stored is None:
            self._stored = read_side_file(self.file, "files", FORMAT)
        return self._stored

    def get(self, path: str, digest: str):
        """The record of ``path`` stored at ``digest``, or None."""
        hit = self.new[path] if path in self.new else self.stored().get(path)
        if type(hit) is not list or len(hit) != 2 or hit[0] != digest:
            return None
        return hit[1]

    def save(self, entries: dict) -> None:
        """Write the records of the files whose rows are kept (``entries``), at the same digest;
        a file stored this run without a record drops its old one. Raises ``OSError``."""
        if not self.new:
            return
        records = dict(self.stored())
        records.update(self.new)
        kept = {p: hit for p, hit in records.items()
                if type(hit) is list and len(hit) == 2 and p in entries and entries[p][0] == hit[0]}
        if kept or self.file.exists():
            write_atomic(self.file, json.dumps({"format": FORMAT, "files": kept}, separators=(",", ":")))


class ResultCache:
    def __init__(self, key: str | None):
        """The cache of run ``key`` (None: one held in memory only, never read or written: the
        encoding of another record, :mod:`tilefit.callsiteresults`)."""
        root = cache_root() if key is not None else None
        self.file = root / "results" / f"{key}.json" if root is not None else None
        self.plan_file = root / "results" / f"{key}.plans.json" if root is not None else None
        self._plans = SideRecords(self.plan_file)
        # the plans' summaries (what a kept report needs of them)
        self.summary_file = root / "results" / f"{key}.summary.json" if root is not None else None
        self._summaries = SideRecords(self.summary_file)
        self.entries: dict[str, list] = {}  # path -> [digest, rows]
        # path -> the JSON text of its entry, encoded when it is stored (a cache kept in a file):
        # save() joins them while the rows are as stored (see _texts_of); in a split check that
        # encoding is done as each file is stored, in the part the processes share out
        self._texts: dict[str, str] = {}
        self.values: list = []  # the distinct messages, pointers and data objects the rows name
        self._index: dict[str, int] | None = None  # a value's JSON text -> its index, on first put
        self._strings: dict[str, int] = {}  # a string value -> its index (what _index says of its JSON text)
        self._reprs: dict[str, int] = {}  # a data object's repr -> its index (see _data_value)
        self._data_keys: dict[tuple, int] = {}  # a data object's _data_key -> its index
        self._spans: dict[tuple, Span] = {}  # a stored span's six numbers -> its (frozen) Span, for get()
        # whether some value may be named by no row (records read from a file, or a file's rows
        # put again): then save() compacts the values; else they are exactly the rows' in order
        self._stale = False
        self.changed = False
        # whether every record held was written by this class: read back from a file whose bytes
        # have the digest its save wrote beside it (then no row is validated again), or none read
        self.verified = True
        if self.file is not None and self.file.is_file():
            raw = b""
            try:
                raw = read_bytes(self.file)
                data = json.loads(raw)
            except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested too deep
                data = None
            if (type(data) is dict and data.get("format") == FORMAT and type(data.get("files")) is dict
                    and type(data.get("values")) is list):
                self.entries, self.values = data["files"], data["values"]
                self._stale = True
                self.verified = self._digest_file_says(hashlib.sha256(raw).hexdigest())

    def _digest_file(self) -> Path:
        return self.file.parent.parent / "results-digests" / f"{self.file.stem}.sha256"

    def _digest_file_says(self, digest: str) -> bool:
        try:
            return self._digest_file().read_text(encoding="ascii").strip() == digest
        except (OSError, ValueError):
            return False

    @classmethod
    def in_memory(cls, files: dict | None = None, values: list | None = None, trusted: bool = False) -> "ResultCache":
        """A cache with no file, holding ``files`` and ``values`` (a stored record's, or empty;
        ``trusted``: rows this class wrote in a forked worker, :mod:`tilefit.parallel`, given as
        they were, so none is validated again)."""
        rc = cls(None)
        rc.entries, rc.values = (files if files is not None else {}), (values if values is not None else [])
        rc._stale = files is not None or values is not None
        rc.verified = files is None or trusted  # a record read from elsewhere: each row it gives is validated
        return rc

    @staticmethod
    def digest(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def get(self, path: str, digest: str) -> list[Diagnostic] | None:
        hit = self.entries.get(path)
        values = self.values
        if hit is None or not (self.verified or _valid_hit(hit, values)):  # a bad record is a miss, and is rewritten
            return None
        if hit[0] != digest:
            return None
        fixes: dict[int, Fix | None] = {}  # one Fix per entry, shared by its diagnostics (as planned)
        spans = self._spans  # an entry's diagnostics share its span (frozen: one object), and files laid out alike
        lists: dict[int, tuple] = {}  # a data value's index -> the names of its list members
        try:
            out = []
            for r in hit[1]:
                fix = fixes.get(r[_FIX], False)
                if fix is False:
                    fix = fixes[r[_FIX]] = _fix_of(values[r[_FIX]])
                where = tuple(r[2:8])
                span = spans.get(where)
                if span is None:
                    span = spans[where] = build_frozen(Span, {
                        "start": build_frozen(Position, {"line": r[2], "column": r[3]}),
                        "end": build_frozen(Position, {"line": r[4], "column": r[5]}),
                        "start_offset": r[6], "end_offset": r[7]})
                stored = values[r[_DATA]]
                names = lists.get(r[_DATA])
                if names is None:
                    names = lists[r[_DATA]] = _list_members(stored)
                data = dict(stored)  # the diagnostic's own copy, its lists copied too (as the engine's)
                for name in names:
                    data[name] = list(data[name])
                # a Diagnostic from its fields, in its order
                out.append(build_frozen(Diagnostic, {
                    "code": r[0], "message": values[r[1]], "path": path, "span": span, "severity": _SEVERITY[r[8]],
                    "pointer": values[r[9]], "target": r[10], "fix": fix, "data": data, "fingerprint": r[12]}))
            return out
        except (TypeError, ValueError, IndexError, KeyError, AttributeError):  # a damaged fix: a miss
            return None

    def put(self, path: str, digest: str, diagnostics, plans=None, summary=None) -> None:
        """Store a file's diagnostics and (``plans``: JSON data, :mod:`tilefit.fix.stored`) the
        fixer's plans behind their fixes, with (``summary``: JSON data) what a kept report needs
        of them (:meth:`tilefit.planning.RunPlanner.summary_of`)."""
        self._store(path, digest, self._rows(diagnostics), plans, summary)

    def adopt(self, path: str, digest: str, other: "ResultCache", index: dict[int, int], plans=None,
              summary=None) -> None:
        """Store the rows ``other`` holds for ``path`` (a cache a forked worker filled,
        :mod:`tilefit.parallel`) under ``digest``, as :meth:`put` of the diagnostics ``other.get``
        builds from them would store them, without building them: each value they name is
        indexed among this cache's once (``index``: ``other``'s value index -> this cache's,
        kept by the caller across the files of one ``other``)."""
        values = other.values
        rows = []
        for r in other.entries[path][1]:
            r = list(r)
            for col in _VALUE_COLUMNS:
                i = index.get(r[col])
                if i is None:
                    i = index[r[col]] = self._value(values[r[col]])
                r[col] = i
            rows.append(r)
        self._store(path, digest, rows, plans, summary)

    def _store(self, path: str, digest: str, rows: list, plans, summary) -> None:
        if path in self.entries:
            self._stale = True
        entry = self.entries[path] = [digest, rows]
        if self.file is not None:  # kept for save() (a file-less cache, e.g. a call-site record's encoder, keeps none)
            self._texts[path] = _encode(entry)
            self._plans.new[path] = None if plans is None else [digest, plans]
            self._summaries.new[path] = None if summary is None else [digest, summary]
        self.changed = True

    def plans(self, path: str, digest: str):
        """The plans stored with ``path``'s diagnostics at ``digest`` (JSON data), or None. The
        plans file is read on the first call only: a run that shows only the fixes never reads it."""
        return self._plans.get(path, digest)

    def plan_reader(self, path: str, digest: str):
        """A call of no arguments that gives :meth:`plans` of ``path`` at ``digest`` later,
        holding the plans' store only (not the results)."""
        from functools import partial

        return partial(self._plans.get, path, digest)

    def summary(self, path: str, digest: str):
        """The plans' summary stored with ``path``'s diagnostics at ``digest`` (JSON data), or
        None; its file (small: a few keys per file) is read on the first call."""
        return self._summaries.get(path, digest)

    def _rows(self, diagnostics) -> list[list]:
        """The rows of ``diagnostics``, their values indexed (appended where new). The values in
        each row's column order (message, pointer, data, fix): the order _compacted() gives them,
        so values only ever appended need no compaction. One loop for the file: a message or
        pointer seen before is looked up by the string itself, a data object by its key
        (:func:`_data_key`), a fix by its identity (an entry's diagnostics share one)."""
        strings = self.__dict__.get("_strings")
        if strings is None:  # a cache built without __init__ (see _value)
            strings = {}
        data_keys = self._data_keys
        value, data_value = self._value, self._data_value
        fixes: dict[int, int] = {}  # id of a Fix -> its value index
        rows = []
        for d in diagnostics:
            s = d.span
            start, end = s.start, s.end
            message = strings.get(d.message)
            if message is None:
                message = value(d.message)
            pointer = strings.get(d.pointer)
            if pointer is None:
                pointer = value(d.pointer)
            data = d.data
            key = _data_key(data)
            i = data_keys.get(key) if key is not None else None
            if i is None:
                i = data_value(data)
                if key is not None:
                    data_keys[key] = i
            fix = fixes.get(id(d.fix))
            if fix is None:
                fix = fixes[id(d.fix)] = value(_fix_value(d.fix))
            rows.append([d.code, message, start.line, start.column, end.line, end.column, s.start_offset,
                         s.end_offset, d.severity._value_, pointer, d.target, i, d.fingerprint, fix])
        return rows

    def _data_value(self, data) -> int:
        """The index of a diagnostic's data object, found by its repr where it has no key
        (:func:`_data_key`): repr (in C) tells apart what the JSON text would (1, 1.0, true,
        "1"), so only a repr not seen yet is encoded."""
        reprs = self._reprs
        key = repr(data)
        i = reprs.get(key)
        if i is None:
            i = reprs[key] = self._json_value(data if type(data) is dict else dict(data))
        return i

    def _value(self, value) -> int:
        if type(value) is str:  # messages and pointers repeat across rows: their index by the string itself
            strings = self.__dict__.get("_strings")
            if strings is None:  # a cache built without __init__ (tilefit.callsiteresults)
                strings = self._strings = {}
            i = strings.get(value)
            if i is None:
                i = strings[value] = self._json_value(value)
            return i
        return self._json_value(value)

    def _json_value(self, value) -> int:
        if self._index is None:
            try:
                self._index = {json.dumps(v): i for i, v in enumerate(self.values)}
            except (TypeError, ValueError, RecursionError):  # a damaged file: start afresh
                self.entries, self.values, self._index = {}, [], {}
        key = dumps_default_str(value)
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.values)
            self.values.append(json.loads(key))
        return i

    def _compacted(self) -> tuple[dict, list]:
        """The entries and values with only the values some row still names (a file whose rows
        name no value, e.g. of a damaged cache file, is left out). Values only appended by put()
        to a cache that read no records are already so (see _rows)."""
        if not self._stale and self.verified:
            return self.entries, self.values
        used: dict[int, int] = {}
        values: list = []
        entries = {}
        for path, hit in self.entries.items():
            if not self.verified and (type(path) is not str or not _valid_hit(hit, self.values)):
                continue
            digest, rows = hit
            new_rows = []
            for r in rows:
                r = list(r)
                for col in _VALUE_COLUMNS:
                    i = used.get(r[col])
                    if i is None:
                        value = self.values[r[col]]
                        i = used[r[col]] = len(values)
                        values.append(value)
                    r[col] = i
                new_rows.append(r)
            entries[path] = [digest, new_rows]
        return entries, values

    def _texts_of(self, entries: dict) -> list[tuple[str, str]] | None:
        """``(path, JSON text of its entry)`` of each of ``entries`` from the texts encoded when
        they were stored, or None when some entry has none (read from the file) or ``entries``
        are not the rows as stored (compacted: their value indices renumbered)."""
        texts = self._texts
        if entries is not self.entries or len(texts) != len(entries):
            return None
        return [(path, texts[path]) for path in entries]

    def save(self) -> None:
        """Write the records at the end of a run; a run that changed none touches the file, whose
        time then says when a run of this key last used it (what :func:`tilefit.action.prune_results`
        keeps the GitHub Action's saved cache by)."""
        if self.file is None:
            return
        if not self.changed:
            try:
                os.utime(self.file)
            except OSError:
                pass  # none written yet, or an unwritable cache
            return
        entries, values = self._compacted()
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            texts = self._texts_of(entries)
            if texts is None:
                text = _encode({"format": FORMAT, "values": values, "files": entries})
            else:  # the same text, of the entries encoded as they were stored
                text = (f'{{"format":{FORMAT},"values":{_encode(values)},"files":{{'
                        + ",".join(f"{_encode(path)}:{entry}" for path, entry in texts) + "}}")
            write_atomic(self.file, text)
            # the digest of what was written: a later run trusts these records without validating
            # each row; a file changed since (by hand, or damaged) no longer matches it
            digest_file = self._digest_file()
            digest_file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(digest_file, hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n")
            # the stored plans (and their summaries) of the files whose rows are kept, at the
            # same digest; a file stored now without plans drops its old ones
            self._plans.save(entries)
            self._summaries.save(entries)
        except OSError:
            pass  # an unwritable cache only costs time
