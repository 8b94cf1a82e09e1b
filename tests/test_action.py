"""The GitHub Action (``action.yml``) run step by step the way a runner runs a composite action:
each step's script in bash with its ``${{ }}`` expressions substituted, its own
``$GITHUB_OUTPUT`` file, the step outputs mapped to the action's outputs, in a temporary git
repository of real corpus tables. No network: the install step runs against a stand-in Python
that records the pip command (what would be installed is asserted) and hands everything else to
this interpreter, where tilefit is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from gitrepo import OVERFLOWING, VLLM_4090, fix_branches, git, make_repo

REPO = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((REPO / "action.yml").read_text())
SCHEMA = json.loads((REPO / "tests" / "data" / "sarif-2.1.0-rtm.5.json").read_text())
EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
EXTRA = "--isolated --estimator analytic"


def parse_outputs(text: str) -> dict[str, str]:
    """GitHub's output file: ``name=value`` and ``name<<DELIM`` ... ``DELIM``."""
    out, lines, i = {}, text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            value = []
            while lines[i] != delim:
                value.append(lines[i])
                i += 1
            i += 1
            out[name] = "\n".join(value)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
    return out


class Runner:
    """Runs action.yml's steps in a workspace, like the Actions runner does."""

    def __init__(self, workspace: Path, tmp: Path):
        self.workspace = workspace
        self.tmp = tmp
        # actions/cache's store: key -> the folder saved under it, in the order saved
        self.saved: dict[str, Path] = {}
        self.runs = 0  # github.run_id of the next run
        self.pip_log = tmp / "pip.log"
        self.python = self._stand_in_python()
        self.summary = tmp / "step_summary.md"
        self.summary.write_text("")

    def _stand_in_python(self) -> Path:
        """``python -m venv DIR`` makes DIR/bin/python, which logs ``-m pip ...`` and runs
        everything else with this interpreter."""
        inner = self.tmp / "venv_python"
        inner.write_text(f'#!/bin/bash\nif [ "$1" = "-m" ] && [ "$2" = "pip" ]; then\n'
                         f'  printf "%s\\n" "$@" > "{self.pip_log}"; exit 0\nfi\nexec "{sys.executable}" "$@"\n')
        outer = self.tmp / "base_python"
        outer.write_text(f'#!/bin/bash\nif [ "$1" = "-m" ] && [ "$2" = "venv" ]; then\n'
                         f'  mkdir -p "$3/bin" && cp "{inner}" "$3/bin/python" && chmod +x "$3/bin/python"; exit 0\n'
                         f'fi\nexec "{sys.executable}" "$@"\n')
        for p in (inner, outer):
            p.chmod(0o755)
        return outer

    def run(self, only: str | None = None, **given: str):
        inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
        unknown = set(given) - set(inputs)
        assert not unknown, f"not inputs of action.yml: {unknown}"
        inputs.update(given)
        if "python" not in given:
            inputs["python"] = str(self.python)
        self.runs += 1
        runner_temp = self.tmp / f"runner_temp_{self.runs}"  # a new runner each workflow run
        runner_temp.mkdir(exist_ok=True)
        steps: dict[str, dict[str, str]] = {}
        contexts = {"github.action_path": str(REPO), "github.job": "lint", "github.run_id": str(self.runs),
                    "github.run_attempt": "1", "runner.os": "Linux", "runner.temp": str(runner_temp)}

        def value(expr: str) -> str:
            if expr.startswith("inputs."):
                return inputs[expr[len("inputs."):]]
            if expr in contexts:
                return contexts[expr]
            m = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
            if m:
                return steps.get(m.group(1), {}).get(m.group(2), "")
            raise AssertionError(f"expression the test runner does not know: {expr}")

        def sub(text: str) -> str:
            return EXPR.sub(lambda m: value(m.group(1)), text)

        def condition(text: str, failed: bool) -> bool:
            """A step's ``if:``, of the forms action.yml uses: ``a && b`` of ``always()`` and
            ``inputs.NAME == 'value'``; without ``always()`` a step after a failed one is skipped."""
            terms = [t.strip() for t in text.split("&&")]
            if "always()" not in terms and failed:
                return False
            for term in terms:
                if term == "always()":
                    continue
                m = re.fullmatch(r"inputs\.([\w-]+) == '([^']*)'", term)
                assert m, f"condition the test runner does not know: {term}"
                if inputs[m.group(1)] != m.group(2):
                    return False
            return True

        assert ACTION["runs"]["using"] == "composite"
        procs = []
        failed = False
        for n, step in enumerate(ACTION["runs"]["steps"]):
            if not (condition(step["if"], failed) if "if" in step else not failed):
                continue
            if "uses" in step:
                self._cache_step(step["uses"], {k: sub(str(v)) for k, v in step["with"].items()})
                continue
            assert step["shell"] == "bash"
            output = self.tmp / f"output_{n}"
            output.write_text("")
            # a runner's environment: no cache folder named (the tests' TILEFIT_CACHE_DIR), a home of its own
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("INPUT_", "GITHUB_")) and k != "TILEFIT_CACHE_DIR"}
            env.update({"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(runner_temp),
                        "XDG_CACHE_HOME": str(runner_temp / "home-cache"),
                        "GITHUB_STEP_SUMMARY": str(self.summary), "GITHUB_WORKSPACE": str(self.workspace)})
            env.update({k: sub(str(v)) for k, v in (step.get("env") or {}).items()})
            cwd = self.workspace / sub(step.get("working-directory", "."))
            script = self.tmp / f"step_{n}.sh"
            script.write_text(sub(step["run"]))
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=cwd,
                                  env=env, capture_output=True, text=True)
            procs.append(proc)
            steps[step.get("id", str(n))] = parse_outputs(output.read_text())
            if step.get("id") == only:
                break
            failed = failed or proc.returncode != 0
        outputs = {name: sub(spec["value"]) for name, spec in ACTION["outputs"].items()}
        return procs, outputs

    def _cache_step(self, uses: str, given: dict[str, str]) -> None:
        """actions/cache's restore (the exact key, else the newest saved under a restore-keys
        prefix) and save (a key is saved once: caches are immutable) of one folder."""
        path = Path(given["path"])
        if uses == "actions/cache/restore@v4":
            keys = [k for k in self.saved if k == given["key"]] or \
                [k for k in self.saved if k.startswith(given["restore-keys"])]
            if keys:
                shutil.copytree(self.saved[keys[-1]], path, dirs_exist_ok=True)
        elif uses == "actions/cache/save@v4":
            if given["key"] not in self.saved and path.is_dir():
                self.saved[given["key"]] = self.tmp / f"saved_{len(self.saved)}"
                shutil.copytree(path, self.saved[given["key"]])
        else:
            raise AssertionError(f"action the test runner does not know: {uses}")


@pytest.fixture
def runner(git_env, corpus):
    root = make_repo(git_env / "repo", corpus)
    return Runner(root, git_env)


def _sarif_valid(path: str) -> dict:
    from jsonschema import Draft4Validator

    doc = json.loads(Path(path).read_text())
    errors = list(Draft4Validator(SCHEMA).iter_errors(doc))
    assert not errors, errors[0].message
    return doc


def test_action_yml_declares_the_inputs_and_outputs_and_passes_each_input():
    from tilefit.action import ENV_INPUTS

    assert {"paths", "targets", "mode", "tilefit-version", "extra-args"} <= set(ACTION["inputs"])
    assert {"changed", "report", "sarif"} <= set(ACTION["outputs"])
    run_step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "run")
    passed = {k[len("INPUT_"):]: v for k, v in run_step["env"].items() if k.startswith("INPUT_")}
    assert set(passed) == set(ENV_INPUTS)
    for name, expr in passed.items():
        assert expr == "${{ inputs.%s }}" % name.lower().replace("_", "-")
    for name, spec in ACTION["outputs"].items():
        assert spec["value"] == "${{ steps.run.outputs.%s }}" % name


def test_install_step_installs_the_light_package(runner):
    """The install step alone (``only``): what it would install is all this test asserts, and the
    run step is run end to end by every other test here."""
    procs, outputs = runner.run(only="install", paths="configs", **{"extra-args": EXTRA, "fail-on-findings": "false"})
    assert len(procs) == 1 and procs[0].returncode == 0, procs[0].stderr
    pip = runner.pip_log.read_text().split("\n")
    assert pip[:3] == ["-m", "pip", "install"] and pip[-2] == str(REPO)  # the action's own source
    assert not any("torch" in a or "triton" in a or "[" in a for a in pip)
    runner.run(only="install", **{"tilefit-version": "0.1.0"})
    assert "tilefit==0.1.0" in runner.pip_log.read_text().split("\n")
    spec = "git+https://github.com/tilefit/tilefit@v0.1.0"
    runner.run(only="install", **{"tilefit-version": spec})
    assert spec in runner.pip_log.read_text().split("\n")


def test_check_mode_annotations_sarif_and_summary(runner):
    procs, outputs = runner.run(paths="configs", targets="rtx4090", **{"extra-args": EXTRA})
    run = procs[-1]
    assert len(procs) == 2 and run.returncode == 1, run.stderr  # diagnostics remain: the step fails
    annotations = [line for line in run.stdout.splitlines() if line.startswith("::error ")]
    assert len(annotations) == 10
    files = {re.search(r"file=([^,]+),", a).group(1).replace("%2C", ",") for a in annotations}
    assert files == set(OVERFLOWING)
    assert all("Required: " in a and "Hardware limit: 101376" in a for a in annotations)
    assert outputs["changed"] == "false" and outputs["findings"] == "10"
    doc = _sarif_valid(outputs["sarif"])
    results = doc["runs"][0]["results"]
    assert len(results) == 10 and {r["ruleId"] for r in results} == {"SMEM001"}
    report = Path(outputs["report"]).read_text()
    assert report.startswith("## tilefit check: 10 findings in 2 files")
    assert "| SMEM001 | shared-memory-per-block | 10 |" in report
    assert runner.summary.read_text().startswith(report)
    assert git(runner.workspace, "status", "--porcelain") == ""  # check changes nothing
    assert not Path(outputs["report"]).resolve().is_relative_to(runner.workspace)
    _, outputs = runner.run(paths="configs", targets="rtx4090", **{"extra-args": EXTRA, "fail-on-findings": "false"})
    assert outputs["findings"] == "10"


def test_check_mode_keeps_the_result_cache_between_runs(runner):
    """``cache: true`` (the default): the check's result cache is the folder actions/cache
    restores and saves, saved when the check fails too; the next run restores it and uses its
    records, and the records of a configuration no run uses any more are dropped before the save."""
    args = dict(paths="configs", targets="rtx4090", **{"extra-args": EXTRA})
    procs, _ = runner.run(**args)
    assert procs[-1].returncode == 1  # findings left: the step failed, the cache was saved anyway
    (first,) = runner.saved.values()
    kept = sorted(p.name for p in (first / "results").iterdir())
    assert any(name.count(".") == 1 and name.endswith(".json") for name in kept), kept
    hour_ago = time.time() - 3600  # saved by an earlier workflow run
    for path in first.rglob("*"):
        os.utime(path, (hour_ago, hour_ago))
    # what an older release (another run key) left in the folder
    for old in (first / "results" / "0123abcd.json", first / "results" / "0123abcd.sarif.out",
                first / "results-digests" / "0123abcd.sha256"):
        old.write_text("{}")
        os.utime(old, (1, 1))
    started = time.time()
    procs, _ = runner.run(**args)
    assert procs[-1].returncode == 1
    assert len(runner.saved) == 2
    second = list(runner.saved.values())[-1]
    assert sorted(p.name for p in (second / "results").iterdir()) == kept
    assert not (second / "results-digests" / "0123abcd.sha256").exists()
    for name in kept:  # the same records, read (touched) by the second run, not written again
        if name.count(".") == 1:
            assert (second / "results" / name).read_bytes() == (first / "results" / name).read_bytes()
            assert (second / "results" / name).stat().st_mtime >= started - 1
    runner.run(cache="false", **args)
    assert len(runner.saved) == 2  # no cache steps ran


def test_clean_repository_gives_changed_false(git_env, corpus):
    root = make_repo(git_env / "clean", corpus, tables=(VLLM_4090,))
    runner = Runner(root, git_env)
    procs, outputs = runner.run(paths="configs", targets="rtx4090", **{"extra-args": EXTRA})
    assert procs[-1].returncode == 0, procs[-1].stderr
    assert outputs["changed"] == "false" and outputs["findings"] == "0"
    assert "::error" not in procs[-1].stdout
    assert Path(outputs["report"]).read_text().startswith("## tilefit check: all checks passed")
    assert _sarif_valid(outputs["sarif"])["runs"][0]["results"] == []
    for mode in ("fix", "pr"):
        procs, outputs = runner.run(paths="configs", targets="rtx4090", mode=mode, **{"extra-args": EXTRA})
        assert procs[-1].returncode == 0, procs[-1].stderr
        assert outputs["changed"] == "false" and outputs["branch"] == "" and outputs["commit"] == ""
        assert "No entry needed a change." in Path(outputs["report"]).read_text()
        assert git(root, "status", "--porcelain") == "" and fix_branches(root) == []
        assert git(root, "branch", "--show-current") == "main"


def test_fix_mode_leaves_the_fixes_in_the_work_tree_for_the_next_step(runner, cli, monkeypatch):
    procs, outputs = runner.run(paths="configs", targets="rtx4090", mode="fix", **{"extra-args": EXTRA})
    assert procs[-1].returncode == 0, procs[-1].stderr
    assert outputs["changed"] == "true"
    # modified, not staged or committed, and nothing else (no report, no cache in the tree)
    assert set(git(runner.workspace, "diff", "--name-only").splitlines()) == set(OVERFLOWING)
    assert git(runner.workspace, "diff", "--cached", "--name-only") == ""
    assert git(runner.workspace, "ls-files", "--others") == ""
    assert git(runner.workspace, "branch", "--show-current") == "main" and fix_branches(runner.workspace) == []
    assert re.fullmatch(r"tilefit/fix-[0-9a-f]{10}", outputs["branch"])
    assert outputs["title"] == "tilefit: fit 10 entries in 2 tables to rtx4090"
    message = outputs["commit-message"]
    assert message.splitlines()[0] == outputs["title"] and all(p in message for p in OVERFLOWING)
    body = Path(outputs["report"]).read_text()
    assert "### What crashed where" in body and "101376 bytes" in body and "| 1024 |" in body
    assert runner.summary.read_text().startswith(body)
    assert _sarif_valid(outputs["sarif"])["runs"][0]["results"] == []  # nothing left
    # the next step (e.g. create-pull-request) commits what is there: the tree holds exactly the
    # bytes `tilefit pr` commits, under the same branch name
    git(runner.workspace, "stash", "-q")
    monkeypatch.chdir(runner.workspace)  # `tilefit pr` in this process: the Action's own runs are the processes
    r = cli("pr", "configs", "-t", "rtx4090", *EXTRA.split(), "-q")
    assert r.exit_code == 0, r.output
    assert git(runner.workspace, "branch", "--show-current") == outputs["branch"]
    assert git(runner.workspace, "diff", "--stat", "stash@{0}", "HEAD", "--", "configs") == ""


def test_pr_mode_commits_on_the_branch_and_a_second_run_reuses_it(runner):
    procs, outputs = runner.run(paths="configs", targets="rtx4090", mode="pr", **{"extra-args": EXTRA})
    assert procs[-1].returncode == 0, procs[-1].stderr
    ws = runner.workspace
    assert outputs["changed"] == "true" and git(ws, "branch", "--show-current") == outputs["branch"]
    assert outputs["commit"] == git(ws, "rev-parse", "HEAD")
    assert git(ws, "log", "-1", "--format=%B") == outputs["commit-message"].strip()
    assert set(git(ws, "diff", "--name-only", "main", "HEAD").splitlines()) == set(OVERFLOWING)
    assert git(ws, "status", "--porcelain") == ""
    git(ws, "switch", "-q", "main")
    procs, again = runner.run(paths="configs", targets="rtx4090", mode="pr", **{"extra-args": EXTRA})
    assert procs[-1].returncode == 0, procs[-1].stderr
    assert again["branch"] == outputs["branch"] and again["commit"] == outputs["commit"]
    assert "already holds these fixes" in procs[-1].stderr
    # a dirty tree is refused with an annotation, exit 2
    git(ws, "switch", "-q", "main")
    (ws / "README.md").write_text("edited\n")
    procs, _ = runner.run(paths="configs", targets="rtx4090", mode="pr", **{"extra-args": EXTRA})
    assert procs[-1].returncode == 2
    assert procs[-1].stdout.startswith("::error title=tilefit::the work tree has uncommitted changes")


def test_paths_with_spaces_and_bad_inputs(runner):
    name = OVERFLOWING[1]
    assert " " in name
    procs, outputs = runner.run(paths=f"'{name}'", targets="rtx4090", **{"extra-args": EXTRA})
    assert procs[-1].returncode == 1 and outputs["findings"] == "5"
    procs, _ = runner.run(mode="deploy")
    assert procs[-1].returncode == 2 and "::error title=tilefit::input mode: 'deploy'" in procs[-1].stdout
    procs, _ = runner.run(mode="fix", **{"extra-args": "--no-such-option"})
    assert procs[-1].returncode == 2 and "No such option" in procs[-1].stdout
    procs, _ = runner.run(**{"unsafe-fixes": "maybe", "mode": "fix"})
    assert procs[-1].returncode == 2 and "unsafe-fixes" in procs[-1].stdout
    assert git(runner.workspace, "status", "--porcelain") == ""


def readme_workflows() -> list[dict]:
    section = (REPO / "README.md").read_text().split("### GitHub Action", 1)[1].split("\n## ", 1)[0]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def _tilefit_step(workflow: dict) -> dict:
    (job,) = workflow["jobs"].values()
    (step,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("tilefit/tilefit@")]
    return step


def test_readme_workflows_use_only_what_the_action_declares():
    workflows = readme_workflows()
    triggers = [set(w[True] if True in w else w["on"]) for w in workflows]  # YAML 1.1 reads `on` as True
    assert {"pull_request"} <= triggers[0] and {"schedule"} <= triggers[1]
    for workflow in workflows:
        step = _tilefit_step(workflow)
        assert set(step["with"]) <= set(ACTION["inputs"])
        used = set(re.findall(r"steps\.tilefit\.outputs\.([\w-]+)", yaml.safe_dump(workflow)))
        assert used and used <= set(ACTION["outputs"])
    assert _tilefit_step(workflows[0])["with"].get("mode", "check") == "check"
    assert _tilefit_step(workflows[1])["with"]["mode"] == "fix"


def test_readme_workflows_tilefit_steps_in_a_repository(runner):
    """The README's two tilefit steps with their own inputs (plus the analytic estimator, for
    speed), then what the next steps do with the outputs."""
    check, fix = (_tilefit_step(w)["with"] for w in readme_workflows())
    given = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in check.items()}
    procs, outputs = runner.run(**given, **{"extra-args": "--estimator analytic"})
    assert procs[-1].returncode == 0, procs[-1].stderr  # fail-on-findings: false
    assert outputs["findings"] != "0"  # so the workflow's last step fails the job
    _sarif_valid(outputs["sarif"])
    procs, outputs = runner.run(**{k: str(v) for k, v in fix.items()}, **{"extra-args": "--estimator analytic"})
    assert procs[-1].returncode == 0, procs[-1].stderr
    assert outputs["changed"] == "true"
    # what create-pull-request does with the outputs: commit the work tree on `branch`
    ws = runner.workspace
    git(ws, "switch", "-q", "-c", outputs["branch"])
    git(ws, "commit", "-q", "-a", "-m", outputs["commit-message"])
    assert set(git(ws, "diff", "--name-only", "main", "HEAD").splitlines()) == set(OVERFLOWING)
    assert Path(outputs["report"]).read_text().startswith(f"## {outputs['title']}\n")
    # the next scheduled run on the fixed default branch finds nothing to do
    git(ws, "switch", "-q", "main")
    git(ws, "merge", "-q", "--ff-only", outputs["branch"])
    procs, again = runner.run(**{k: str(v) for k, v in fix.items()}, **{"extra-args": "--estimator analytic"})
    assert procs[-1].returncode == 0 and again["changed"] == "false"


def test_annotations_are_placed_relative_to_the_repository_root(runner):
    procs, outputs = runner.run(paths="vllm", targets="rtx4090", **{"working-directory": "configs",
                                                                     "extra-args": EXTRA})
    files = {re.search(r"file=([^,]+),", a).group(1).replace("%2C", ",")
             for a in procs[-1].stdout.splitlines() if a.startswith("::error ")}
    assert files == {OVERFLOWING[0]}  # configs/vllm/..., not vllm/...
    procs, outputs = runner.run(paths="vllm", targets="rtx4090", mode="fix",
                                **{"working-directory": "configs", "extra-args": EXTRA})
    assert procs[-1].returncode == 0 and outputs["changed"] == "true"
    assert set(git(runner.workspace, "diff", "--name-only").splitlines()) == {OVERFLOWING[0]}
    assert f"`{OVERFLOWING[0]}`" in Path(outputs["report"]).read_text()  # the body names repo paths
