"""Text as a terminal may show it: everything it would act on escaped (one fact, read by the
reporters, the CLI's messages and :func:`tilefit.api.print_errors`; it imports nothing of
tilefit, so any layer may use it)."""

from __future__ import annotations

import re

# What must not reach a terminal raw: C0/C1 controls and DEL (a tab or an ANSI escape in a file
# name would move the cursor or recolour the output), bidirectional overrides (they reorder what
# is shown), and lone surrogates (undecodable bytes of a file name, which stdout cannot encode).
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                          "\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_char(m: re.Match) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    n = ord(c)
    if 0xDC80 <= n <= 0xDCFF:  # os.fsdecode's surrogateescape: the original byte
        return f"\\x{n - 0xDC00:02x}"
    return f"\\x{n:02x}" if n <= 0xFF else f"\\u{n:04x}"


def printable(text: str) -> str:
    """``text`` with everything a terminal would act on escaped (``\\t``, ``\\x1b``,
    ``\\u202e``; an undecodable file-name byte as ``\\xff``): what the text formats print."""
    if text.isprintable() and text.isascii():
        return text
    return _UNPRINTABLE.sub(_escape_char, text)
