"""Paths relative to the project root (ruff's): the folder of the pyproject.toml that holds the
configuration, else the current folder. Per-file ignores, excludes and the baseline's
fingerprints match these, so a run from a subfolder or with other spellings of a path
(``./configs``, an absolute path) finds the same files and the same findings; SARIF and GitLab
reports carry them (GitHub code scanning needs paths relative to the repository)."""

from __future__ import annotations

import os
from functools import lru_cache


def relative_to(path: str, root: str) -> str | None:
    """``path`` (absolute, or relative to the current folder) relative to ``root``, with POSIX
    separators; None when it lies outside ``root``."""
    full = os.path.abspath(path)
    base = _abs_root(root)
    if full.startswith(base) and full[len(base):len(base) + 1] == os.sep and os.sep == "/" and "/." not in full:
        return full[len(base) + 1:]  # the common case: a file under the root (what relpath gives)
    if os.sep == "/" and base != "/" and full != base and not full.startswith(base + "/"):
        return None  # both normalised: relpath would climb out of the root ("../...")
    try:
        rel = os.path.relpath(full, base)
    except ValueError:  # another drive (Windows)
        return None
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def _abs_root(root: str) -> str:
    return _abs_absolute(root) if os.path.isabs(root) else os.path.abspath(root)  # relative: the cwd's


@lru_cache(maxsize=64)
def _abs_absolute(root: str) -> str:
    return os.path.abspath(root)


def project_path(path: str, root: str) -> str:
    """The root-relative path, or the absolute path (POSIX separators) for a file outside it."""
    rel = relative_to(path, root)
    if rel is not None:
        return rel
    full = os.path.abspath(path)
    return full.replace(os.sep, "/") if os.sep != "/" else full
