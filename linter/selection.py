"""Which rule codes run: select / extend-select / ignore and per-file ignores (flake8's logic).

A code is selected when the longest prefix that matches it among the selectors is a select
(``ALL`` is the empty prefix, shorter than any code). Without ``select``, every rule that is
enabled by default is selected. Per-file ignores add ignores for paths matching a glob
(:mod:`tilefit.globs`: gitignore-style, relative to the project root, braces expanded); a
``#/json/pointer`` suffix scopes an ignore to one entry.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from .globs import Glob
from .paths import relative_to


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
    root: str | None = None  # what per-file-ignore globs are relative to (None: the current folder)
    _globs: list | None = field(default=None, init=False, repr=False, compare=False)

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
        if not self.per_file_ignores:
            return whole, scoped
        if self._globs is None:
            self._globs = []
            for pattern, codes in self.per_file_ignores.items():
                glob, _, pointer = pattern.partition("#")
                self._globs.append((Glob(glob), pointer, list(codes)))
        rel = relative_to(path, self.root if self.root is not None else os.getcwd())
        name = os.path.basename(path)
        for glob, pointer, codes in self._globs:
            if glob.matches(rel, name):
                if pointer:
                    scoped.setdefault(pointer, []).extend(codes)
                else:
                    whole.extend(codes)
        return whole, scoped
