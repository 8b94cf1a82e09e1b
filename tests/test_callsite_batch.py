"""The decode batch size as a named scenario dimension (issue 18.3): a launch that reads it
(``seq_lens.shape[0]``, ``num_seqs``, ``forward_batch.batch_size``) is evaluated once per batch
size of the scenario (names.json ``batch_sizes``: 1, 32, 256, 1024 unless the fact says), each
evaluation folding its own branches (``if num_seq < 256``), each instance labelled ``batch size
N``; a launch that reads none is judged once, without the label. Fixture ``callsites/batch`` is
our own code in the shape of SGLang 0.5.23's split-KV planner; no engine code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import ScenarioError, builtin, from_facts, from_table, resolve, with_roles
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, branches

FIXTURE = Path(__file__).parent / "fixtures" / "callsites" / "batch" / "kv_splits.py"


def _sites(scenarios):
    sites = build_scenario_sites(Project.scan([str(FIXTURE)]), scenarios, "cuda")
    return {s.where.split(" in ")[1].split("(")[0]: s for s in sites.launches}


def _max_num_seq(inst):
    (arm,) = list(branches(inst.args["MAX_NUM_SEQ"]))
    assert isinstance(arm[1], Lit), inst.label
    return arm[1].value


def test_each_batch_size_is_its_own_evaluation():
    site = _sites(resolve(["llama-gqa-128"]))["Backend.get_num_kv_splits"]
    got = {inst.label: _max_num_seq(inst) for inst in site.instances}
    # 1, 32 take the `< 256` branch (256); 256 and 1024 the power of two (each its own evaluation:
    # no instance pairs one batch size's branch with another's value)
    assert got == {"scenario llama-gqa-128 (batch size 1)": 256, "scenario llama-gqa-128 (batch size 32)": 256,
                   "scenario llama-gqa-128 (batch size 256)": 256, "scenario llama-gqa-128 (batch size 1024)": 1024}
    # num_seq (not a constexpr) is the batch size of the same evaluation
    for inst in site.instances:
        (arm,) = list(branches(inst.args["num_seq"]))
        assert f"(batch size {arm[1].value})" in inst.label


def test_a_launch_that_reads_no_batch_is_judged_once_without_the_label():
    site = _sites(resolve(["llama-gqa-128"]))["Backend.launch_fixed"]
    assert [(i.label, _max_num_seq(i)) for i in site.instances] == [("", 64)]


def test_a_table_sets_the_batch_sizes():
    s = from_table("mine", {"extends": "llama-gqa-128", "facts": {"batch_sizes": [2048]}})
    site = _sites([s])["Backend.get_num_kv_splits"]
    assert [(i.label, _max_num_seq(i)) for i in site.instances] == [("scenario mine (batch size 2048)", 2048)]
    with pytest.raises(ScenarioError, match="batch_sizes"):
        from_facts("bad", {"heads": 8, "head_dim": 64, "batch_sizes": [0]})


def test_the_variants_follow_the_default_list():
    s = builtin()["qwen-gqa-64"]
    assert s.batch == 1 and s.variant == ""
    assert [v.batch for v in with_roles([s]) if v.variant == "batch"] == [32, 256, 1024]
    assert all(v.dims["num_seqs"] == v.batch and v.values["seq_lens.shape[0]"] == v.batch
               for v in with_roles([s]))
