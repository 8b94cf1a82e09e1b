"""The README's pre-commit snippet, exactly as written, through the real pre-commit (offline: a
local hook runs the installed tilefit, as the README says)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import LAYOUT, VLLM_H200, git, make_repo

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_precommit_config() -> str:
    section = README.read_text().split("### pre-commit", 1)[1].split("\n### ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    return block


def test_readme_precommit_snippet_works_as_written(git_env, corpus):
    import yaml

    # this environment's pre-commit only: another one on PATH (a pyenv shim) puts its own bin
    # folder first on the hook's PATH, and the hook would run that environment's tilefit (or none);
    # a venv that shares another's packages has the module without the script: `python -m pre_commit`
    import importlib.util

    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent))
    if pre_commit is None and importlib.util.find_spec("pre_commit") is None:
        pytest.skip("pre-commit is not installed")
    config = readme_precommit_config()
    (repo_entry,) = yaml.safe_load(config)["repos"]
    assert repo_entry["repo"] == "local"  # no `rev:` of a tag that does not exist
    repo = make_repo(git_env / "repo", corpus, tables=(VLLM_H200,))
    (repo / ".pre-commit-config.yaml").write_text(config)
    git(repo, "add", ".pre-commit-config.yaml")
    # `language: system` runs the `tilefit` on PATH: the one installed in this environment
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               PRE_COMMIT_HOME=str(git_env / "pre-commit-home"))
    command = [pre_commit] if pre_commit else [sys.executable, "-m", "pre_commit"]
    run = lambda *a: subprocess.run([*command, *a], cwd=repo, env=env, capture_output=True, text=True)  # noqa: E731
    r = run("run", "--all-files")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "SMEM001" in r.stdout and "Required: 147456, Hardware limit: 101376" in r.stdout
    table = repo / LAYOUT[VLLM_H200]
    fixed = subprocess.run([sys.executable, "-m", "tilefit", "check", str(table), "--target", "consumer", "--fix",
                            "-q"], cwd=repo, env=env, capture_output=True, text=True)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    git(repo, "add", ".")
    r = run("run", "--all-files")
    assert r.returncode == 0, r.stdout + r.stderr
