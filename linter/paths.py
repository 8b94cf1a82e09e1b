"""Paths relative to the project root (ruff's): the folder of the pyproject.toml that holds the
configuration, else the current folder. Per-file ignores, excludes and the baseline's
fingerprints match these, so a run from a subfolder or with other spellings of a path
(``./configs``, an absolute path) finds the same files and the same findings; SARIF and GitLab
reports carry them (GitHub code scanning needs paths relative to the repository)."""

from __future__ import annotations

import os


def relative_to(path: str, root: str) -> str | None:
    """``path`` (absolute, or relative to the current folder) relative to ``root``, with POSIX
    separators; None when it lies outside ``root``."""
    full = os.path.abspath(path)
    base = os.path.abspath(root)
    try:
        rel = os.path.relpath(full, base)
    except ValueError:  # another drive (Windows)
        return None
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/") if os.sep != "/" else rel


def project_path(path: str, root: str) -> str:
    """The root-relative path, or the absolute path (POSIX separators) for a file outside it."""
    rel = relative_to(path, root)
    if rel is not None:
        return rel
    full = os.path.abspath(path)
    return full.replace(os.sep, "/") if os.sep != "/" else full
