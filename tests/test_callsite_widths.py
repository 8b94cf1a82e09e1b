"""Run-time widths a scenario gives (issue 18.3): a routing tensor's top-k width
(``recv_topk_ids.shape[1]``) and a model width folded through the standard library's ``math``
(``math.gcd(hidden_size, 1024)``), on our own fixture in the shape of vLLM 0.33.0's
expert-parallel gather (deep_gemm_utils.py); no engine code."""

from __future__ import annotations

from pathlib import Path

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Frame, Lit, Unknown, branches

FIXTURE = Path(__file__).parent / "fixtures" / "callsites" / "moe" / "vllm" / "model_executor" / "layers" / \
    "fused_moe" / "ep_gather.py"


def _values(scenario: str) -> dict:
    sites = build_scenario_sites(Project.scan([str(FIXTURE)]), resolve([scenario]), "cuda")
    (site,) = [s for s in sites.launches if s.kernel.name == "gather_kernel"]
    (inst,) = site.instances
    out = {}
    for k in ("topk_num", "BLOCK_D"):
        (arm,) = list(branches(inst.args[k]))
        out[k] = arm[1].value if isinstance(arm[1], Lit) else arm[1]
    return inst.label, out


def test_topk_width_and_gcd_of_the_hidden_size():
    label, got = _values("mixtral-8x7b")  # hidden 4096, top-2
    assert got == {"topk_num": 2, "BLOCK_D": 1024} and label == "scenario mixtral-8x7b"
    _, got = _values("deepseek-v3-tp8")  # hidden 7168 = 7 x 1024, top-8
    assert got == {"topk_num": 8, "BLOCK_D": 1024}


def test_a_dense_scenario_has_no_routing_width():
    _, got = _values("llama-gqa-128")
    assert isinstance(got["topk_num"], Unknown)


def test_math_folds_only_the_standard_library():
    project = Project.scan([str(FIXTURE)])
    module = project.primary_modules()[0]
    ev = project.evaluator
    import ast

    assert ev.expr(Frame(module), ast.parse("math.gcd(7168, 1024)", mode="eval").body).value == 1024
    assert ev.expr(Frame(module), ast.parse("math.ceil(576 * 3 / 8)", mode="eval").body).value == 216
    # not a pure function we fold: stays unknown (nothing is run)
    assert isinstance(ev.expr(Frame(module), ast.parse("math.sin(1)", mode="eval").body), Unknown)


def test_a_local_read_from_a_shape_takes_the_dimension_the_kernel_parameter_names():
    path = Path(__file__).parent / "fixtures" / "callsites" / "widths" / "hadamard.py"
    sites = build_scenario_sites(Project.scan([str(path)]), resolve(["llama-gqa-128", "qwen-gqa-64"]), "cuda")
    by = {s.where.split(" in ")[1].split("(")[0]: s for s in sites.launches}
    # `d = x.shape[-1]; ... D=d`: D is the head size, per scenario
    got = {i.label: list(branches(i.args["D"]))[0][1].value for i in by["hadamard_transform"].instances}
    assert got == {"scenario llama-gqa-128": 128, "scenario qwen-gqa-64": 64}
    # a local assigned twice (a layout branch) is not taken as that dimension
    (inst,) = by["hadamard_twice"].instances
    assert any(isinstance(x, Unknown) for _, x in branches(inst.args["D"]))


def _table_instances(target):
    from tilefit.api import load_devices, resolve_targets
    from tilefit.config import Settings

    path = Path(__file__).parent / "fixtures" / "callsites" / "widths" / "table.py"
    devices = tuple(resolve_targets(load_devices(Settings(), ()), [target]))
    sites = build_scenario_sites(Project.scan([str(path)]), resolve(["llama-gqa-128"]), "cuda", frozenset(), devices)
    (site,) = [s for s in sites.launches if s.kernel.name == "tile_kernel"]
    out = []
    for inst in site.instances:
        one = {k: list(branches(v)) for k, v in (("BLOCK_N", inst.args["BLOCK_N"]), ("num_warps", inst.options["num_warps"]),
                                                 ("num_stages", inst.options["num_stages"]))}
        assert all(len(v) == 1 and isinstance(v[0][1], Lit) for v in one.values()), inst.label
        out.append((inst.label, tuple(v[0][1].value for v in one.values())))
    return out


def test_a_table_row_picked_at_run_time_gives_every_row_it_can():
    # rtx4090's runtime name has no "H20": the small table; each of its rows is one instance, and
    # the three values of a row stay together (one entry per call)
    got = _table_instances("rtx4090")
    assert sorted(v for _, v in got) == [(16, 1, 1), (16, 4, 1)]
    assert all("taking entry" in label for label, _ in got)


def test_the_device_name_test_does_not_fold_when_the_targets_disagree():
    got = _table_instances("h20,rtx4090")
    # both tables' rows: the device test is a run-time one for these targets
    assert {v for _, v in got} == {(32, 8, 2), (64, 4, 2), (16, 1, 2), (16, 4, 1), (16, 1, 1)}


def test_a_caller_that_fails_the_launchers_assert_makes_no_launch():
    path = Path(__file__).parent / "fixtures" / "callsites" / "widths" / "table.py"
    sites = build_scenario_sites(Project.scan([str(path)]), resolve(["llama-gqa-128"]), "cuda")
    got = [(s.caller.scope.name if s.caller is not None else None, list(branches(i.args["group_size"]))[0][1])
           for s in sites.launches if s.kernel.name == "group_kernel" and s.launch.scope.name == "invoke_group"
           for i in s.instances]
    assert [(c, v.value) for c, v in got if c is not None] == [("group_caller", 128)]


def test_a_call_of_the_launcher_the_outer_callers_values_skip_makes_no_launch():
    path = Path(__file__).parent / "fixtures" / "callsites" / "widths" / "table.py"
    sites = build_scenario_sites(Project.scan([str(path)]), resolve(["llama-gqa-128"]), "cuda")
    got = {(s.path.rsplit("/", 1)[-1], s.anchor.start.line): [list(branches(i.args["group_size"]))[0][1]
                                                               for i in s.instances]
           for s in sites.launches if s.kernel.name == "group_kernel" and s.launch.scope.name == "invoke_group2"}
    vals = [v for vals in got.values() for v in vals]
    # group_path's block; plain_path's None never reaches the launcher (no instance with None[1])
    assert all(isinstance(v, Lit) for v in vals) and [v.value for v in vals] == [64], vals
