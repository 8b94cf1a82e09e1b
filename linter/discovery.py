"""From the paths on the command line to the files to check.

Folders are walked (hidden folders and the usual virtual-environment and build folders are
skipped); each ``.json`` file is classified by its name, and files that are no tuning table are
left out silently (a pre-commit hook passes every JSON file of a commit). Files named
explicitly are always checked unless ``--force-exclude`` applies the excludes to them too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .families import TableMeta, classify
from .selection import path_matches

DEFAULT_EXCLUDE = (".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "__pycache__", "node_modules",
                   "build", "dist", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages")


@dataclass
class Discovered:
    files: list[tuple[str, TableMeta]] = field(default_factory=list)
    python_files: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    skipped: int = 0  # JSON files that are no tuning table


def _excluded(path: str, patterns) -> bool:
    return any(path_matches(path, p) or path_matches(path, p.rstrip("/") + "/**") for p in patterns)


def discover(paths, exclude=(), force_exclude: bool = False, python: bool = False) -> Discovered:
    out = Discovered()
    patterns = tuple(exclude)
    for given in paths:
        if not os.path.exists(given):
            out.missing.append(given)
            continue
        if os.path.isdir(given):
            for dirpath, dirnames, filenames in os.walk(given):
                dirnames[:] = sorted(d for d in dirnames if d not in DEFAULT_EXCLUDE
                                     and not _excluded(os.path.join(dirpath, d), patterns))
                for name in sorted(filenames):
                    full = os.path.join(dirpath, name)
                    if patterns and _excluded(full, patterns):
                        continue
                    _add(out, full, python)
        else:
            if force_exclude and patterns and _excluded(given, patterns):
                continue
            _add(out, given, python, explicit=True)
    return out


def _add(out: Discovered, path: str, python: bool, explicit: bool = False) -> None:
    if path.endswith(".json"):
        meta = classify(path)
        if meta is None:
            out.skipped += 1
        else:
            out.files.append((path, meta))
    elif python and path.endswith(".py"):
        out.python_files.append(path)
    elif explicit:
        out.skipped += 1
