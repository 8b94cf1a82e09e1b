"""Applying the fixes of call-site diagnostics to Python files.

Call-site fixes replace one literal (``num_stages=4`` -> ``3``, ``BLOCK_N=32`` -> ``16``) by byte
offsets; they are all unsafe (a smaller tile or fewer stages changes speed, and the literal may be
shared by other launches). :func:`fix_python` groups them per file, applies them with the fixer's
:func:`tilefit.fix.edits.apply_fixes` (overlapping fixes wait for the next pass) and checks that
the result still parses; writing and re-checking are the caller's (``tilefit check --fix``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterable

from tilefit.model import Applicability, Diagnostic, Fix

from .edits import apply_fixes


@dataclass
class PythonFix:
    path: str
    original: bytes
    fixed: bytes
    applied: list[Fix] = field(default_factory=list)
    error: str | None = None  # the fixed text does not parse (nothing should be written)


def fix_python(diagnostics: Iterable[Diagnostic], required: Applicability = Applicability.UNSAFE,
               read=None) -> dict[str, PythonFix]:
    """New contents of the ``.py`` files whose diagnostics carry fixes at ``required`` or above."""
    from tilefit.readfile import read_bytes

    read = read or read_bytes
    by_path: dict[str, list[Fix]] = {}
    for d in diagnostics:
        if d.pointer is None and d.path.endswith(".py") and d.fix is not None and d.fix.applies(required):
            fixes = by_path.setdefault(d.path, [])
            if all(f is not d.fix for f in fixes):
                fixes.append(d.fix)
    out: dict[str, PythonFix] = {}
    for path, fixes in by_path.items():
        data = read(path)
        new, applied = apply_fixes(data, fixes)
        result = PythonFix(path, data, new, applied)
        try:
            ast.parse(new)
        except SyntaxError as exc:
            result.error = f"the fixed file does not parse: {exc.msg} (line {exc.lineno})"
            result.fixed = data
            result.applied = []
        out[path] = result
    return out
