"""Counted words in messages: ``1 file``, ``2 files`` (one rule, read by the CLI, the reports and
the call-site statistics; it imports nothing of tilefit, so any layer may use it)."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``; ``many`` for irregular plurals (``1 entry``, ``2 entries``)."""
    return f"{n} {word if n == 1 else (many or word + 's')}"
