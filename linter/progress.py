"""A progress bar on stderr, only on a terminal, for runs that take a while (ruff's and
pre-commit's manners: nothing in a log, a pipe or CI output).

:func:`for_terminal` gives a :class:`Progress` when the stream is a terminal (and ``TERM`` is
not ``dumb``), else None; callers pass it on and call :meth:`Progress.advance`. The bar appears
only once the run has taken ``delay`` seconds (a one-second check stays silent) or when a
phase that compiles starts, is redrawn at most ten times a second, and is erased at the end
so the report that follows starts on a clean line.
"""

from __future__ import annotations

import os
import time

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
