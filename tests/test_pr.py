"""``tilefit pr`` in temporary git repositories of real corpus tables: the branch, the commit
(only the changed files, the message), the PR body, refusals, idempotence, rollback."""

from __future__ import annotations

import json
import re
import shutil
import stat
from pathlib import Path

import pytest
from gitrepo import FITTING, OVERFLOWING, VLLM_4090, VLLM_H200, fix_branches, git, make_repo

ARGS = ("configs", "--isolated", "--estimator", "analytic", "--target", "rtx4090")
BRANCH = re.compile(r"^tilefit/fix-[0-9a-f]{10}$")


@pytest.fixture
def repo(git_env, corpus, monkeypatch):
    root = make_repo(git_env / "repo", corpus)
    monkeypatch.chdir(root)
    return root


def _pr(cli, *extra):
    return cli("pr", *ARGS, *extra)


def _check_json(cli, *paths):
    r = cli("check", *paths, "--isolated", "--estimator", "analytic", "--target", "rtx4090",
            "--output-format", "json", "--exit-zero")
    return json.loads(r.stdout)


def test_branch_commit_and_body(cli, repo, tmp_path):
    before = _check_json(cli, "configs")
    crashed = [d for d in before if d["code"] == "SMEM001" and "rtx4090" in d["data"]["targets"]]
    assert {d["filename"] for d in crashed} == set(OVERFLOWING)
    body_file = tmp_path / "body.md"

    r = _pr(cli, "--body", body_file)
    assert r.exit_code == 0, r.output
    branch = git(repo, "branch", "--show-current")
    assert BRANCH.match(branch), branch
    assert f"Created branch {branch} from main" in r.stderr
    # one commit on top of main, holding exactly the two overflowing tables
    assert git(repo, "rev-list", "--count", "main..HEAD") == "1"
    assert git(repo, "rev-parse", "HEAD^") == git(repo, "rev-parse", "main")
    assert set(git(repo, "diff", "--name-only", "main", "HEAD").splitlines()) == set(OVERFLOWING)
    assert git(repo, "status", "--porcelain") == ""
    # the committed tables fit the target now
    after = _check_json(cli, "configs")
    assert not [d for d in after if d["code"] == "SMEM001"], after

    # the message names the tables (with their batch sizes) and the targets
    message = git(repo, "log", "-1", "--format=%B")
    subject = message.splitlines()[0]
    assert subject == "tilefit: fit 10 entries in 2 tables to rtx4090"
    for path in OVERFLOWING:
        keys = sorted({d["pointer"].split("/")[1] for d in crashed if d["filename"] == path}, key=int)
        assert f"- {path}: {', '.join(keys)}" in message
    assert "Targets: rtx4090" in message and f"findings hash {branch.split('-')[-1]}" in message
    assert f"Findings cleared: {len(crashed)} x SMEM001." in message

    body = body_file.read_text()
    assert body.startswith(f"## {subject}\n")
    # what crashed where: the bytes and the limit of the runtime's error, per table and device
    for path in OVERFLOWING:
        ds = [d for d in crashed if d["filename"] == path]
        (required,) = {d["data"]["required_bytes"] for d in ds}
        keys = ", ".join(sorted({d["pointer"].split("/")[1] for d in ds}, key=int))
        assert f"| `{path}` | {keys} | SMEM001 | {required} bytes | 101376 bytes | rtx4090 |" in body
    # each entry's old and new config, and the fixer's predicted speeds: its own report, verbatim
    from tilefit.api import CheckOptions
    from tilefit.app import run_fix
    from tilefit.fix.report import markdown

    git(repo, "switch", "-q", "main")
    planned = run_fix(["configs"], CheckOptions(targets=["rtx4090"], estimator="analytic"), write=False)
    git(repo, "switch", "-q", branch)
    report_rows = [line for line in markdown(planned).splitlines() if re.match(r"\| \d+ \| `", line)]
    assert len(report_rows) == 10
    for row in report_rows:
        assert row in body
    for ff in planned.files:
        assert ff.new == (repo / ff.path).read_bytes()  # the commit holds exactly the planned bytes
    assert "predicted time vs original (where it runs)" in body and "predicted time vs naive fix" in body
    assert "change (why)" in body and "(to fit)" in body
    assert f"updates branch `{branch}`" in body


def test_second_run_on_the_same_findings_reuses_the_branch(cli, repo, monkeypatch):
    r = _pr(cli, "-q")
    assert r.exit_code == 0, r.output
    branch = git(repo, "branch", "--show-current")
    tip = git(repo, "rev-parse", "HEAD")
    git(repo, "switch", "-q", "main")
    r = _pr(cli)
    assert r.exit_code == 0, r.output
    assert f"Branch {branch} already holds these fixes" in r.stderr
    assert git(repo, "branch", "--show-current") == branch
    assert git(repo, "rev-parse", "HEAD") == tip  # nothing new committed
    assert fix_branches(repo) == [branch]
    # from a subfolder, with the paths spelt differently: the same findings, the same branch
    git(repo, "switch", "-q", "main")
    monkeypatch.chdir(repo / "configs")
    r = cli("pr", ".", "--isolated", "--estimator", "analytic", "-t", "rtx4090")
    assert r.exit_code == 0 and f"Branch {branch} already holds these fixes" in r.stderr, r.output
    monkeypatch.chdir(repo)
    # on the fix branch itself nothing is left to fix: no new branch, no commit
    r = _pr(cli)
    assert r.exit_code == 0 and "Nothing to fix" in r.stderr
    assert git(repo, "rev-parse", "HEAD") == tip


def test_same_findings_after_reformatting_name_the_same_branch(cli, repo):
    first = _pr(cli, "--dry-run").stderr
    path = repo / OVERFLOWING[0]
    path.write_text(json.dumps(json.loads(path.read_text()), indent=2) + "\n")
    git(repo, "commit", "-q", "-am", "reformat")
    second = _pr(cli, "--dry-run").stderr
    name = re.search(r"tilefit/fix-[0-9a-f]{10}", first).group(0)
    assert name in second
    other = cli("pr", *ARGS, "--target", "rtx5090", "--dry-run").stderr
    assert name not in other  # more devices crash: other findings, another branch


def test_moved_base_updates_the_branch(cli, repo):
    assert _pr(cli, "-q").exit_code == 0
    branch = git(repo, "branch", "--show-current")
    git(repo, "switch", "-q", "main")
    (repo / "README.md").write_text("configs, updated\n")
    git(repo, "commit", "-q", "-am", "unrelated")
    r = _pr(cli)
    assert r.exit_code == 0 and f"Updated branch {branch} from main" in r.stderr
    assert git(repo, "rev-parse", "HEAD^") == git(repo, "rev-parse", "main")
    assert set(git(repo, "diff", "--name-only", "main", "HEAD").splitlines()) == set(OVERFLOWING)


@pytest.mark.parametrize("how", ["modified", "staged", "untracked"])
def test_dirty_work_tree_is_refused(cli, repo, how):
    table = repo / OVERFLOWING[0]
    original = table.read_bytes()
    if how == "untracked":
        (repo / "notes.txt").write_text("wip\n")
    else:
        (repo / "README.md").write_text("edited\n")
        if how == "staged":
            git(repo, "add", "README.md")
    r = _pr(cli)
    assert r.exit_code == 2
    assert "uncommitted changes" in r.stderr and "git stash -u" in r.stderr and "Traceback" not in r.output
    assert git(repo, "branch", "--show-current") == "main"
    assert fix_branches(repo) == []
    assert table.read_bytes() == original


def test_not_a_repository_is_refused(cli, git_env, corpus, monkeypatch):
    folder = git_env / "plain" / "configs"
    folder.mkdir(parents=True)
    shutil.copyfile(corpus / VLLM_H200, folder / Path(VLLM_H200).name)
    monkeypatch.chdir(folder.parent)
    r = _pr(cli)
    assert r.exit_code == 2 and "not inside a git work tree" in r.stderr and "Traceback" not in r.output


def test_clean_repository_creates_no_branch(cli, git_env, corpus, monkeypatch):
    root = make_repo(git_env / "clean", corpus, tables=(VLLM_4090,))
    monkeypatch.chdir(root)
    r = cli("pr", "configs", "--isolated", "--estimator", "analytic", "--target", "rtx4090")
    assert r.exit_code == 0 and "Nothing to fix" in r.stderr
    assert "No entry needed a change." in r.stdout
    assert git(root, "branch", "--show-current") == "main"
    assert fix_branches(root) == [] and git(root, "status", "--porcelain") == ""


def test_a_failing_commit_hook_leaves_everything_as_it_was(cli, repo):
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho 'hook says no' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    before = {p: (repo / p).read_bytes() for p in OVERFLOWING}
    r = _pr(cli)
    assert r.exit_code == 2 and "could not commit the fixes, nothing was changed" in r.stderr
    assert "hook says no" in r.stderr
    assert git(repo, "branch", "--show-current") == "main"
    assert fix_branches(repo) == [] and git(repo, "status", "--porcelain") == ""
    assert {p: (repo / p).read_bytes() for p in OVERFLOWING} == before
    r = _pr(cli, "--no-verify")
    assert r.exit_code == 0 and BRANCH.match(git(repo, "branch", "--show-current"))


def test_missing_identity_is_explained_and_the_actions_bot_is_used_in_a_workflow(cli, repo, monkeypatch):
    git(repo, "config", "--unset", "user.name")
    git(repo, "config", "--unset", "user.email")
    git(repo, "config", "user.useConfigOnly", "true")
    r = _pr(cli)
    assert r.exit_code == 2 and "--author" in r.stderr and git(repo, "branch", "--show-current") == "main"
    assert git(repo, "status", "--porcelain") == ""
    r = _pr(cli, "--author", "Bot Person <bot@example.invalid>")
    assert r.exit_code == 0, r.output
    assert git(repo, "log", "-1", "--format=%an <%ae> / %cn") == "Bot Person <bot@example.invalid> / Bot Person"
    git(repo, "switch", "-q", "main")
    git(repo, "branch", "-D", "-q", *fix_branches(repo))
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    r = _pr(cli)
    assert r.exit_code == 0, r.output
    assert git(repo, "log", "-1", "--format=%an") == "github-actions[bot]"


def test_files_git_does_not_track_are_left_alone(cli, repo, corpus):
    (repo / ".gitignore").write_text("local/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore local/")
    local = repo / "local" / Path(VLLM_H200).name
    local.parent.mkdir()
    shutil.copyfile(corpus / VLLM_H200, local)
    r = cli("pr", "configs", "local", "--isolated", "--estimator", "analytic", "--target", "rtx4090")
    assert r.exit_code == 0, r.output
    assert local.read_bytes() == (corpus / VLLM_H200).read_bytes()
    assert set(git(repo, "diff", "--name-only", "main", "HEAD").splitlines()) == set(OVERFLOWING)
    assert f"`local/{local.name}`" in r.stdout and "Left unchanged" in r.stdout


def test_dry_run_writes_nothing(cli, repo):
    r = _pr(cli, "--dry-run")
    assert r.exit_code == 0 and "dry run: nothing written" in r.stderr
    assert "| 1024 |" in r.stdout
    assert git(repo, "branch", "--show-current") == "main" and git(repo, "status", "--porcelain") == ""
    assert fix_branches(repo) == []


def test_dry_run_of_one_file_says_it(cli, git_env, corpus, monkeypatch):
    monkeypatch.chdir(make_repo(git_env / "one", corpus, tables=(VLLM_H200,)))
    r = _pr(cli, "--dry-run")
    assert r.exit_code == 0 and "Would fix 1 file and commit it on branch tilefit/fix-" in r.stderr, r.stderr


def test_body_file_inside_the_work_tree_does_not_make_the_next_run_refuse(cli, repo):
    assert _pr(cli, "--body", "PR.md", "-q").exit_code == 0
    git(repo, "switch", "-q", "main")
    r = _pr(cli, "--body", "PR.md")
    assert r.exit_code == 0 and "already holds these fixes" in r.stderr
    assert (repo / "PR.md").read_text().startswith("## tilefit: fit 10 entries")
    assert FITTING not in git(repo, "diff", "--name-only", "main", "HEAD")


def test_python_call_site_fix_is_committed_with_its_line(cli, git_env, monkeypatch):
    """A launch's literal num_stages (SMEM002), judged by compiling the kernel from the file's AST."""
    pytest.importorskip("triton")
    root = git_env / "pyrepo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "callsites" / "engine", root / "engine")
    (root / "pyproject.toml").write_text(
        '[tool.tilefit]\ntargets = ["rtx4090"]\n\n'
        '[tool.tilefit.kernels."engine.ops.gemm_plain:matmul_plain_kernel"]\n"a_ptr,b_ptr" = ["bf16"]\n')
    for args in (("init", "-q", "-b", "main"), ("config", "user.name", "T"), ("config", "user.email", "t@x.invalid"),
                 ("add", "."), ("commit", "-q", "-m", "engine")):
        git(root, *args)
    monkeypatch.chdir(root)
    launcher = "engine/ops/launcher.py"
    assert cli("pr", launcher).stderr.startswith("Nothing to fix")  # the fix is unsafe: not applied
    r = cli("pr", launcher, "--unsafe-fixes")
    assert r.exit_code == 0, r.output
    assert git(root, "diff", "--name-only", "main", "HEAD") == launcher
    assert "num_stages=3):" in (root / launcher).read_text()
    message = git(root, "log", "-1", "--format=%B")
    assert message.startswith("tilefit: fit 1 call site in 1 Python file to rtx4090")
    (site_line,) = re.findall(rf"- {launcher}: line (\d+)", message)
    assert f"| `{launcher}` | line {site_line} | SMEM002 | " in r.stdout and "| 101376 bytes | rtx4090 |" in r.stdout
    assert "Set num_stages=3 (was 4)" in r.stdout and "Not fixed here" not in r.stdout


def test_body_in_a_missing_folder_is_refused_before_anything_changes(cli, repo):
    r = _pr(cli, "--body", "no/such/folder/pr.md")
    assert r.exit_code == 2 and "does not exist" in r.stderr and "Traceback" not in r.output
    assert git(repo, "branch", "--show-current") == "main" and fix_branches(repo) == []


def test_detached_head_as_actions_checkout_leaves_it(cli, repo):
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "--detach")
    r = _pr(cli)
    assert r.exit_code == 0 and f"from {base}" in r.stderr, r.output
    assert git(repo, "rev-parse", "HEAD^") == base and BRANCH.match(git(repo, "branch", "--show-current"))
