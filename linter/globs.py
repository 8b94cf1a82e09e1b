"""Globs of ``exclude``, ``extend-exclude`` and ``per-file-ignores`` (ruff's), and ``.gitignore``.

A glob is a gitignore-style pattern (pathspec's ``gitwildmatch``) matched against a path
relative to the project root (:mod:`tilefit.paths`): a pattern without a slash matches a file or
folder name at any depth (``*.json``, ``legacy``), one with a slash is anchored at the root
(``configs/old/*.json``, ``b/x[0-9].json``), ``**`` crosses folders (``**/tests/*``), and a
folder's pattern covers everything beneath it. Braces are expanded first (pathspec has none):
``**/{tests,docs}/*`` is ``**/tests/*`` and ``**/docs/*``. A pattern that equals the path
literally matches too, so a table's own name works although its ``[128, 128]`` reads as a
character class. A file outside the project root is matched by its name only.

pathspec is a dependency because gitignore matching has many corner cases (negation, anchoring,
``**``, folder-only patterns, the last match winning) that its GitIgnoreSpec gets right; it is
imported only when a glob or a .gitignore is actually matched.
"""

from __future__ import annotations

import os
from typing import Iterable


def expand_braces(pattern: str) -> list[str]:
    """``a{b,c{d,e}}f`` -> ``abf``, ``acdf``, ``acef`` (bash's brace expansion; a group
    without a comma, or an unbalanced brace, stays literal)."""
    depth = 0
    start = None
    commas: list[int] = []
    for i, ch in enumerate(pattern):
        if ch == "{":
            if depth == 0:
                start, commas = i, []
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                if not commas:
                    # a literal group: expand what follows it
                    return [pattern[:i + 1] + rest for rest in expand_braces(pattern[i + 1:])]
                cuts = [start] + commas + [i]
                head, tail = pattern[:start], pattern[i + 1:]
                out: list[str] = []
                for a, b in zip(cuts, cuts[1:]):
                    for middle in expand_braces(pattern[a + 1:b]):
                        for rest in expand_braces(tail):
                            out.append(head + middle + rest)
                return list(dict.fromkeys(out))
        elif ch == "," and depth == 1:
            commas.append(i)
    return [pattern]


class Glob:
    """One user pattern (braces expanded), compiled on first use."""

    __slots__ = ("pattern", "_alternatives", "_spec")

    def __init__(self, pattern: str):
        self.pattern = pattern
        text = pattern[2:] if pattern.startswith("./") else pattern
        self._alternatives = expand_braces(text)
        self._spec = None

    def _compiled(self):
        if self._spec is None:
            import pathspec

            self._spec = pathspec.PathSpec.from_lines(_pattern_kind(pathspec), self._alternatives)
        return self._spec

    def matches(self, rel: str | None, name: str, is_dir: bool = False) -> bool:
        """``rel``: the path relative to the project root (None outside it); ``name``: its last
        part. Folders are matched with a trailing slash (``build/`` matches folders only)."""
        if self._literal(rel, name, is_dir):
            return True
        subject = rel if rel is not None else name
        return self._compiled().match_file(subject + "/" if is_dir else subject)

    def _literal(self, rel: str | None, name: str, is_dir: bool) -> bool:
        for alt in self._alternatives:
            if alt.endswith("/") and not is_dir:
                continue
            text = alt.strip("/")
            if "/" not in alt.rstrip("/"):
                if name == text:
                    return True
            elif rel is not None and (rel == text or rel.startswith(text + "/")):
                return True
        return False


def _pattern_kind(pathspec) -> str:
    """pathspec 1.x calls gitignore's pattern syntax "gitignore" ("gitwildmatch" is deprecated)."""
    try:
        pathspec.util.lookup_pattern("gitignore")
        return "gitignore"
    except KeyError:
        return "gitwildmatch"


class GlobSet:
    """Several patterns; a path matches when one of them does."""

    def __init__(self, patterns: Iterable[str]):
        self.globs = [Glob(p) for p in patterns if p]

    def __bool__(self) -> bool:
        return bool(self.globs)

    def matches(self, rel: str | None, name: str, is_dir: bool = False) -> bool:
        return any(g.matches(rel, name, is_dir) for g in self.globs)


class GitIgnore:
    """The ``.gitignore`` files of git work trees (and ``.git/info/exclude``), as git reads them:
    only inside a work tree, each file's patterns relative to its folder, a deeper file's match
    overriding a shallower one's, the last matching line of a file winning (negations
    included). Files are read once per folder."""

    def __init__(self):
        self._repos: dict[str, str | None] = {}
        self._specs: dict[str, object] = {}

    def _repo_root(self, folder: str) -> str | None:
        hit = self._repos.get(folder, ...)
        if hit is not ...:
            return hit
        if os.path.exists(os.path.join(folder, ".git")):
            root = folder
        else:
            parent = os.path.dirname(folder)
            root = None if parent == folder else self._repo_root(parent)
        self._repos[folder] = root
        return root

    def _spec(self, path: str):
        hit = self._specs.get(path, ...)
        if hit is not ...:
            return hit
        spec = None
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            lines = None
        if lines:
            import pathspec

            spec = pathspec.GitIgnoreSpec.from_lines(lines)
        self._specs[path] = spec
        return spec

    def in_work_tree(self, folder: str) -> bool:
        """Whether ``folder`` lies in a git work tree: outside one, :meth:`ignored` is False for
        everything in it."""
        return self._repo_root(os.path.abspath(folder)) is not None

    def ignored(self, path: str, is_dir: bool = False) -> bool:
        full = os.path.abspath(path)
        folder = os.path.dirname(full)
        repo = self._repo_root(folder)
        if repo is None:
            return False
        suffix = "/" if is_dir else ""
        here = folder
        while True:
            decided = _decide(self._spec(os.path.join(here, ".gitignore")), full, here, suffix)
            if decided is not None:
                return decided
            if here == repo:
                break
            here = os.path.dirname(here)
        decided = _decide(self._spec(os.path.join(repo, ".git", "info", "exclude")), full, repo, suffix)
        return bool(decided)


def _decide(spec, full: str, base: str, suffix: str) -> bool | None:
    if spec is None:
        return None
    rel = os.path.relpath(full, base)
    if os.sep != "/":
        rel = rel.replace(os.sep, "/")
    return spec.check_file(rel + suffix).include

