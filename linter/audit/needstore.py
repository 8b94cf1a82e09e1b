"""The audit's per-entry verdicts of a run, kept in the result cache's folder beside the run's
results (``<run key>.needs.json``), so a warm ``--output-format html`` run (the page judges every
entry on every device class) does not estimate them all again.

A verdict is a function of the table's name (its :class:`~tilefit.families.TableMeta`), the entry
and the device class under the run key (:func:`tilefit.resultcache.run_key`: tilefit's code, the
estimator and Triton, the device files, the user's calibrations), so it is stored under a hash of
those three and the run key names the file. A verdict that rests on something of this run only
(``UNCHECKED``: no estimate, or a compile that timed out) is not stored.
"""

from __future__ import annotations

import hashlib
import json

from tilefit.atomicfile import write_atomic
from tilefit.cachedir import cache_root
from tilefit.resultcache import read_side_file

from .needs import FITS, NOT_APPLICABLE, OVER, UNCERTAIN, Need

FORMAT = 1
_STORED = (FITS, OVER, UNCERTAIN, NOT_APPLICABLE)


# json.dumps(..., allow_nan=False) with one encoder for all (json.dumps builds an encoder per call
# when given an option; a warm html run names tens of thousands of verdicts)
_KEY_ENCODER = json.JSONEncoder(allow_nan=False)


def need_key(meta_text: str, entry, device_key: str) -> str | None:
    """The stored verdict's name; None for an entry JSON cannot write (never stored)."""
    return key_of(key_prefix(meta_text, entry), device_key)


def key_prefix(meta_text: str, entry) -> str | None:
    """What :func:`need_key` hashes before the device key (the JSON of ``[meta_text, entry, ``:
    the same for each device class an entry is judged on); None for an entry JSON cannot write."""
    try:
        return "[" + _KEY_ENCODER.encode(meta_text) + ", " + _KEY_ENCODER.encode(entry) + ", "
    except (TypeError, ValueError):
        return None


def key_of(prefix: str | None, device_key: str) -> str | None:
    """:func:`need_key` from its :func:`key_prefix` (the JSON list ``[meta_text, entry, device_key]``)."""
    if prefix is None:
        return None
    end = _KEY_ENDS.get(device_key)
    if end is None:
        end = _KEY_ENDS[device_key] = _KEY_ENCODER.encode(device_key) + "]"
    return hashlib.sha256((prefix + end).encode()).hexdigest()[:24]


_KEY_ENDS: dict[str, str] = {}  # device key -> its JSON and the list's end (a run has a few devices)


def _valid(value) -> bool:
    return (type(value) is list and len(value) == 3 and value[1] in _STORED
            and (value[0] is None or type(value[0]) is int) and (value[2] is None or type(value[2]) is str))


class NeedStore:
    """The stored verdicts of one run key (``key`` None: none, nothing written)."""

    def __init__(self, key: str | None):
        root = cache_root() if key else None
        self.file = root / "results" / f"{key}.needs.json" if root is not None else None
        self.stored: dict = read_side_file(self.file, "needs", FORMAT)
        self.new: dict = {}

    def get(self, key: str) -> Need | None:
        value = self.stored.get(key)
        return Need(*value) if _valid(value) else None

    def put(self, key: str, need: Need) -> None:
        if need.verdict in _STORED:
            self.new[key] = [need.bytes, need.verdict, need.estimator]

    def save(self) -> None:
        if self.file is None or not self.new:
            return
        merged = {k: v for k, v in self.stored.items() if _valid(v)}
        merged.update(self.new)
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.file, json.dumps({"format": FORMAT, "needs": merged}, separators=(",", ":")))
        except OSError:
            pass  # an unwritable cache only costs time
