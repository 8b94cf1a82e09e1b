"""Fix, branch, commit and describe: the pull request flow of ``tilefit pr`` and the GitHub Action.

1. Refuse unless the work tree is clean (``git status`` shows nothing: staged, modified or
   untracked), so the commit holds tilefit's edits and nothing else.
2. Plan the fixes (:func:`tilefit.app.run_fix`, nothing written yet). Only files git tracks are
   changed; others are named in the body and left alone.
3. Name the branch by the findings the fixes clear (:func:`tilefit.fix.prbody.branch_name`).
   When that branch already holds exactly these edits on top of HEAD, check it out and change
   nothing (a second run on the same findings is a no-op). Otherwise create it at HEAD (or move
   it there), write the files atomically, and commit only them.
4. Compose the commit message and the PR body (:mod:`tilefit.fix.prbody`).

Any failure after the branch was touched puts everything back: the files, the branch (deleted,
or moved back to its old commit) and the checked-out branch. Nothing here pushes or talks to a
network; push with ``git push`` and open the PR with ``gh pr create --body-file`` or an action.

``commit=False`` (the Action's ``fix`` mode) writes the fixes into the work tree and stops there,
for a later step (e.g. peter-evans/create-pull-request) to commit, using the same branch name,
title and body.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Sequence

from tilefit import __version__
from tilefit.api import CheckOptions
from tilefit.app import run_check, run_fix
from tilefit.config import Settings
from tilefit.fix import FixResult
from tilefit.fix.prbody import FixedFinding, branch_name, commit_message, fixed_findings, pr_body, title
from tilefit.fix.runner import FixVerificationError, write_fixed
from tilefit.gitops import GitError, Repo

# The identity of commits made in GitHub Actions when the workflow configured none.
ACTIONS_BOT = {"GIT_AUTHOR_NAME": "github-actions[bot]",
               "GIT_AUTHOR_EMAIL": "41898282+github-actions[bot]@users.noreply.github.com",
               "GIT_COMMITTER_NAME": "github-actions[bot]",
               "GIT_COMMITTER_EMAIL": "41898282+github-actions[bot]@users.noreply.github.com"}
SHOWN_DIRTY = 5


class PrRefused(Exception):
    """The flow stopped before changing anything (or after undoing what it changed): exit 2."""


@dataclass
class PrOutcome:
    # "nothing-to-fix" | "dry-run" | "applied" (written, not committed) | "created" | "updated" (an
    # existing branch moved to the new commit) | "reused" (the branch already held these edits)
    status: str
    fix: FixResult
    findings: list[FixedFinding]
    files: list[str]  # changed files, relative to the repository root (or the current folder)
    title: str
    message: str  # the commit message
    body: str  # the PR body (Markdown)
    branch: str | None = None
    commit: str | None = None
    base: str | None = None  # the branch (or commit) the fix branch starts from
    skipped: list[str] = field(default_factory=list)  # changed files git does not track: left alone

    @property
    def changed(self) -> bool:
        return self.status in ("applied", "created", "updated", "reused")


def run_pr(paths: Sequence[str], opts: CheckOptions | None = None, settings: Settings | None = None, *,
           commit: bool = True, dry_run: bool = False, author: str | None = None, verify: bool = True,
           command: str | None = None, own_files: Sequence[str] = ()) -> PrOutcome:
    """The whole flow; raises :class:`PrRefused` (dirty tree, not a repository, a fix that did
    not verify, a git failure) with a message for the user. ``own_files``: files this run
    writes itself (the body), which do not make the work tree dirty."""
    try:
        return _run_pr(paths, opts, settings, commit=commit, dry_run=dry_run, author=author, verify=verify,
                       command=command, own_files=own_files)
    except GitError as exc:  # reading the repository's state failed: nothing was changed yet
        raise PrRefused(str(exc)) from None


def _run_pr(paths, opts, settings, *, commit, dry_run, author, verify, command, own_files) -> PrOutcome:
    opts = opts or CheckOptions()
    settings = settings or Settings()
    paths = list(paths) or ["."]
    repo = _repo(paths[0], required=commit and not dry_run)
    if repo is not None and commit and not dry_run:
        own = {repo.relpath(p) for p in own_files}
        dirty = [p for p in repo.dirty_paths() if p not in own]
        if dirty:
            shown = ", ".join(dirty[:SHOWN_DIRTY]) + (f" and {len(dirty) - SHOWN_DIRTY} more"
                                                     if len(dirty) > SHOWN_DIRTY else "")
            raise PrRefused(f"the work tree has uncommitted changes ({shown}); commit or stash them "
                            "(`git stash -u`) first, so the fix commit holds tilefit's edits only")
        if repo.head() is None:
            raise PrRefused("the repository has no commit yet; commit the configs first")
    fix = run_fix(paths, opts, settings, write=False)
    problems = fix.errors + fix.check.errors + [f"{p}: no such file or folder" for p in fix.check.missing_paths]
    if problems:
        raise PrRefused("; ".join(problems))

    relpath = repo.relpath if repo is not None else _cwd_relpath
    changed = [ff for ff in fix.files if ff.new != ff.original]
    skipped: list[str] = []
    if repo is not None:
        rel = {ff.path: repo.relpath(ff.path) for ff in changed}
        tracked = repo.tracked([r for r in rel.values() if r is not None])
        skipped = sorted(r or os.path.abspath(p) for p, r in rel.items() if r not in tracked)
        changed = [ff for ff in changed if rel[ff.path] in tracked]
    targets = list(settings.targets) + list(opts.targets)
    findings = fixed_findings(fix, relpath, changed)
    branch = branch_name(findings) if changed else None
    files = [relpath(ff.path) or ff.path for ff in changed]

    def outcome(status: str, result: FixResult = fix, **kw) -> PrOutcome:
        body = pr_body(result, findings, relpath, targets=targets, files=changed, skipped=skipped, branch=branch,
                       command=command, tool_version=__version__, applied=status != "dry-run")
        return PrOutcome(status=status, fix=result, findings=findings, files=files, title=title(changed, targets),
                         message=commit_message(changed, findings, targets, relpath, __version__), body=body,
                         branch=branch, skipped=skipped, **kw)

    if not changed:
        return outcome("nothing-to-fix")
    if dry_run:
        return outcome("dry-run")
    if not commit:
        _write(changed)
        return outcome("applied", _refreshed(fix, changed, opts, settings))

    assert repo is not None and branch is not None
    base = repo.head()
    start = repo.current_branch()
    old_tip = repo.branch_tip(branch)
    if old_tip is not None and _holds(repo, old_tip, base, changed):
        repo.switch(branch)
        return outcome("reused", _refreshed(fix, changed, opts, settings), commit=old_tip, base=start or base)
    identity = _identity(repo, author)
    try:
        repo.switch(branch, create=old_tip is None, reset=old_tip is not None)
        _write(changed)
        sha = repo.commit(files, commit_message(changed, findings, targets, relpath, __version__),
                          author=author, identity=identity, verify=verify)
    except (GitError, OSError, FixVerificationError) as exc:
        _undo(repo, files, base, start, branch, old_tip)
        hint = ""
        if "tell me who you are" in str(exc) or "empty ident" in str(exc):
            hint = " (set git's user.name and user.email, or pass --author 'Name <email>')"
        raise PrRefused(f"could not commit the fixes, nothing was changed: {exc}{hint}") from None
    return outcome("created" if old_tip is None else "updated", _refreshed(fix, changed, opts, settings),
                   commit=sha, base=start or base)


def _repo(path: str, required: bool) -> Repo | None:
    try:
        return Repo.discover(path)
    except GitError as exc:
        if required:
            raise PrRefused(f"{exc}; `tilefit pr` commits its fixes on a new branch of a git repository") from None
        return None


def _cwd_relpath(path: str) -> str:
    rel = os.path.relpath(os.path.realpath(path), os.path.realpath(os.getcwd()))
    return rel.replace(os.sep, "/")


def _holds(repo: Repo, tip: str, base: str | None, changed) -> bool:
    """Is ``tip`` one commit on top of ``base`` that changes exactly these files to these bytes?"""
    if base is None or repo.parents(tip) != [base]:
        return False
    rel = {repo.relpath(ff.path): ff.new for ff in changed}
    if repo.changed_between(base, tip) != set(rel):
        return False
    return all(repo.blob(tip, path) == data for path, data in rel.items())


def _identity(repo: Repo, author: str | None) -> dict | None:
    """Committer (and author) for the commit when git has none configured: the author given, or
    the GitHub Actions bot inside a workflow; otherwise git's own rules (and error) apply."""
    if repo.identity_configured():
        return None
    if author and "<" in author and author.rstrip().endswith(">"):
        name, email = author.split("<", 1)
        email = email.rstrip().rstrip(">")
        return {"GIT_COMMITTER_NAME": name.strip(), "GIT_COMMITTER_EMAIL": email,
                "GIT_AUTHOR_NAME": name.strip(), "GIT_AUTHOR_EMAIL": email}
    if os.environ.get("GITHUB_ACTIONS") == "true":
        return dict(ACTIONS_BOT)
    return None


def _write(changed) -> None:
    for ff in changed:
        write_fixed(ff.path, ff.original, ff.new)
        ff.written = True


def _undo(repo: Repo, files: Sequence[str], base: str | None, start: str | None, branch: str,
          old_tip: str | None) -> None:
    """Back to where the flow started; best effort, every step tried."""
    steps = [lambda: repo.restore(files, base or "HEAD"),
             (lambda: repo.switch(start)) if start else (lambda: repo.checkout_detached(base)),
             (lambda: repo.set_branch(branch, old_tip)) if old_tip else (lambda: repo.delete_branch(branch))]
    for step in steps:
        try:
            step()
        except GitError:
            pass


def _refreshed(fix: FixResult, changed, opts: CheckOptions, settings: Settings) -> FixResult:
    """Python files were fixed in memory (``write=False``): re-check the written ones, so the
    remaining diagnostics are those of the files as they are now. Tables already are."""
    py = [ff.path for ff in changed if not ff.plans]
    if not py:
        return fix
    again = run_check(py, replace(opts, fix=False), settings)
    keep = [d for d in fix.check.diagnostics if d.path not in set(py)]
    diagnostics = sorted(keep + list(again.diagnostics), key=lambda d: d.sort_key)
    return replace(fix, check=replace(fix.check, diagnostics=diagnostics))
