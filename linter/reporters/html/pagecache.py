"""The check's HTML page of a run, kept in the result cache's folder beside the run's results
(``<run key>.page``), so a warm ``--output-format html`` run that finds the same inputs writes the
page it made before instead of building the audit again (issue 19: the audit of every entry on
every device class was most of a warm html run).

The page is a pure function of the audit (:mod:`tilefit.reporters.html.page`), and the audit
(:func:`tilefit.audit.build_check_audit`) of:

* the run key (:func:`tilefit.resultcache.run_key`: tilefit's code and data, the rules, targets,
  estimator and Triton, the device files, the user's calibrations, the planner's settings);
* each checked table's path, name (its ``TableMeta``), bytes and read error; the diagnostics
  (Python call sites' included), and the fixes' plans, which under one run key are a function of
  the table's bytes (the result cache stores them on that ground);
* the files counted, the tool's version, and the command line and the time it names.

The page is stored under a digest of all but the last two, with the command and the time cut out
(they are written back in from this run: ``-o`` names another file, the clock moved on). A page
whose audit rests on something of its run only (a verdict left unchecked by an estimator that
compiles: a compile that timed out) is not stored, as the verdict store does not store such a
verdict; neither is a page drawn after ``--fix`` (the caller asks only for plain checks).
"""

from __future__ import annotations

from pathlib import Path

from .page import embed_json

FORMAT = b"tilefit-page 1"


def page_digest(result, tool_version: str) -> str | None:
    """The digest the page of ``result`` is stored under (what the report caches share:
    :func:`tilefit.reporters.outputcache.inputs_digest`); None when the run used no result
    cache (its ``cache_key``: nothing names its configuration)."""
    from ..outputcache import inputs_digest

    return inputs_digest(result, "page", tool_version)


def _mark(command: str | None, generated: str) -> str:
    """The page's text of the run's own parts (the audit's meta holds them side by side)."""
    return '"command":' + embed_json(command) + ',"generated":' + embed_json(generated)


def _file(key: str) -> Path | None:
    from ..outputcache import cache_file

    return cache_file(key, ".page")


def load(result, digest: str, command: str | None, generated: str) -> str | None:
    """The stored page for ``digest`` with this run's command and time; None on a miss."""
    from ..outputcache import read_record

    record = read_record(_file(result.cache_key), FORMAT, digest, 1)
    if record is None:
        return None
    (cut,), body = record
    try:
        cut = int(cut)
        text = body.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    if not 0 <= cut <= len(text):
        return None
    return text[:cut] + _mark(command, generated) + text[cut:]


def store(result, digest: str, page: str, command: str | None, generated: str) -> None:
    """Keep ``page`` (made for ``command`` at ``generated``) under ``digest``; nothing when the
    run's parts are not found exactly once in it. An unwritable cache only costs time."""
    file = _file(result.cache_key)
    if file is None:
        return
    mark = _mark(command, generated)
    at = page.find(mark)
    if at < 0 or page.find(mark, at + 1) >= 0:
        return
    text = page[:at] + page[at + len(mark):]
    from ..outputcache import write_record

    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:
        return
    write_record(file, FORMAT, digest, [str(at).encode()], body)
