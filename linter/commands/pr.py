"""``tilefit pr``: fix, then commit the fixes on a branch of their own and write the PR body.

A command of its own rather than ``check --fix --commit``: it has its own preconditions (a
clean git work tree), its own outputs (a branch, a commit, a Markdown body) and its own exit
codes, and none of check's output options (formats, ``-o``, ``--statistics``, ``--diff``) mean
anything for it. The options it shares with ``check`` (targets, rule selection, estimator,
configuration, fix safety and margin) are check's own Click parameters, so they cannot drift.

Exit codes: 0 the fixes are committed (or the branch already held them), or nothing needed a
fix; 2 refused (dirty work tree, not a git repository, a fix that did not verify, git failed)
or a usage error. Findings that no fix clears do not fail the command: they are listed in the
body, and ``tilefit check`` is the gate.
"""

from __future__ import annotations

import shlex
import sys

import click

from tilefit.api import CheckOptions, UsageError

from .check import check as _check
from .common import fail, plural, settings_or_exit, split_codes

# check's options that mean the same for pr (shared Click parameters)
SHARED = ("paths", "targets", "select", "extend_select", "ignore", "estimator", "baseline", "device_files",
          "triton_version", "config_file", "isolated", "force_exclude", "respect_gitignore", "allow_import",
          "engine_kernels", "unsafe_fixes", "fix_margin")


def check_options(params: dict):
    """(paths, CheckOptions, Settings) from the shared options' values."""
    import os

    settings = settings_or_exit(params.get("config_file"), bool(params.get("isolated")))
    engine_kernels = params.get("engine_kernels")
    if engine_kernels and engine_kernels not in ("installed", "vllm", "sglang") and not os.path.exists(engine_kernels):
        fail(f"--engine-kernels {engine_kernels}: no such file or folder")
    opts = CheckOptions(
        targets=list(params.get("targets") or ()),
        select=split_codes(params["select"]) if params.get("select") else None,
        extend_select=split_codes(params.get("extend_select")),
        ignore=split_codes(params.get("ignore")),
        estimator=params.get("estimator"),
        baseline=params.get("baseline"),
        force_exclude=bool(params.get("force_exclude")),
        respect_gitignore=params.get("respect_gitignore"),
        device_files=list(params.get("device_files") or ()),
        triton_version=params.get("triton_version"),
        allow_import=bool(params.get("allow_import")),
        engine_kernels=engine_kernels,
        unsafe_fixes=params.get("unsafe_fixes"),
        fix_margin=params.get("fix_margin"),
        use_cache=False,
    )
    return list(params.get("paths") or ()) or ["."], opts, settings


def run_from_params(params: dict, *, commit: bool = True, argv=None):
    """Run the flow for a parsed command line; returns a :class:`tilefit.pullrequest.PrOutcome`
    (the Action calls this with ``commit=False`` for its ``fix`` mode)."""
    from tilefit.pullrequest import run_pr

    paths, opts, settings = check_options(params)
    command = "tilefit pr " + shlex.join(argv) if argv is not None else None
    return run_pr(paths, opts, settings, commit=commit, dry_run=bool(params.get("dry_run")),
                  author=params.get("author"), verify=params.get("verify", True), command=command,
                  own_files=[params["body"]] if params.get("body") else [])


def _pr_callback(**params):
    from tilefit.pullrequest import PrRefused

    import os

    argv = sys.argv[2:] if len(sys.argv) > 1 and sys.argv[1] == "pr" else None
    body_file = params.get("body")
    if body_file and not os.path.isdir(os.path.dirname(os.path.abspath(body_file))):
        fail(f"--body {body_file}: the folder {os.path.dirname(os.path.abspath(body_file))} does not exist")
    try:
        out = run_from_params(params, argv=argv)
    except (PrRefused, UsageError) as exc:
        fail(str(exc))
        return
    if body_file:
        from tilefit.atomicfile import write_atomic

        try:
            write_atomic(body_file, out.body.encode("utf-8"))
        except OSError as exc:
            fail(f"cannot write the PR body to {body_file}: {exc}")
    else:
        click.echo(out.body, nl=False)
    if not params.get("quiet"):
        click.echo(describe(out, body_file), err=True)
    sys.exit(0)


def describe(out, body_file: str | None) -> str:
    """What happened, and the next commands (push, open the PR), for stderr."""
    n = len(out.files)
    what = plural(n, 'file')
    lines = []
    if out.status == "nothing-to-fix":
        left = sum(1 for d in out.fix.check.diagnostics if d.severity.value != "info")
        lines.append("Nothing to fix: no branch created." + (
            f" {plural(left, 'diagnostic')} {'remains' if left == 1 else 'remain'} that no applicable fix clears "
            "(`tilefit check` lists them)." if left else ""))
    elif out.status == "dry-run":
        lines.append(f"Would fix {what} and commit {'it' if n == 1 else 'them'} on branch {out.branch} "
                     "(dry run: nothing written).")
    elif out.status == "applied":
        lines.append(f"Fixed {what} in the work tree, not committed (branch name for "
                     f"{'it' if n == 1 else 'them'}: {out.branch}).")
    else:
        if out.status == "reused":
            lines.append(f"Branch {out.branch} already holds these fixes on top of {out.base} "
                         f"({out.commit[:12]}); switched to it, nothing new committed.")
        else:
            verb = "Created" if out.status == "created" else "Updated"
            lines.append(f"{verb} branch {out.branch} from {out.base}: commit {out.commit[:12]} fixes {what}.")
        lines.append("Push it and open the pull request:")
        lines.append(f"  git push --force-with-lease -u origin {out.branch}")
        lines.append(f"  gh pr create --head {out.branch} --title {shlex.quote(out.title)} "
                     f"--body-file {shlex.quote(body_file) if body_file else 'FILE  # the body above; --body FILE writes it'}")
    if out.skipped:
        lines.append("Left unchanged (not tracked by git): " + ", ".join(out.skipped))
    return "\n".join(lines)


pr = click.Command(
    name="pr",
    callback=_pr_callback,
    params=[p for p in _check.params if p.name in SHARED] + [
        click.Option(["--body"], type=click.Path(dir_okay=False), default=None, metavar="FILE",
                     help="Write the pull-request body (Markdown) to FILE. [default: stdout]"),
        click.Option(["--dry-run"], is_flag=True,
                     help="Print the branch name and the body; write, switch and commit nothing."),
        click.Option(["--author"], default=None, metavar="'NAME <EMAIL>'",
                     help="The commit's author (git's own identity otherwise)."),
        click.Option(["--verify/--no-verify"], default=True,
                     help="Run the repository's commit hooks (git commit --no-verify skips them)."),
        click.Option(["-q", "--quiet"], is_flag=True, help="Print nothing but the body."),
    ],
    help="Fix offending entries, commit them on branch tilefit/fix-<findings hash>, write the PR body.\n\n"
         "Needs a clean git work tree. Only the files tilefit changed are committed; the message names "
         "the tables and targets. The body says what crashed where (bytes against each device's limit), "
         "each entry's old and new config and the predicted speed against the old entry and the naive "
         "fix. A second run on the same findings reuses the same branch. Nothing is pushed.",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
