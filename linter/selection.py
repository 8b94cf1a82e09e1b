"""Which rule codes run: select / extend-select / ignore and per-file ignores (flake8's logic).

A code is selected when the longest prefix that matches it among the selectors is a select
(``ALL`` is the empty prefix, shorter than any code). Without ``select``, every rule that is
enabled by default is selected. Per-file ignores add ignores for paths matching a glob
(``**`` crosses folders); a ``#/json/pointer`` suffix scopes an ignore to one entry.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping


class SelectionError(ValueError):
    pass


def _prefix(sel: str) -> str:
    return "" if sel.upper() == "ALL" else sel.upper()


def validate_selectors(selectors: Iterable[str], known_codes: Iterable[str], option: str) -> list[str]:
    codes = list(known_codes)
    out = []
    for sel in selectors:
        sel = sel.strip()
        if not sel:
            continue
        p = _prefix(sel)
        if not any(code.startswith(p) for code in codes):
            raise SelectionError(f"{option}: {sel!r} matches no rule code (see `tilefit rule --all`)")
        out.append(sel)
    return out


@dataclass
class Selection:
    select: list[str] | None = None  # None: the default set
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: Mapping[str, list[str]] = field(default_factory=dict)

    def decides(self, code: str, default_enabled: bool, extra_ignores: Iterable[str] = ()) -> bool:
        """True when ``code`` runs. The longest matching selector wins; an ignore wins a tie."""
        best_len, best = -1, False
        if self.select is None:
            if default_enabled:
                best_len, best = 0, True
        else:
            for sel in self.select:
                p = _prefix(sel)
                if code.startswith(p) and len(p) > best_len:
                    best_len, best = len(p), True
        for sel in self.extend_select:
            p = _prefix(sel)
            if code.startswith(p) and len(p) >= best_len:
                best_len, best = len(p), True
        for ign in list(self.ignore) + list(extra_ignores):
            p = _prefix(ign)
            if code.startswith(p) and len(p) >= best_len:
                best_len, best = len(p), False
        return best

    def file_ignores(self, path: str) -> tuple[list[str], dict[str, list[str]]]:
        """(codes ignored for the whole file, {pointer: codes} for single entries)."""
        whole: list[str] = []
        scoped: dict[str, list[str]] = {}
        for pattern, codes in self.per_file_ignores.items():
            glob, _, pointer = pattern.partition("#")
            if _match(path, glob):
                if pointer:
                    scoped.setdefault(pointer, []).extend(codes)
                else:
                    whole.extend(codes)
        return whole, scoped


_GLOB_CACHE: dict[str, re.Pattern] = {}


def _glob_regex(glob: str) -> re.Pattern:
    rx = _GLOB_CACHE.get(glob)
    if rx is None:
        parts = []
        i = 0
        while i < len(glob):
            if glob.startswith("**/", i):
                parts.append("(?:.*/)?")
                i += 3
            elif glob.startswith("**", i):
                parts.append(".*")
                i += 2
            else:
                ch = glob[i]
                if ch == "*":
                    parts.append("[^/]*")
                elif ch == "?":
                    parts.append("[^/]")
                else:
                    parts.append(re.escape(ch))
                i += 1
        rx = re.compile("".join(parts) + r"\Z")
        _GLOB_CACHE[glob] = rx
    return rx


def _match(path: str, glob: str) -> bool:
    """Match a path against a glob. A glob without '/' matches the file name in any folder;
    one with '/' matches the whole path or any tail of it that starts at a folder."""
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    if "/" not in glob:
        return fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], glob)
    rx = _glob_regex(glob[2:] if glob.startswith("./") else glob)
    if rx.match(path):
        return True
    return any(rx.match(path[i + 1:]) for i, ch in enumerate(path) if ch == "/")


def path_matches(path: str, glob: str) -> bool:
    return _match(path, glob)
