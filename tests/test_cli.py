"""The command line as users run it: exit codes, formats, options, configuration, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

OVER = ('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
        '"num_warps": 4, "num_stages": 4},\n "4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, '
        '"BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}\n')
H100_FP8 = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
RTX_FP8 = "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"


@pytest.fixture
def table(tmp_path):
    p = tmp_path / H100_FP8
    p.write_text(OVER)
    return p


def test_clean_file_exits_0(cli, table):
    r = cli("check", table, "--isolated", "--estimator", "analytic")
    assert r.exit_code == 0, r.output
    assert "All checks passed" in r.output


def test_overflow_for_a_target_exits_1_with_concise_lines(cli, table):
    r = cli("check", table, "--isolated", "--target", "rtx4090", "--estimator", "analytic")
    assert r.exit_code == 1
    line = r.output.splitlines()[0]
    assert line.startswith(f"{table}:2:")
    assert "SMEM001" in line and "Required: 147456, Hardware limit: 101376" in line
    assert "Found 1 diagnostic (1 error, 0 warnings) in 1 of 1 file." in r.output  # no "1 diagnostics"


def test_exit_zero_quiet_statistics_and_output_file(cli, table, tmp_path):
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--exit-zero", "-q")
    assert r.exit_code == 0 and "Found" not in r.output and "SMEM001" in r.output
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--statistics")
    assert r.exit_code == 1 and r.output.split() == ["1", "SMEM001", "shared-memory-per-block"]
    out = tmp_path / "report.txt"
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "-o", out)
    assert r.exit_code == 1 and "SMEM001" in out.read_text() and "SMEM001" not in r.output


def test_json_output_fields(cli, table):
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--output-format", "json")
    assert r.exit_code == 1
    (d,) = json.loads(r.output)
    assert {"code", "message", "severity", "filename", "location", "end_location", "target", "fix", "data"} <= set(d)
    assert d["code"] == "SMEM001" and d["severity"] == "error" and d["target"] == "rtx4090"
    assert d["location"] == {"row": 2, "column": 124} and d["pointer"] == "/4096/num_stages"
    assert d["data"]["required_bytes"] == 147456 and d["data"]["limit_bytes"] == 101376
    assert d["data"]["estimator"] == "analytic" and d["data"]["batch_size"] == 4096


def test_sarif_output_is_valid_sarif_2_1_0(cli, table, tmp_path):
    from jsonschema import Draft4Validator

    bad = tmp_path / "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
    bad.write_text('{"1": {"BLOCK_SIZE_M": 48')
    r = cli("check", table, bad, "--isolated", "-t", "rtx4090", "--estimator", "analytic",
            "--output-format", "sarif")
    doc = json.loads(r.output)
    schema = json.loads((Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json").read_text())
    errors = list(Draft4Validator(schema).iter_errors(doc))
    assert not errors, errors[0].message
    results = doc["runs"][0]["results"]
    assert {x["ruleId"] for x in results} == {"SMEM001", "SCH001"}
    rules = doc["runs"][0]["tool"]["driver"]["rules"]
    assert all(r["fullDescription"]["text"].startswith(r["shortDescription"]["text"]) for r in rules)


def test_github_and_gitlab_formats(cli, table):
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--output-format", "github")
    assert r.output.startswith("::error title=tilefit shared-memory-per-block (SMEM001),file=")
    assert ",line=2,col=124," in r.output
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--output-format", "gitlab")
    (d,) = json.loads(r.output)
    assert d["check_name"] == "SMEM001" and d["location"]["lines"]["begin"] == 2 and len(d["fingerprint"]) == 16


def test_select_ignore_and_unknown_codes(cli, table):
    base = ("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic")
    assert cli(*base, "--ignore", "SMEM").exit_code == 0
    assert cli(*base, "--select", "VAL").exit_code == 0
    assert cli(*base, "--ignore", "SMEM", "--extend-select", "SMEM001").exit_code == 1
    r = cli(*base, "--select", "NOPE123")
    assert r.exit_code == 2 and "matches no rule code" in r.output


def test_unknown_target_is_a_usage_error_with_suggestions(cli, table):
    r = cli("check", table, "--isolated", "--target", "rtx4909")
    assert r.exit_code == 2
    assert "rtx4090" in r.output and "Traceback" not in r.output


def test_pyproject_targets_per_file_ignores_and_unknown_keys(cli, table, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.tilefit]\ntargets = ["rtx4090"]\nestimator = "analytic"\n')
    assert cli("check", table.name).exit_code == 1
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tilefit]\ntargets = ["rtx4090"]\nestimator = "analytic"\n'
        f'[tool.tilefit.per-file-ignores]\n"{H100_FP8}#/4096" = ["SMEM001"]\n')
    assert cli("check", table.name).exit_code == 0
    (tmp_path / "pyproject.toml").write_text('[tool.tilefit]\ntarget = ["rtx4090"]\n')
    r = cli("check", table.name)
    assert r.exit_code == 2 and "unknown key" in r.output and "'targets'" in r.output
    (tmp_path / "pyproject.toml").write_text('[tool.tilefit]\ntargets = "rtx4090"\n')
    r = cli("check", table.name)
    assert r.exit_code == 2 and "must be a list" in r.output
    (tmp_path / "pyproject.toml").write_text('[tool.tilefit\n')
    r = cli("check", table.name)
    assert r.exit_code == 2 and "invalid TOML" in r.output


def test_per_file_ignore_pointers_are_rfc_6901(cli, table, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = '[tool.tilefit]\ntargets = ["rtx4090"]\nestimator = "analytic"\n[tool.tilefit.per-file-ignores]\n'
    (tmp_path / "pyproject.toml").write_text(base + f'"{H100_FP8}#4096" = ["SMEM001"]\n')
    r = cli("check", table.name)
    assert r.exit_code == 2 and "must start with '/'" in r.output and "Traceback" not in r.output
    (tmp_path / "pyproject.toml").write_text(base + f'"{H100_FP8}#/4096/num_stages" = ["SMEM001"]\n')
    assert cli("check", table.name).exit_code == 0  # the finding points at /4096/num_stages
    (tmp_path / "pyproject.toml").write_text(base + f'"{H100_FP8}#/409" = ["SMEM001"]\n')
    assert cli("check", table.name).exit_code == 1  # a prefix of a key is not a parent


def test_baseline_hides_known_findings_only(cli, table, tmp_path):
    base = tmp_path / "baseline.json"
    args = ("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--baseline", base)
    r = cli(*args, "--update-baseline")
    assert r.exit_code == 0 and json.loads(base.read_text())["findings"][0]["code"] == "SMEM001"
    assert cli(*args).exit_code == 0
    table.write_text(OVER.replace('"num_stages": 4},\n', '"num_stages": 12},\n'))  # a new finding in "1"
    r = cli(*args, "-q")
    assert r.exit_code == 1
    assert [line.split(":")[1] for line in r.output.splitlines()] == ["1"]  # only the new one, on line 1
    base.write_text("{not json")
    r = cli(*args)
    assert r.exit_code == 2 and "baseline" in r.output


@pytest.mark.parametrize("content,code", [
    (b'{"1": {"BLOCK_SIZE_M": 16', "SCH001"),             # truncated
    (b'{"1": {"BLOCK_SIZE_M": 16,}}', "SCH001"),          # malformed
    (b"", "SCH001"),                                      # empty
    (b'{"1": {"BLOCK_SIZE_M": "\xff"}}', "SCH001"),      # not UTF-8
    (b'{"1": {"BLOCK_SIZE_M": "16", "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', "VAL002"),
    (b'{"1": [16, 32]}', "SCH002"),
    (b'[1, 2]', "SCH002"),
    (b'{"one": {}}', "KEY001"),
    (b'{"1": {}, "1": {}}', "KEY002"),
])
def test_bad_input_is_a_diagnostic_never_a_traceback(cli, tmp_path, content, code):
    p = tmp_path / H100_FP8
    p.write_bytes(content)
    good = tmp_path / RTX_FP8
    good.write_text('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1}}')
    r = cli("check", tmp_path, "--isolated", "--estimator", "analytic", "--output-format", "json")
    assert r.exit_code == 1
    diags = json.loads(r.output)
    assert code in {d["code"] for d in diags}
    assert all(d["filename"] == str(p) for d in diags)  # the other file was checked, and is clean


def test_missing_path_is_a_one_line_error_and_the_run_continues(cli, table, tmp_path):
    r = cli("check", tmp_path / "nope", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic")
    assert r.exit_code == 2
    assert "no such file or folder" in r.output and "SMEM001" in r.output


def test_folder_of_ten_thousand_files(cli, tmp_path):
    for i in range(9990):
        (tmp_path / f"notes-{i}.json").write_text("{}")
    for i in range(10):
        (tmp_path / f"E={i + 1},N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json").write_text(OVER)
    r = cli("check", tmp_path, "--isolated", "--estimator", "analytic", "--statistics")
    assert r.exit_code == 1 and r.output.split()[:2] == ["10", "SMEM001"]


def test_rule_and_devices_commands(cli):
    r = cli("rule", "SMEM001")
    assert r.exit_code == 0 and "## What it does" in r.output
    assert cli("rule", "SMEM999").exit_code == 2
    r = cli("rule", "--all")
    assert "SMEM001" in r.output and "OCC001" in r.output
    r = cli("devices")
    assert r.exit_code == 0 and "rtx4090" in r.output and "101376" in r.output
    r = cli("devices", "consumer", "--output-format", "json")
    keys = {d["key"] for d in json.loads(r.output)}
    assert "rtx4090" in keys and "h100-sxm" not in keys
    assert cli("devices", "nope-device").exit_code == 2


def test_pre_commit_hook_runs_through_real_pre_commit(tmp_path):
    """Our .pre-commit-hooks.yaml's `tilefit` hook on a fixture repo, through pre-commit itself.
    Tests run offline, so the hook's environment is the installed tilefit (language: system)
    instead of a fresh virtualenv; entry, args and file types come from our manifest."""
    import yaml

    pre_commit = shutil.which("pre-commit")
    if pre_commit is None:
        pytest.skip("pre-commit is not installed")
    manifest = yaml.safe_load((Path(__file__).parents[1] / ".pre-commit-hooks.yaml").read_text())
    hook = dict(next(h for h in manifest if h["id"] == "tilefit"))
    hook["language"] = "system"
    hook["entry"] = f"{sys.executable} -m tilefit " + hook["entry"].split(" ", 1)[1]
    hook.pop("minimum_pre_commit_version", None)
    repo = tmp_path / "repo"
    (repo / "configs").mkdir(parents=True)
    (repo / "configs" / RTX_FP8).write_text(OVER)
    (repo / "configs" / "package.json").write_text("{}")
    (repo / "README.md").write_text("x\n")
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": [hook]}]}))
    env = dict(os.environ, TILEFIT_CACHE_DIR=str(tmp_path / "cache"), PRE_COMMIT_HOME=str(tmp_path / "pc"))
    run = lambda *a: subprocess.run(a, cwd=repo, env=env, capture_output=True, text=True)  # noqa: E731
    run("git", "init", "-q")
    run("git", "add", ".")
    r = run(pre_commit, "run", "--all-files")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "SMEM001" in r.stdout and "Required: 147456, Hardware limit: 101376" in r.stdout
    (repo / "configs" / RTX_FP8).write_text(OVER.replace('"num_stages": 4}}', '"num_stages": 3}}'))
    r = run(pre_commit, "run", "--all-files")
    assert r.returncode == 0, r.stdout + r.stderr


def test_result_cache_gives_the_same_results_and_misses_on_change(cli, tmp_path, monkeypatch):
    import shutil as _shutil

    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "configs"
    folder.mkdir()
    for name in (H100_FP8, RTX_FP8):
        (folder / name).write_text(OVER)
    args = ("check", folder, "--isolated", "-t", "consumer", "--estimator", "analytic", "-q")
    cold = cli(*args)
    assert (tmp_path / "cache" / "results").is_dir()  # the concise format (no fix planning) caches
    warm = cli(*args)
    uncached = cli(*args, "--no-cache")
    assert cold.output == warm.output == uncached.output and cold.output.count("SMEM001 ") == 2
    (folder / RTX_FP8).write_text(OVER.replace('"num_stages": 4}}', '"num_stages": 3}}'))
    assert cli(*args).output.count("SMEM001") == 1
    r = cli("check", folder, "--isolated", "-t", "consumer", "--estimator", "analytic", "--ignore", "SMEM,DEV")
    assert r.exit_code == 0, r.output  # a different selection is a different cache key
    _shutil.rmtree(tmp_path / "cache")


# -- issue 19: tracebacks and wrong exits -------------------------------------------------------

def test_output_file_in_a_missing_folder_is_created_as_ruff_does(cli, table, tmp_path):
    out = tmp_path / "reports" / "deep" / "x.sarif"
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--output-format", "sarif",
            "-o", out)
    assert r.exit_code == 1 and json.loads(out.read_text())["version"] == "2.1.0"


def test_output_file_under_a_file_is_a_one_line_error(cli, table, tmp_path):
    (tmp_path / "afile").write_text("x")
    r = cli("check", table, "--isolated", "-t", "rtx4090", "-o", tmp_path / "afile" / "x.sarif")
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [f"error: cannot write the report to {tmp_path / 'afile' / 'x.sarif'}: "
                                             f"{tmp_path / 'afile'} is a file, not a folder"]
    r = cli("check", table, "--isolated", "-t", "rtx4090", "-o", tmp_path)  # a folder, not a file
    assert r.exit_code == 2 and "is a directory" in r.output and "Traceback" not in r.output  # click says so


def test_probe_doctor_and_fix_report_files_go_where_check_o_goes(cli, table, tmp_path):
    """probe/doctor -o and --fix-report create a missing folder as check -o does (they failed
    with the temporary file's name); a folder that cannot be made is refused before any work, so
    --fix with a bad --fix-report no longer rewrites the table and then exits 2."""
    svg = tmp_path / "plots" / "deep" / "s.svg"
    r = cli("probe", "fused_moe", "--tile", "128,256,128", "--estimator", "analytic", "--output-format", "svg",
            "-o", svg)
    assert r.exit_code == 0 and "<svg " in svg.read_text(), r.output
    text = tmp_path / "doctor" / "d.txt"
    r = cli("doctor", "--shape", "E=128,N=768,K=2048,topk=8", "-t", "rtx4090", "--estimator", "analytic", "-o", text)
    assert r.exit_code == 0 and text.read_text().startswith("tilefit doctor"), r.output
    (tmp_path / "afile").write_text("x")
    for cmd in (("probe", "fused_moe", "--estimator", "analytic"), ("doctor", "--shape", "E=128,N=768,K=2048,topk=8",
                                                                    "-t", "rtx4090")):
        r = cli(*cmd, "-o", tmp_path / "afile" / "x")
        assert r.exit_code == 2 and r.output.strip().splitlines() == [
            f"error: cannot write the report to {tmp_path / 'afile' / 'x'}: {tmp_path / 'afile'} is a file, "
            "not a folder"], r.output
    before = table.read_text()
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--fix", "--fix-report",
            tmp_path / "afile" / "r.md")
    assert r.exit_code == 2 and "cannot write the fix report to" in r.output and table.read_text() == before
    report = tmp_path / "reports" / "r.md"
    r = cli("check", table, "--isolated", "-t", "rtx4090", "--estimator", "analytic", "--diff", "--fix-report", report)
    assert r.exit_code == 1 and "Would change **1 entry**" in report.read_text(), r.output


def test_a_missing_path_does_not_also_say_all_checks_passed(cli, tmp_path):
    r = cli("check", tmp_path / "nope", "--isolated")
    assert r.exit_code == 2
    assert "All checks passed" not in r.output and "no such file or folder" in r.output
    r = cli("check", tmp_path / "nope", "--isolated", "--fix")
    assert r.exit_code == 2 and "All checks passed" not in r.output


def test_triton_version_must_be_a_version(cli, table):
    r = cli("check", table, "--isolated", "--triton-version", "abc")
    assert r.exit_code == 2 and "'abc' is not a version" in r.output


def test_summary_counts_are_singular_and_info_does_not_fail(cli, tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    path.write_text('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
                    '"num_warps": 4, "num_stages": 4}}')
    r = cli("check", path, "--isolated", "-t", "rtx3090", "--estimator", "analytic")
    assert r.exit_code == 0, r.output
    assert r.output.splitlines()[-1] == "All checks passed: 1 file. 1 info diagnostic (not a failure)."
