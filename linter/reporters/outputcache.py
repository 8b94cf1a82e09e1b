"""A report kept in the result cache's folder beside the run's results (``<run key>.<format>.out``),
so a warm run of a format whose reporter declares ``Needs.kept`` (``json``, ``sarif``, ``gitlab``,
``full``) that finds the same inputs writes the text it made before instead of encoding every
diagnostic again (issue 19: encoding 10,000 rows was json's whole extra over ``concise`` warm).

Such a report is a pure function of the diagnostics, the tables' bytes (``full`` prints their
lines) and the render context's settings. Under one run key (:func:`tilefit.resultcache.run_key`:
tilefit's code and data, the rules, targets, estimator and Triton, the device files, the user's
calibrations, the planner's settings) a table's diagnostics, their spans, data and fixes are a
function of its path and bytes: the result cache stores them on that ground. So the digest
(:func:`inputs_digest`) covers the run key, every table's path, name, bytes and read error, and
each diagnostic's identity, span and fix title; a diagnostic that is not a table's (a Python call
site's: its spans and data come from the modules it was found in) counts whole. The context's
settings (the format, tilefit's version, the project root, the current folder, the colour and the
``[*]`` threshold) go in as well (:func:`report_digest`).

The html page has its own store (:mod:`tilefit.reporters.html.pagecache`: the page names its
command line and time, which are cut out), under the same :func:`inputs_digest`. Nothing is
stored after ``--fix`` or without a run key (``--no-cache``); a damaged file (its SHA-256 does not
match) is a miss, and an unwritable cache only costs time.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

FORMAT = b"tilefit-output 1"


def inputs_digest(result, *settings: str) -> str | None:
    """SHA-256 of what a report of ``result`` is made from (see the module's docstring), with
    ``settings`` (the caller's parts of it); None when the run used no result cache (no
    ``cache_key``: nothing names its configuration)."""
    key = getattr(result, "cache_key", None)
    if not key:
        return None
    h = hashlib.sha256()
    h.update("\0".join((key, *settings, str(result.files_checked), "")).encode("utf-8", "surrogatepass"))
    tables = result.tables
    for path in sorted(tables):
        table = tables[path]
        data = table.data if isinstance(table.data, bytes) else b""
        h.update(f"\0{path}\0{table.meta!r}\0{table.read_error!r}\0{len(data)}\0".encode("utf-8", "surrogatepass"))
        h.update(data)
    parts = []
    for d in result.diagnostics:
        if d.pointer is None or d.path not in tables:  # not a table's: the whole diagnostic
            parts.append(repr(d))
            continue
        fix = d.fix
        span = d.span
        parts.append(f"{d.path}\1{d.code}\1{d.pointer}\1{d.target}\1{d.severity.value}\1{d.fingerprint}\1"
                     f"{d.message}\1{span.start_offset}\1{span.end_offset}\1"
                     f"{fix.title if fix is not None else ''}\1"
                     f"{int(fix.applicability) if fix is not None else ''}")
    h.update("\2".join(parts).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def report_digest(result, fmt: str, ctx) -> str | None:
    """:func:`inputs_digest` of a ``fmt`` report drawn with the render context ``ctx``."""
    return inputs_digest(result, "report", fmt, ctx.tool_version, repr(ctx.root), os.getcwd(), repr(ctx.color),
                         repr(ctx.fix_applicability))


def cache_file(key: str, suffix: str) -> Path | None:
    """``<cache root>/results/<key><suffix>``; None when caching is off."""
    from tilefit.cachedir import cache_root

    root = cache_root()
    return root / "results" / f"{key}{suffix}" if root is not None else None


def read_record(file: Path | None, tag: bytes, digest: str, extra: int) -> tuple[list[bytes], bytes] | None:
    """The ``extra`` header fields and the body of a record that :func:`write_record` wrote to
    ``file`` as ``tag`` under ``digest``; None on a miss: no file, another tag or digest, or a
    damaged one (its SHA-256 does not match: cut short, overwritten)."""
    if file is None:
        return None
    try:
        data = file.read_bytes()
    except OSError:
        return None
    head, sep, body = data.partition(b"\n")
    fields = head.split(b" ")
    if not sep or len(fields) != 4 + extra or b" ".join(fields[:2]) != tag or fields[2] != digest.encode():
        return None
    if hashlib.sha256(body).hexdigest().encode() != fields[-1]:
        return None
    return fields[3:-1], body


def write_record(file: Path | None, tag: bytes, digest: str, extra: list[bytes], body: bytes) -> None:
    """Keep ``body`` in ``file`` (atomically) under a header of ``tag``, ``digest``, the ``extra``
    fields and the body's SHA-256; an unwritable cache only costs time."""
    if file is None:
        return
    from tilefit.atomicfile import write_atomic

    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(file, b" ".join((tag, digest.encode(), *extra, hashlib.sha256(body).hexdigest().encode()))
                     + b"\n" + body)
    except OSError:
        pass


def load(result, fmt: str, digest: str) -> str | None:
    """The report stored for ``digest``; None on a miss."""
    record = read_record(cache_file(result.cache_key, f".{fmt}.out"), FORMAT, digest, 0)
    if record is None:
        return None
    try:
        return record[1].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None


def store(result, fmt: str, digest: str, text: str) -> None:
    """Keep ``text`` (the ``fmt`` report) under ``digest``."""
    try:
        body = text.encode("utf-8", "surrogatepass")
    except UnicodeEncodeError:
        return
    write_record(cache_file(result.cache_key, f".{fmt}.out"), FORMAT, digest, [], body)
