"""A progress bar with an ETA on stderr, for long compile runs (``auto`` compiles, calibrations).

``Progress(label, total)`` is a ``progress(done, total)`` callback. On a terminal it redraws one
line (``label [#######.....] 12/40  ETA 1m05s``); elsewhere (a CI log, a pipe) it prints nothing
unless ``log`` is given, which then gets a line at most every ``every`` seconds and at the end.
The ETA is the mean time per finished item times the items left (compiles cost about the same).
"""

from __future__ import annotations

import sys
import time
from typing import Callable, TextIO


def _fmt(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    def __init__(self, label: str, total: int | None = None, *, stream: TextIO | None = None,
                 enabled: bool | None = None, log: Callable[[str], None] | None = None, every: float = 30.0,
                 width: int = 24):
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            try:
                enabled = self.stream.isatty()
            except (AttributeError, ValueError):
                enabled = False
        self.enabled = enabled
        self.log = log
        self.every = every
        self.width = width
        self.start = time.monotonic()
        self._last_log = self.start
        self._first: tuple[int, float] | None = None
        self._closed = False

    def line(self, done: int, total: int) -> str:
        now = time.monotonic()
        frac = done / total if total else 1.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        eta = ""
        if self._first is not None and done > self._first[0] and done < total:
            rate = (now - self._first[1]) / (done - self._first[0])
            eta = f"  ETA {_fmt(rate * (total - done))}"
        elif done >= total:
            eta = f"  {_fmt(now - self.start)}"
        return f"{self.label} [{bar}] {done}/{total}{eta}"

    def __call__(self, done: int, total: int | None = None) -> None:
        total = total if total is not None else (self.total or done)
        if self._first is None:
            # items answered at once (cache hits) do not count towards the rate
            self._first = (done, time.monotonic())
        if self.enabled and not self._closed:
            self.stream.write("\r" + self.line(done, total) + "\x1b[K")
            if done >= total:
                self.stream.write("\n")
                self._closed = True
            self.stream.flush()
        if self.log is not None:
            now = time.monotonic()
            if done >= total or now - self._last_log >= self.every:
                self._last_log = now
                self.log(self.line(done, total))


def factory(*, log: Callable[[str], None] | None = None, enabled: bool | None = None, every: float = 30.0):
    """``make(label, total)`` -> :class:`Progress` (the calibrations take a factory)."""
    def make(label: str, total: int) -> Progress:
        return Progress(label, total, enabled=enabled, log=log, every=every)

    return make
