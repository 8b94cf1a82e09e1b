"""Colour on a terminal, as ruff and pre-commit do it: ``--color auto|always|never``.

``auto`` colours a stream that is a terminal, unless ``NO_COLOR`` is set to anything but the
empty string (https://no-color.org); ``always`` and ``never`` decide regardless (``always`` also
wins over ``NO_COLOR``, as an explicit choice on the command line should). The escapes are
plain ANSI SGR codes; nothing else is changed in the text, so ``never`` gives the bytes the
uncoloured formats always gave.
"""

from __future__ import annotations

import os

CHOICES = ("auto", "always", "never")

_SGR = {"bold": "1", "red": "31", "yellow": "33", "cyan": "36", "green": "32", "dim": "2"}
SEVERITY = {"error": "red", "warning": "yellow", "info": "cyan"}


def use_color(choice: str | None, stream) -> bool:
    choice = choice or "auto"
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR", ""):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # a closed or odd stream
        return False


def paint(text: str, *styles: str, enabled: bool = True) -> str:
    """``text`` in the given styles (``bold``, ``red``, ...) when ``enabled``."""
    if not enabled or not styles:
        return text
    return f"\x1b[{';'.join(_SGR[s] for s in styles)}m{text}\x1b[0m"
