"""Discovery asks whether a walked folder lies in a git work tree once per folder: outside one no
file is put to the .gitignore rules; inside one they still apply to every file and folder."""

from __future__ import annotations

import subprocess

import pytest

from tilefit.discovery import discover
from tilefit.globs import GitIgnore

NAME = "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"


def _tree(root):
    for sub in ("", "a", "a/b", "skip"):
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / NAME).write_text('{"1": {}}')
    return root


def test_outside_a_work_tree_no_file_is_put_to_gitignore(tmp_path, monkeypatch):
    _tree(tmp_path)
    asked = []
    real = GitIgnore.ignored
    monkeypatch.setattr(GitIgnore, "ignored", lambda self, path, is_dir=False: asked.append(path) or real(self, path, is_dir))
    found = discover([str(tmp_path)])
    assert len(found.files) == 4
    assert asked == [str(tmp_path)]  # the folder named on the command line, nothing under it


@pytest.mark.skipif(subprocess.run(["git", "--version"], capture_output=True).returncode != 0, reason="no git")
def test_inside_a_work_tree_gitignore_still_applies(tmp_path):
    _tree(tmp_path)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("skip/\na/b/*.json\n")
    found = discover([str(tmp_path)])
    assert sorted(p[len(str(tmp_path)) + 1:] for p, _ in found.files) == sorted([f"a/{NAME}", NAME])
    assert GitIgnore().in_work_tree(str(tmp_path / "a")) and not GitIgnore().in_work_tree("/")
