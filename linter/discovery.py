"""From the paths on the command line to the files to check.

Folders are walked (hidden folders and the usual virtual-environment and build folders are
skipped, and, inside a git work tree, what its ``.gitignore`` files ignore, as ruff does;
``--no-respect-gitignore`` turns that off; a folder named on the command line is walked even
if ignored); each ``.json`` file is classified by its name, and
files that are no tuning table are left out silently (a pre-commit hook passes every JSON file
of a commit). ``exclude`` globs (:mod:`tilefit.globs`) are matched relative to the project root.
Files named explicitly are always checked unless ``--force-exclude`` applies the excludes to
them too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .families import TableMeta, classify
from .globs import GitIgnore, GlobSet
from .paths import relative_to

DEFAULT_EXCLUDE = (".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "__pycache__", "node_modules",
                   "build", "dist", ".mypy_cache", ".pytest_cache", ".ruff_cache", "site-packages")


@dataclass
class Discovered:
    files: list[tuple[str, TableMeta]] = field(default_factory=list)
    python_files: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    skipped: int = 0  # JSON files that are no tuning table


def discover(paths, exclude=(), force_exclude: bool = False, python: bool = False, root: str | None = None,
             respect_gitignore: bool = True) -> Discovered:
    """The files under ``paths``; ``exclude`` globs are relative to ``root`` (the project root,
    default the current folder)."""
    out = Discovered()
    globs = GlobSet(exclude)
    base = root if root is not None else os.getcwd()
    gitignore = GitIgnore() if respect_gitignore else None

    def excluded(path: str, is_dir: bool = False) -> bool:
        return bool(globs) and globs.matches(relative_to(path, base), os.path.basename(path), is_dir)

    for given in paths:
        if not os.path.exists(given):
            out.missing.append(given)
            continue
        if os.path.isdir(given):
            # A folder named on the command line is walked even when git ignores it (as ruff and
            # ripgrep do): then its own contents are not filtered by .gitignore either.
            tree = gitignore if gitignore is not None and not gitignore.ignored(given, is_dir=True) else None
            for dirpath, dirnames, filenames in os.walk(given):
                # asked of the folder once, not of each of its files and folders
                git = tree if tree is not None and tree.in_work_tree(dirpath) else None
                dirnames[:] = sorted(
                    d for d in dirnames if d not in DEFAULT_EXCLUDE
                    and not excluded(os.path.join(dirpath, d), is_dir=True)
                    and not (git is not None and git.ignored(os.path.join(dirpath, d), is_dir=True)))
                # a folder named like a config file is one the engine would fail to open: IO001
                for name in [d for d in dirnames if d.endswith(".json")] + sorted(filenames):
                    if not name.endswith(".json") and not (python and name.endswith(".py")):
                        continue
                    full = os.path.join(dirpath, name)
                    if excluded(full) or (git is not None and git.ignored(full)):
                        continue
                    _add(out, full, python)
        else:
            if force_exclude and excluded(given):
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
