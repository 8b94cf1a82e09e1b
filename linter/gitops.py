"""The few git operations ``tilefit pr`` needs, as plain ``git`` subprocess calls.

Every call runs ``git -C <work tree root>`` with a fixed locale and no pager, never touches the
network, and raises :class:`GitError` (with git's own message) when git fails. Paths passed in
and out are POSIX paths relative to the work tree root.

>>> repo = Repo.discover(".")
>>> repo.dirty_paths()          # [] on a clean work tree
>>> repo.head(), repo.current_branch()
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence


class GitError(Exception):
    """git is missing, the folder is not a work tree, or a git command failed."""


def _env(extra: Mapping[str, str] | None = None) -> dict:
    env = dict(os.environ)
    env.update({"LC_ALL": "C", "LANG": "C", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0",
                "GIT_OPTIONAL_LOCKS": "0"})
    if extra:
        env.update(extra)
    return env


def _run(args: Sequence[str], cwd: str, *, input: bytes | None = None, env: Mapping[str, str] | None = None,
         check: bool = True) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, env=_env(env))
    except FileNotFoundError:
        raise GitError("git is not installed (or not on PATH)") from None
    if check and proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip() or proc.stdout.decode("utf-8", "replace").strip()
        raise GitError(f"git {' '.join(args[:2])} failed: {msg}")
    return proc


@dataclass(frozen=True)
class Repo:
    root: str  # the work tree's top folder, absolute

    @classmethod
    def discover(cls, path: str | os.PathLike = ".") -> "Repo":
        """The work tree that holds ``path`` (a file or folder)."""
        p = Path(path).resolve()
        start = p if p.is_dir() else p.parent
        while not start.exists():
            start = start.parent
        proc = _run(["rev-parse", "--show-toplevel"], str(start), check=False)
        if proc.returncode != 0:
            raise GitError(f"{path} is not inside a git work tree")
        return cls(os.path.realpath(proc.stdout.decode().strip()))

    def git(self, *args: str, input: bytes | None = None, env: Mapping[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        return _run(args, self.root, input=input, env=env, check=check)

    def out(self, *args: str) -> str:
        return self.git(*args).stdout.decode("utf-8", "surrogateescape").strip()

    # -- paths -------------------------------------------------------------------------------
    def relpath(self, path: str | os.PathLike) -> str | None:
        """``path`` relative to the root (POSIX), or None when it lies outside the work tree."""
        real = os.path.realpath(path)
        try:
            rel = Path(real).relative_to(self.root)
        except ValueError:
            return None
        return rel.as_posix()

    def tracked(self, paths: Sequence[str]) -> set[str]:
        """Which of ``paths`` (root-relative) git tracks."""
        if not paths:
            return set()
        proc = self.git("ls-files", "-z", "--", *paths)
        return {p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p}

    # -- state -------------------------------------------------------------------------------
    def dirty_paths(self) -> list[str]:
        """What ``git status`` shows: staged, modified and untracked (not ignored) paths."""
        proc = self.git("status", "--porcelain=v1", "-z", "--untracked-files=all")
        out, entries = proc.stdout.decode("utf-8", "surrogateescape").split("\0"), []
        i = 0
        while i < len(out):
            rec = out[i]
            i += 1
            if not rec:
                continue
            entries.append(rec[3:])
            if rec[:1] in ("R", "C"):  # a rename's source follows as its own record
                i += 1
        return entries

    def head(self) -> str | None:
        """The commit HEAD points to (None in a repository without commits)."""
        proc = self.git("rev-parse", "--verify", "-q", "HEAD^{commit}", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def current_branch(self) -> str | None:
        """The checked-out branch's short name; None on a detached HEAD."""
        proc = self.git("symbolic-ref", "-q", "--short", "HEAD", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def branch_tip(self, name: str) -> str | None:
        proc = self.git("rev-parse", "--verify", "-q", f"refs/heads/{name}^{{commit}}", check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def parents(self, rev: str) -> list[str]:
        return self.out("rev-list", "--parents", "-n", "1", rev).split()[1:]

    def changed_between(self, a: str, b: str) -> set[str]:
        proc = self.git("diff", "--name-only", "-z", "--no-renames", a, b, "--")
        return {p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p}

    def blob(self, rev: str, path: str) -> bytes | None:
        proc = self.git("cat-file", "blob", f"{rev}:{path}", check=False)
        return proc.stdout if proc.returncode == 0 else None

    def identity_configured(self) -> bool:
        name = self.git("config", "user.name", check=False).stdout.strip()
        email = self.git("config", "user.email", check=False).stdout.strip()
        return bool(name and email) or bool(os.environ.get("GIT_AUTHOR_EMAIL") and os.environ.get("GIT_COMMITTER_EMAIL"))

    # -- changes -----------------------------------------------------------------------------
    def switch(self, name: str, *, create: bool = False, reset: bool = False) -> None:
        """Check out branch ``name``; ``create``: a new one at HEAD; ``reset``: move an existing
        one to HEAD (``checkout -B``). Local changes are carried along as git allows."""
        if reset:
            self.git("checkout", "-q", "-B", name)
        elif create:
            self.git("checkout", "-q", "-b", name)
        else:
            self.git("checkout", "-q", name)

    def checkout_detached(self, commit: str) -> None:
        self.git("checkout", "-q", "--detach", commit)

    def set_branch(self, name: str, commit: str) -> None:
        self.git("branch", "-f", "-q", name, commit)

    def delete_branch(self, name: str) -> None:
        self.git("branch", "-D", "-q", name)

    def restore(self, paths: Sequence[str], rev: str = "HEAD") -> None:
        """Index and work tree of ``paths`` back to ``rev``."""
        if paths:
            self.git("reset", "-q", rev, "--", *paths)
            self.git("checkout", "-q", rev, "--", *paths)

    def commit(self, paths: Sequence[str], message: str, *, author: str | None = None,
               identity: Mapping[str, str] | None = None, verify: bool = True) -> str:
        """Stage exactly ``paths`` and commit them (nothing else that may be staged: ``--only``);
        return the new commit."""
        self.git("add", "--", *paths)
        args = ["commit", "-q", "--only", "-F", "-"]
        if author:
            args += ["--author", author]
        if not verify:
            args.append("--no-verify")
        self.git(*args, "--", *paths, input=message.encode("utf-8"), env=identity)
        return self.out("rev-parse", "HEAD")
