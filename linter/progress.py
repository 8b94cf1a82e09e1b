"""A progress bar on stderr, only on a terminal, for runs that take a while (ruff's and
pre-commit's manners: nothing in a log, a pipe or CI output).

:func:`for_terminal` gives a :class:`Progress` when the stream is a terminal (and ``TERM`` is
not ``dumb``), else None; callers pass it on and call :meth:`Progress.advance`. The bar appears
only once the run has taken ``delay`` seconds (a one-second check stays silent) or when a
phase that compiles starts, is redrawn at most ten times a second, and is erased at the end
so the report that follows starts on a clean line.

:class:`EtaProgress` is a ``progress(done, total)`` callback with an ETA for compile runs (the
deferred compiles of ``auto``, calibrations), which can also log a line now and then to a file;
:func:`factory` makes them for the calibrations.
"""

from __future__ import annotations

import os
import time
import sys
from typing import Callable, TextIO

WIDTH = 24


class Progress:
    def __init__(self, stream, total: int = 0, label: str = "files", delay: float = 1.0):
        self.stream = stream
        self.total = total
        self.label = label
        self.delay = delay
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._shown = False
        self._width = 0

    def set_total(self, total: int, label: str | None = None) -> None:
        self.total = total
        if label:
            self.label = label

    def phase(self, label: str, total: int = 0, compiles: bool = False) -> None:
        """A new stage (``compiling call sites``); one that compiles shows at once."""
        self.label, self.total, self.done = label, total, 0
        if compiles:
            self.delay = 0.0
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self._draw()

    def update(self, done: int, total: int) -> None:
        """``done`` of ``total`` (a callback's figures, e.g. ``ExactEstimator.many``'s)."""
        self.done, self.total = done, total
        self._draw()

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if now - self.start < self.delay:
            return
        if not force and self._shown and now - self._last < 0.1 and self.done < self.total:
            return
        self._last = now
        if self.total:
            filled = int(WIDTH * min(self.done, self.total) / self.total)
            text = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} {self.label}"
        else:
            text = f"{self.label}..."
        text += f" ({now - self.start:.0f} s)"
        pad = max(0, self._width - len(text))
        try:
            self.stream.write("\r" + text + " " * pad)
            self.stream.flush()
        except (OSError, ValueError):
            return
        self._width = len(text)
        self._shown = True

    def close(self) -> None:
        if self._shown:
            try:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
        self._shown = False


def for_terminal(stream, delay: float = 1.0) -> Progress | None:
    """A progress bar on ``stream`` if it is a terminal, else None."""
    if os.environ.get("TERM") == "dumb":
        return None
    isatty = getattr(stream, "isatty", None)
    try:
        if not (isatty and isatty()):
            return None
    except (ValueError, OSError):
        return None
    return Progress(stream, delay=delay)

def _fmt(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class EtaProgress:
    """``EtaProgress(label, total)``: a ``progress(done, total)`` callback with an ETA, for long
    compile runs (``auto`` compiles, calibrations). On a terminal it redraws one line
    (``label [#######.....] 12/40  ETA 1m05s``); elsewhere (a CI log, a pipe) it prints nothing
    unless ``log`` is given, which then gets a line at most every ``every`` seconds and at the end.
    The ETA is the mean time per finished item times the items left (compiles cost about the same)."""

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
    """``make(label, total)`` -> :class:`EtaProgress` (the calibrations take a factory)."""
    def make(label: str, total: int) -> EtaProgress:
        return EtaProgress(label, total, enabled=enabled, log=log, every=every)

    return make
