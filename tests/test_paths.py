"""Paths like ruff's: globs (pathspec, braces), .gitignore, and everything matched relative to the
folder of the pyproject.toml that holds the configuration, whatever folder tilefit runs from."""

from __future__ import annotations

import json

import pytest

from tilefit.globs import Glob, GlobSet, expand_braces

# 16 batch sizes, every one overflows an RTX 4090 (128x256x128 fp8 at 4 stages: 147456 bytes)
ENTRY = ('{"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, '
         '"num_warps": 8, "num_stages": 4}')
TABLE = "{" + ", ".join(f'"{2 ** i}": {ENTRY}' for i in range(16)) + "}\n"
NAME = "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"
CONFIG = '[tool.tilefit]\nestimator = "analytic"\n'


def _match(pattern: str, path: str, is_dir: bool = False) -> bool:
    return Glob(pattern).matches(path, path.rstrip("/").rsplit("/", 1)[-1], is_dir)


@pytest.mark.parametrize("pattern,path,expected", [
    ("**/{tests,docs}/*", "tests/a.json", True),
    ("**/{tests,docs}/*", "pkg/docs/a.json", True),
    ("**/{tests,docs}/*", "pkg/src/a.json", False),
    ("b/x[0-9].json", "b/x7.json", True),
    ("b/x[0-9].json", "b/xa.json", False),
    ("b/x[0-9].json", "a/b/x7.json", False),  # a slash anchors the pattern at the root
    ("*.json", "a/b/c.json", True),  # no slash: a name at any depth
    ("legacy", "x/legacy/a.json", True),  # a folder covers what is beneath it
    ("configs/old", "configs/old/a.json", True),
    ("configs/old", "x/configs/old/a.json", False),
    ("./configs/*.json", "configs/a.json", True),
    ("legacy/**/*.json", "legacy/a/b/c.json", True),
    ("legacy/**/*.json", "legacy/c.json", True),
    # a table's own name matches although its brackets read as a character class
    ("E=1,N=2,device_name=X,block_shape=[128, 128].json", "c/E=1,N=2,device_name=X,block_shape=[128, 128].json", True),
    ("c/E=1,N=2,device_name=X,block_shape=[128, 128].json", "c/E=1,N=2,device_name=X,block_shape=[128, 128].json",
     True),
])
def test_globs_are_gitignore_style_with_braces(pattern, path, expected):
    assert _match(pattern, path) is expected


def test_brace_expansion():
    assert expand_braces("**/{tests,docs}/*") == ["**/tests/*", "**/docs/*"]
    assert expand_braces("a{b,c{d,e}}f") == ["abf", "acdf", "acef"]
    assert expand_braces("x{y}z{1,2}") == ["x{y}z1", "x{y}z2"]
    assert expand_braces("{a,b") == ["{a,b"] and expand_braces("E=1,N=2.json") == ["E=1,N=2.json"]
    assert _match("build/", "build", is_dir=True) and not _match("build/", "build")
    assert not GlobSet([]) and GlobSet(["a"]).matches(None, "a")  # outside the root: by name


@pytest.fixture
def project(tmp_path, monkeypatch):
    """pyproject.toml at the root, the table in configs/sub/."""
    sub = tmp_path / "configs" / "sub"
    sub.mkdir(parents=True)
    (sub / NAME).write_text(TABLE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _write_config(root, extra: str) -> None:
    (root / "pyproject.toml").write_text(CONFIG + extra)


@pytest.mark.parametrize("extra", [
    '[tool.tilefit.per-file-ignores]\n"configs/sub/*.json" = ["SMEM001"]\n',
    '[tool.tilefit.per-file-ignores]\n"configs/{sub,other}/*.json" = ["SMEM"]\n',
    'exclude = ["configs/sub"]\n',
])
def test_per_file_ignores_and_excludes_are_relative_to_the_pyproject_folder(cli, project, monkeypatch, extra):
    """`check configs/sub` from the root and `check` from configs/sub agree (the second reported
    16 SMEM001: the globs were matched against paths relative to the current folder)."""
    _write_config(project, extra)
    assert cli("check", "configs/sub").exit_code == 0
    assert cli("check", str(project / "configs" / "sub")).exit_code == 0  # an absolute path
    monkeypatch.chdir(project / "configs" / "sub")
    r = cli("check")
    assert r.exit_code == 0, r.output
    _write_config(project, "")
    r = cli("check")
    assert r.exit_code == 1 and r.output.count("SMEM001") == 16


def test_force_exclude_applies_root_relative_excludes_to_named_files(cli, project, monkeypatch):
    _write_config(project, 'exclude = ["configs/sub"]\n')
    monkeypatch.chdir(project / "configs" / "sub")
    assert cli("check", NAME).exit_code == 1  # named explicitly: checked
    assert cli("check", NAME, "--force-exclude").exit_code == 0


def test_a_baseline_holds_from_a_subfolder(cli, project, monkeypatch):
    _write_config(project, 'baseline = "tilefit-baseline.json"\n')
    r = cli("check", ".", "--update-baseline")
    assert r.exit_code == 0 and "wrote 16 findings" in r.output
    records = json.loads((project / "tilefit-baseline.json").read_text())["findings"]
    assert {rec["path"] for rec in records} == {f"configs/sub/{NAME}"}
    assert cli("check", ".").exit_code == 0
    assert cli("check", "./configs/sub/").exit_code == 0
    monkeypatch.chdir(project / "configs" / "sub")
    r = cli("check")
    assert r.exit_code == 0 and "16 hidden by the baseline" in r.output, r.output
    # updating from the subfolder keeps the records' root-relative paths
    assert cli("check", "--update-baseline").exit_code == 0
    records = json.loads((project / "tilefit-baseline.json").read_text())["findings"]
    assert len(records) == 16 and {rec["path"] for rec in records} == {f"configs/sub/{NAME}"}


def test_sarif_and_gitlab_paths_are_relative_to_the_project_root(cli, project, monkeypatch):
    from urllib.parse import unquote

    _write_config(project, "")
    monkeypatch.chdir(project / "configs" / "sub")
    run = json.loads(cli("check", "--output-format", "sarif").stdout)["runs"][0]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": project.resolve().as_uri() + "/"}}
    locations = {json.dumps(r["locations"][0]["physicalLocation"]["artifactLocation"]) for r in run["results"]}
    (location,) = [json.loads(x) for x in locations]
    assert location["uriBaseId"] == "%SRCROOT%" and unquote(location["uri"]) == f"configs/sub/{NAME}"
    gitlab = json.loads(cli("check", "--output-format", "gitlab").stdout)
    assert {d["location"]["path"] for d in gitlab} == {f"configs/sub/{NAME}"}
    as_given = json.loads(cli("check", "--output-format", "json").stdout)
    assert {d["filename"] for d in as_given} == {f"./{NAME}"}  # JSON: the path as given
    absolute = json.loads(cli("check", str(project / "configs" / "sub"), "--output-format", "json").stdout)
    assert {d["filename"] for d in absolute} == {str(project / "configs" / "sub" / NAME)}


def test_gitignore_is_respected_in_git_work_trees(cli, project, monkeypatch):
    _write_config(project, "")
    (project / ".gitignore").write_text("# generated tables\nconfigs/sub/\n")
    args = ("check", ".", "-q")
    assert cli(*args).exit_code == 1  # no .git: not a work tree, .gitignore does not apply
    (project / ".git").mkdir()
    assert cli(*args).exit_code == 0
    assert cli(*args, "--no-respect-gitignore").exit_code == 1
    _write_config(project, "respect-gitignore = false\n")
    assert cli(*args).exit_code == 1
    assert cli(*args, "--respect-gitignore").exit_code == 0
    _write_config(project, "")
    # a deeper .gitignore overrides, negations included; .git/info/exclude is read too
    (project / ".gitignore").write_text("*.json\n")
    (project / "configs" / ".gitignore").write_text(f"!{NAME}\n")
    assert cli(*args).exit_code == 1
    (project / "configs" / ".gitignore").unlink()
    assert cli(*args).exit_code == 0
    (project / ".gitignore").unlink()
    (project / ".git" / "info").mkdir()
    (project / ".git" / "info" / "exclude").write_text("sub\n")
    assert cli(*args).exit_code == 0
    # a file or folder named on the command line is checked (pre-commit names tracked files only)
    assert cli("check", f"configs/sub/{NAME}", "-q").exit_code == 1
    assert cli("check", "configs/sub", "-q").exit_code == 1
    assert cli("check", "configs", "-q").exit_code == 0


def test_sarif_locations_per_folder_equal_artifact_location(tmp_path, corpus):
    """The sarif render's per-folder shortcut gives artifact_location's answer for files inside
    the root, outside it (quoted file: URIs: the corpus's tables among them), in the root's own
    folder, and for the root itself."""
    from tilefit.reporters.common import RenderContext
    from tilefit.reporters.sarif import _Locations, artifact_location

    root = tmp_path / "proj"
    (root / "sub dir").mkdir(parents=True)
    ctx = RenderContext(root=str(root))
    paths = [str(root / "a.json"), str(root / "sub dir" / "E=8,N=1:x%.json"), str(root),
             str(tmp_path / "other" / "\u00fc \u00f1#?.json"), str(tmp_path / "proj2" / "b.json"), "/c.json",
             "//d/e.json", "relative/f.json", str(root / ".hidden" / "g.json"),
             *sorted(str(p) for p in corpus.rglob("*.json"))[::25]]
    locate = _Locations(ctx)
    for p in paths + paths:  # the second pass answers from the folder memo
        assert locate(p) == artifact_location(p, ctx), p
    assert locate(str(root / "a.json")) == {"uri": "a.json", "uriBaseId": "%SRCROOT%"}
    assert locate("/c.json") == {"uri": "file:///c.json"}
