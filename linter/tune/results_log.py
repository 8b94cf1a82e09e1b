"""The ``--results`` log of ``tilefit tune``: one JSON line per timing, written as it is taken.

Each record names the entry (``table``, ``M``), the config, ``n`` (the how-manieth timing of that
config in that entry's search: the finalists are timed more than once), the result (``time_us``,
None when the config failed; ``status``) and where it ran (``device``, ``worker``, seconds on the
GPU, whether the GPU worker had to compile). The line is appended, flushed and fsynced before
the search hears the result, so a run killed at any point -- the driver, a worker, the machine --
has every timing it finished on disk.

A rerun with the same file replays the logged timings in order (the search asks the same
questions, so it gets the same answers) and measures only what is missing. A line cut off by a
kill is skipped, and the next record starts on a line of its own. Records from another GPU or
another shape of the same table are not replayed.
"""

from __future__ import annotations

import json
import os
from typing import Mapping


def _shape_key(shape: Mapping | None) -> str | None:
    return None if shape is None else json.dumps(shape, sort_keys=True)


class MeasurementLog:
    """Append-only JSON lines; read on open, appended one record at a time."""

    def __init__(self, path: str | None, fsync: bool = True):
        self.path = path
        self.fsync = fsync
        self.records = 0  # readable records found on open
        self.skipped = 0  # lines that could not be read (a torn last line)
        self._samples: dict[tuple, list] = {}
        self._real: dict[str, str] = {}  # table as asked -> its real path (a search asks per candidate)
        self._fh = None
        self._starts_line = True
        if path and os.path.exists(path):
            with open(path, "rb") as fh:
                data = fh.read()
            self._starts_line = not data or data.endswith(b"\n")
            for line in data.splitlines():
                if not line.strip():
                    continue
                try:
                    self._load(json.loads(line))
                except (ValueError, KeyError, TypeError, AttributeError):
                    self.skipped += 1

    def _load(self, rec: Mapping) -> None:
        key = (os.path.realpath(rec["table"]), int(rec["M"]), str(rec["config"]))
        time_us = rec.get("time_us")
        if time_us is not None:
            time_us = float(time_us)
        entry = (rec.get("n"), time_us, rec.get("device"), _shape_key(rec.get("shape")))
        self._samples.setdefault(key, []).append(entry)
        self.records += 1

    def samples(self, table: str, M: int, config: str, device: str | None = None,
                shape: Mapping | None = None) -> list:
        """The logged timings of ``config`` in the entry (``table``, ``M``), in the order they were
        taken (index n = the n-th timing); records of another device or shape are left out."""
        real = self._real.get(table)
        if real is None:
            real = self._real[table] = os.path.realpath(table)
        logged = self._samples.get((real, int(M), config))
        if not logged:
            return []
        want_shape = _shape_key(shape)
        by_n: dict[int, float | None] = {}
        count = 0
        for n, time_us, dev, shp in logged:
            if device is not None and dev is not None and dev != device:
                continue
            if want_shape is not None and shp is not None and shp != want_shape:
                continue
            n = count if n is None else int(n)  # records without n: in file order
            count += 1
            by_n.setdefault(n, time_us)
        out = []
        while len(out) in by_n:  # a gap ends the replay: the rest is measured again
            out.append(by_n[len(out)])
        return out

    def add(self, record: Mapping) -> None:
        """Append one record and push it to the disk before returning."""
        if not self.path:
            return
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
            if not self._starts_line:
                self._fh.write("\n")  # after a torn line: start a line of our own
        self._fh.write(json.dumps(record) + "\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())
        self._starts_line = True

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "MeasurementLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
