"""The process-wide time limit of a compile (seconds): :data:`DEFAULT_TIMEOUT`, ``[tool.tilefit]
compile-timeout`` or ``--compile-timeout``. The compile worker (:mod:`tilefit.smem.worker`)
enforces it; it lives apart so that setting it -- every check does -- does not import the
worker's process machinery (sockets, subprocesses, threads)."""

from __future__ import annotations

DEFAULT_TIMEOUT = 120.0
_timeout = [DEFAULT_TIMEOUT]


def default_timeout() -> float:
    return _timeout[0]


def set_default_timeout(seconds: float | None) -> None:
    """The limit of every later compile of this process (``None``: back to the default)."""
    _timeout[0] = float(seconds) if seconds is not None else DEFAULT_TIMEOUT
