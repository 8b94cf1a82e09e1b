"""One progress bar on stderr, only on a terminal, for runs that take a while (ruff's and
pre-commit's manners: nothing in a log, a pipe or CI output unless asked).

:class:`Progress` is the one bar of a run. It goes through *phases* (``checking files``, then
``compiling kernels without a proven closed form``, then the files again), each redrawn on the
same line: a run that compiles deferred points shows one bar, not one per stage. It is also the
``progress(done, total)`` callback the compile pools take (:meth:`Progress.__call__`), and shows
an ETA once items finish at a measurable rate (items answered at once, cache hits, do not count
towards it).

* :func:`for_terminal` gives a bar when the stream is a terminal (and ``TERM`` is not ``dumb``),
  else None; callers pass it on. The bar appears only once the run has taken ``delay`` seconds
  (a one-second check stays silent) or when a phase that compiles starts, is redrawn at most ten
  times a second, and is erased at the end so the report that follows starts on a clean line.
* :func:`factory` makes a bar per stage for the calibrations (``make(label, total)``): on a
  terminal each finished stage's line is kept; elsewhere nothing is drawn and, given ``log``, a
  line goes to the log at most every ``every`` seconds and at the end of each stage.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Callable

WIDTH = 24


def _fmt(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    """``Progress(stream)``: a bar on ``stream`` (see the module's docstring).

    ``draw=False`` draws nothing (a bar that only logs); ``log`` gets a line at most every
    ``every`` seconds and when a phase completes; ``keep`` leaves a completed phase's line on
    the screen (a newline) instead of overwriting it with the next phase."""

    def __init__(self, stream=None, total: int = 0, label: str = "files", delay: float = 1.0, *,
                 draw: bool = True, log: Callable[[str], None] | None = None, every: float = 30.0,
                 keep: bool = False):
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.label = label
        self.delay = delay
        self.draw = draw
        self.log = log
        self.every = every
        self.keep = keep
        self.done = 0
        self.start = time.monotonic()
        self._phase_start = self.start
        self._first: tuple[int, float] | None = None  # (done, time) of the phase's first update
        self._last = 0.0
        self._last_log = self.start
        self._logged_end = False
        self._shown = False
        self._width = 0

    # -- phases ------------------------------------------------------------------------------
    def set_total(self, total: int, label: str | None = None) -> None:
        """A pass over ``total`` items (the files of a check): counting starts again at 0."""
        self.total, self.done = total, 0
        if label:
            self.label = label
        self._new_phase()

    def phase(self, label: str, total: int = 0, compiles: bool = False) -> None:
        """A new stage (``compiling call sites``); one that compiles shows at once."""
        self.label, self.total, self.done = label, total, 0
        self._new_phase()
        if compiles:
            self.delay = 0.0
        self._draw(force=True)

    def _new_phase(self) -> None:
        self._phase_start = time.monotonic()
        self._first = None
        self._logged_end = False

    # -- updates -----------------------------------------------------------------------------
    def advance(self, n: int = 1) -> None:
        self._seen()
        self.done += n
        self._draw()

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` of ``total`` (a callback's figures, e.g. ``ExactEstimator.many``'s)."""
        if total is not None:
            self.total = total
        if self._first is None:
            self._first = (done, time.monotonic())
        self.done = done
        self._draw()

    __call__ = update  # the ``progress(done, total)`` callback of the compile pools

    def _seen(self) -> None:
        if self._first is None:
            self._first = (self.done, time.monotonic())

    # -- text --------------------------------------------------------------------------------
    def line(self, now: float | None = None) -> str:
        now = time.monotonic() if now is None else now
        if self.total:
            filled = int(WIDTH * min(self.done, self.total) / self.total)
            text = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} {self.label}"
        else:
            text = f"{self.label}..."
        first = self._first
        if self.total and self.done < self.total and first is not None and self.done > first[0] \
                and now - first[1] >= 1.0:
            rate = (now - first[1]) / (self.done - first[0])
            text += f" (ETA {_fmt(rate * (self.total - self.done))})"
        else:
            text += f" ({_fmt(now - self._phase_start)})"
        return text

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        complete = bool(self.total) and self.done >= self.total
        if self.log is not None and not self._logged_end and (complete or now - self._last_log >= self.every):
            self._last_log = now
            self._logged_end = complete
            self.log(self.line(now))
        if not self.draw or now - self.start < self.delay:
            return
        if not force and self._shown and now - self._last < 0.1 and not complete:
            return
        self._last = now
        text = self.line(now)
        pad = max(0, self._width - len(text))
        try:
            self.stream.write("\r" + text + " " * pad)
            if complete and self.keep:
                self.stream.write("\n")
            self.stream.flush()
        except (OSError, ValueError):
            return
        if complete and self.keep:
            self._shown, self._width = False, 0
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


def is_terminal(stream) -> bool:
    if os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):
        return False


def for_terminal(stream, delay: float = 1.0) -> Progress | None:
    """A progress bar on ``stream`` if it is a terminal, else None."""
    return Progress(stream, delay=delay) if is_terminal(stream) else None


def factory(*, log: Callable[[str], None] | None = None, enabled: bool | None = None, every: float = 30.0,
            stream=None):
    """``make(label, total)`` -> a :class:`Progress` for one stage of a calibration: drawn on a
    terminal (``enabled`` None: whether ``stream``, stderr by default, is one), its line kept
    when the stage completes; ``log`` gets a line every ``every`` seconds and at the end."""
    def make(label: str, total: int) -> Progress:
        out = stream if stream is not None else sys.stderr
        draw = is_terminal(out) if enabled is None else enabled
        bar = Progress(out, total=total, label=label, delay=0.0, draw=draw, log=log, every=every, keep=True)
        bar._new_phase()
        return bar

    return make
