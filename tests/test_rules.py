"""Every rule's documented examples, run through the real engine, plus rule-registry checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.config import Settings
from tilefit.rules import RULES

CASES = [(code, i, ex) for code, rule in RULES.items() for i, ex in enumerate(rule.examples)]


@pytest.mark.parametrize("code,index,example", CASES, ids=[f"{c}-{i}" for c, i, _ in CASES])
def test_rule_examples(tmp_path, code, index, example):
    from tilefit.rules.base import Scope

    if RULES[code].scope is Scope.CALLSITE:
        pytest.importorskip("triton", reason="call-site examples compile the scanned kernel")
    path = tmp_path / example.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(example.content)
    result = run_check([str(path)], CheckOptions(targets=list(example.targets), select=[code],
                                                 estimator="analytic"), Settings())
    codes = [d.code for d in result.diagnostics]
    assert (code in codes) == example.fails, (example.note, [d.message for d in result.diagnostics])
    for d in result.diagnostics:
        assert d.path == str(path) and d.span.start.line >= 1 and d.span.start.column >= 1


FIXED = [(code, i, ex) for code, i, ex in CASES if ex.fixed is not None]


@pytest.mark.parametrize("code,index,example", FIXED, ids=[f"{c}-{i}" for c, i, _ in FIXED])
def test_rule_examples_are_fixed_to_their_fixed_text(tmp_path, code, index, example):
    """Fixit's expected_replacement: `check --fix` turns the example into exactly ``fixed``, which
    the rule accepts; an example that needs --unsafe-fixes is left alone without it."""
    from tilefit.app import run_fix
    from tilefit.rules.base import Scope

    if RULES[code].scope is Scope.CALLSITE:
        pytest.importorskip("triton", reason="call-site examples compile the scanned kernel")
    path = tmp_path / example.file_name
    path.parent.mkdir(parents=True, exist_ok=True)
    opts = CheckOptions(targets=list(example.targets), select=[code], estimator="analytic")
    if example.unsafe:
        path.write_text(example.content)
        run_fix([str(path)], opts, Settings())
        assert path.read_text() == example.content  # safe fixes only: nothing to apply
    path.write_text(example.content)
    result = run_fix([str(path)], CheckOptions(targets=list(example.targets), select=[code], estimator="analytic",
                                               unsafe_fixes=example.unsafe), Settings())
    assert not result.errors and path.read_text() == example.fixed
    assert [d.code for d in result.check.diagnostics] == []


def test_fix_metadata_is_the_registry_of_what_the_fixer_clears():
    from tilefit.fix.planner import FIXABLE
    from tilefit.rules import FixAvailability, Planner, fixable_codes

    assert FIXABLE == fixable_codes(Planner.ENTRY) == ("SMEM001", "THR001")
    assert fixable_codes(Planner.CALLSITE) == ("SMEM002", "SMEM003")
    for code, rule in RULES.items():
        fixed = [e for e in rule.examples if e.fixed is not None]
        if rule.fix_availability is FixAvailability.NONE:
            assert rule.fix_planner is None and not fixed, code
        else:
            assert rule.fix_planner is not None and fixed, f"{code} is fixable: an example must show its fix"
        assert all(e.fails for e in fixed), code


def test_rule_options_from_pyproject_reach_the_rule(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json").write_text(
        '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
        '"num_warps": 4, "num_stages": 3}}')
    base = '[tool.tilefit]\nestimator = "analytic"\nextend-select = ["OCC001"]\n'
    (tmp_path / "pyproject.toml").write_text(base)
    assert cli("check", ".").exit_code == 0  # several blocks fit an SM
    (tmp_path / "pyproject.toml").write_text(base + '[tool.tilefit.rules.OCC001]\nmin-blocks-per-sm = 5\n')
    r = cli("check", ".", "--output-format", "json")
    (d,) = json.loads(r.output)
    assert r.exit_code == 1 and d["code"] == "OCC001" and d["data"]["blocks_per_sm"] == 4
    assert d["message"].startswith("4 blocks (fewer than 5) per SM on rtx4090")
    for table, fragment in [
        ('[tool.tilefit.rules.OCC001]\nmin-blocks = 5\n', "unknown option 'min-blocks' (options of OCC001: "
                                                          "min-blocks-per-sm)"),
        ('[tool.tilefit.rules.OCC001]\nmin-blocks-per-sm = "5"\n', "min-blocks-per-sm must be an integer, got '5'"),
        ('[tool.tilefit.rules.OCC001]\nmin-blocks-per-sm = 1\n', "must be at least 2"),
        ('[tool.tilefit.rules.OCC01]\nmin-blocks-per-sm = 3\n', "no rule 'OCC01' (did you mean OCC001?)"),
        ('[tool.tilefit.rules.SMEM001]\nmargin = 3\n', "unknown option 'margin' (options of SMEM001: none)"),
    ]:
        (tmp_path / "pyproject.toml").write_text(base + table)
        r = cli("check", ".")
        assert r.exit_code == 2 and fragment in r.output and "Traceback" not in r.output, r.output


def test_every_rule_is_documented_with_failing_and_passing_examples():
    for code, rule in RULES.items():
        doc = rule.documentation()
        assert "## What it does" in doc and "## Why is this bad?" in doc, code
        if code == "IO001":  # needs an unreadable file, not content: tested below
            continue
        assert any(e.fails for e in rule.examples), f"{code} has no failing example"
        assert any(not e.fails for e in rule.examples), f"{code} has no passing example"


def test_io001_unreadable_file_is_a_diagnostic_not_a_crash(tmp_path):
    from tilefit.api import build_engine
    from tilefit.tables import read_table

    folder = tmp_path / "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
    folder.mkdir()
    engine = build_engine(Settings(), CheckOptions(estimator="analytic"))
    diags = engine.check_table(read_table(str(folder)))
    assert [d.code for d in diags] == ["IO001"]
    assert "directory" in diags[0].message


def test_smem001_reports_the_runtime_error_figures_and_the_target(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    path.write_text('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128,\n'
                    '          "GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}\n')
    result = run_check([str(path)], CheckOptions(targets=["rtx4090", "sm_90"], estimator="analytic"), Settings())
    smem = [d for d in result.diagnostics if d.code == "SMEM001"]
    assert len(smem) == 1  # fits the H100 and sm_90 (196608 <= 232448); overflows the 4090 only
    d = smem[0]
    assert "Required: 147456, Hardware limit: 101376" in d.message and "rtx4090" in d.message
    assert d.target == "rtx4090" and d.data["required_bytes"] == 147456 and d.data["limit_bytes"] == 101376
    assert d.pointer == "/4096/num_stages"
    assert (d.span.start.line, d.span.start.column) == (2, 61)


def test_targets_with_equal_verdicts_are_merged_into_one_diagnostic(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    path.write_text('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                    '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}')
    result = run_check([str(path)], CheckOptions(targets=["consumer"], estimator="analytic"), Settings())
    smem = [d for d in result.diagnostics if d.code == "SMEM001"]
    assert len(smem) == 1
    assert {"rtx4090", "rtx5090", "gb10"} <= set(smem[0].data["targets"])
    assert set(smem[0].data["archs"]) >= {"sm_89", "sm_120"}


def test_vllm_clamps_block_k_for_block_quantised_tables(tmp_path):
    """vLLM runs BLOCK_SIZE_K=256 entries of a [128,128] table with BK=128: not an overflow."""
    entry = ('{"64": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 1, '
             '"num_warps": 4, "num_stages": 4}}')
    vllm = tmp_path / "vllm" / "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8,block_shape=[128,128].json"
    sglang = tmp_path / "sglang" / "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8,block_shape=[128, 128].json"
    for p in (vllm, sglang):
        p.parent.mkdir()
        p.write_text(entry)
    r_v = run_check([str(vllm)], CheckOptions(select=["SMEM001"], estimator="analytic"), Settings())
    r_s = run_check([str(sglang)], CheckOptions(select=["SMEM001"], estimator="analytic"), Settings())
    assert r_v.diagnostics == []  # 3 x (64+128) x 128 = 73728
    # SGLang's own kernel: 3 x 192 x 256 operand bytes and no block-scale buffer (its b_scale is a
    # scalar at BLOCK_SIZE_N = group_n; our reference kernel needs 147968)
    assert [d.data["required_bytes"] for d in r_s.diagnostics] == [147456]


def test_default_targets_are_the_named_device_only(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    path.write_text('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
                    '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}')
    assert run_check([str(path)], CheckOptions(estimator="analytic"), Settings()).diagnostics == []


def test_rule_docs_and_the_readme_table_are_generated_from_the_registry():
    """docs/rules.md and the README's rule table are what `python -m tilefit.rules.docs` writes
    (run it after changing a rule); every rule link of the reporters points at a section."""
    from tilefit.reporters.common import rule_url
    from tilefit.rules.docs import repo_root, rules_markdown, stale_files

    stale = stale_files()
    assert not stale, f"stale: {', '.join(str(p) for p in stale)}; run `python -m tilefit.rules.docs`"
    text = (repo_root() / "docs" / "rules.md").read_text()
    headings = {line[3:].strip().lower() for line in text.splitlines() if line.startswith("## ")}
    for code, rule in RULES.items():
        url = rule_url(code)
        assert url.endswith(f"/docs/rules.md#{code.lower()}") and code.lower() in headings
        assert rule.summary() in text
        for ex in rule.examples:
            if ex.fixed is not None:  # the fix is shown: its changed lines are in the diff
                assert all(f"+{line}" in text for line in set(ex.fixed.splitlines()) - set(ex.content.splitlines()))
    assert rules_markdown() == text


def test_rule_command_prints_markdown_and_options(cli):
    from tilefit.rules.docs import rule_section, rules_markdown

    assert cli("rule", "--all", "--format", "markdown").output == rules_markdown()
    assert cli("rule", "THR001", "--format", "markdown").output == rule_section(RULES["THR001"])
    r = cli("rule", "OCC001")
    assert "min-blocks-per-sm (int, default 2)" in r.output


# -- issue 19: extra targets that cannot run a table's dtype; device lists lead with named ones --

FP8_ENTRY = ('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, '
             '"num_warps": 4, "num_stages": 4},\n "4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, '
             '"BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}\n')


def test_dev002_for_an_extra_target_is_information_once_per_file(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    path.write_text(FP8_ENTRY)
    result = run_check([str(path)], CheckOptions(targets=["rtx3090", "a10", "rtx4090"], estimator="analytic"),
                       Settings())
    dev = [d for d in result.diagnostics if d.code == "DEV002"]
    assert len(dev) == 1 and dev[0].severity.value == "info"  # once per file, two entries
    assert dev[0].data["targets"] == ["rtx3090", "a10"]  # in the user's order
    assert "not checked on them" in dev[0].message and "fp8 e4m3 (fp8e4nv)" in dev[0].message
    # the sm_86 cards are not judged for shared memory: the engine runs Marlin there
    smem = [d for d in result.diagnostics if d.code == "SMEM001"]
    assert smem and all(d.data["targets"] == ["rtx4090"] for d in smem)
    assert result.exit_code == 1  # the 4090 overflow fails; the information does not
    only_info = run_check([str(path)], CheckOptions(targets=["rtx3090"], estimator="analytic"), Settings())
    assert [d.code for d in only_info.diagnostics] == ["DEV002"] and only_info.exit_code == 0


def test_dev002_for_the_device_the_file_names_stays_an_error(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_A100-SXM4-80GB,dtype=fp8_w8a8.json"
    path.write_text(FP8_ENTRY)
    result = run_check([str(path)], CheckOptions(targets=["rtx3090"], estimator="analytic"), Settings())
    dev = sorted((d.severity.value, tuple(d.data["targets"])) for d in result.diagnostics if d.code == "DEV002")
    assert dev == [("error", ("a100-sxm4-80gb",)), ("info", ("rtx3090",))]
    assert result.exit_code == 1


def test_device_lists_lead_with_the_named_device_and_the_users_targets(tmp_path):
    path = tmp_path / "E=128,N=768,device_name=NVIDIA_GeForce_RTX_5090,dtype=fp8_w8a8.json"
    path.write_text(FP8_ENTRY)
    result = run_check([str(path)], CheckOptions(targets=["consumer"], estimator="analytic"), Settings())
    (smem,) = [d for d in result.diagnostics if d.code == "SMEM001"]
    assert smem.data["targets"][:3] == ["rtx5090", "rtx4090", "gb10"]  # the file's device, then the group's lead
    assert "OutOfResources on rtx5090, rtx4090, gb10 and " in smem.message
    other = tmp_path / "x" / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    other.parent.mkdir()
    other.write_text(FP8_ENTRY)
    result = run_check([str(other)], CheckOptions(targets=["l40s", "consumer"], estimator="analytic"), Settings())
    (smem,) = [d for d in result.diagnostics if d.code == "SMEM001"]
    assert smem.message.startswith("OutOfResources on l40s, rtx4090, rtx5090 and ")
