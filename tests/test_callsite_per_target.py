"""A capability check answered per target (issue 18.4): vLLM's
``current_platform.is_arch_support_pdl()`` and SGLang's ``is_arch_support_pdl()`` are "compute
capability >= 9.0". On targets that disagree (sm_86/sm_89 False, sm_120 True) the launch has one
instance per answer, labelled with the targets that give it, and each instance is judged on those
targets only (elsewhere it is ``unsupported``: that launch is not made there). Targets that agree
fold it to one literal. The fixture is our own code in the shape of vLLM 0.33.0's
``router/dsv4_topk.py`` launch."""

from __future__ import annotations

from types import SimpleNamespace

from tilefit.callsites.evaluate import CallsiteEvaluator, Outcome, launch_cases
from tilefit.callsites.project import Project
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, branches, consistent, label_capabilities

SOURCE = '''import triton
import triton.language as tl

from .platform import current_platform


@triton.jit
def topk_kernel(x_ptr, out_ptr, N: tl.constexpr, BLOCK_N: tl.constexpr, launch_pdl: tl.constexpr):
    offs = tl.arange(0, BLOCK_N)
    v = tl.load(x_ptr + offs, mask=offs < N)
    if launch_pdl:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, v, mask=offs < N)


def topk(x, out, n_experts: int = 256):
    topk_kernel[(1,)](x, out, N=n_experts, BLOCK_N=triton.next_power_of_2(n_experts), num_warps=1,
                      launch_pdl=current_platform.is_arch_support_pdl())


def topk_stages(x, out):
    topk_kernel[(1,)](x, out, N=64, BLOCK_N=64, launch_pdl=False,
                      num_stages=3 if current_platform.has_device_capability(90) else 1)


def topk_sm90(x, out):
    topk_kernel[(1,)](x, out, N=64, BLOCK_N=64, num_warps=2,
                      launch_pdl=current_platform.has_device_capability(90))
'''


def _site(tmp_path, capabilities, name="topk"):
    (tmp_path / "platform.py").write_text("current_platform = None\n")
    (tmp_path / "__init__.py").write_text("")
    path = tmp_path / "router_topk.py"
    path.write_text(SOURCE)
    project = Project.scan([str(p) for p in sorted(tmp_path.glob("*.py"))])
    sites = build_scenario_sites(project, [], "cuda", frozenset(capabilities))
    found = [s for s in sites.launches if s.caller is None and f"in {name}()" in s.where]
    assert len(found) == 1, [s.where for s in sites.launches]
    return project, found[0]


def test_targets_that_disagree_get_one_instance_per_answer(tmp_path):
    _, site = _site(tmp_path, {86, 89, 120})
    got = {}
    for inst in site.instances:
        (arm,) = branches(inst.value("launch_pdl"))
        got[label_capabilities(inst.label)] = arm[1].value
    assert got == {frozenset({120}): True, frozenset({86, 89}): False}, [i.label for i in site.instances]
    assert all("is_arch_support_pdl()" in i.label for i in site.instances)


def test_targets_that_agree_fold_to_one_literal(tmp_path):
    for caps, want in (({86, 89}, False), ({90, 100, 120}, True)):
        _, site = _site(tmp_path, caps)
        (inst,) = site.instances
        v = inst.value("launch_pdl")
        assert isinstance(v, Lit) and v.value is want and inst.label == ""


def test_each_instance_is_judged_on_its_own_targets_only(tmp_path):
    project, site = _site(tmp_path, {86, 89, 120})
    ev = CallsiteEvaluator(project, kernels={}, mode="exact", allow_import=False, estimator=None, triton=False)
    for case in launch_cases(site):
        caps = label_capabilities(case.label)
        for variant in ev.variants(case.kernel):
            for arch, cap in (("sm_86", 86), ("sm_89", 89), ("sm_120", 120)):
                device = SimpleNamespace(arch=arch)
                if cap in caps:
                    planned = ev.plan(case, variant, arch)
                    assert not isinstance(planned, Outcome), planned.detail
                    pdl = [a.value for a in planned[0] if a.name == "launch_pdl"]
                    assert pdl == [cap >= 90]
                else:  # run and the prefetch's job alike: no verdict, nothing to compile
                    for out in (ev.run(case, variant, device), ev.job(case, variant, device)):
                        assert isinstance(out, Outcome) and out.status == "unsupported", out
                        assert f"not on {arch}" in out.detail


def test_a_capability_test_with_an_argument_is_answered_per_target_too(tmp_path):
    _, site = _site(tmp_path, {89, 120}, "topk_sm90")
    got = {label_capabilities(i.label): [v.value for _, v in branches(i.value("launch_pdl"))] for i in site.instances}
    assert got == {frozenset({120}): [True], frozenset({89}): [False]}


def test_a_conditional_on_a_per_target_answer_keeps_each_arm_for_its_targets(tmp_path):
    _, site = _site(tmp_path, {86, 120}, "topk_stages")
    got = {label_capabilities(i.label): [v.value for _, v in branches(i.options["num_stages"])] for i in site.instances}
    assert got == {frozenset({120}): [3], frozenset({86}): [1]}, [i.label for i in site.instances]


def test_answers_of_two_checks_hold_together_only_on_a_common_target():
    a = "compute capability 86/89 (x() False)"
    b = "compute capability 120 (y() True)"
    c = "compute capability 89/120 (z() True)"
    assert not consistent([a, b])
    assert consistent([a, c]) and label_capabilities([a, c]) == frozenset({89})
    assert label_capabilities("scenario llama-gqa-128") is None


STORE = '''import torch
import triton
import triton.language as tl

from .platform import current_platform


@triton.jit
def store_kernel(src_ptr, dst_ptr, n, TILE_SIZE: tl.constexpr):
    offs = tl.arange(0, TILE_SIZE)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def store(src, dst, n_heads: int = 8, head_size: int = 128):
    n = n_heads * head_size
    TILE_SIZE = min(2048, triton.next_power_of_2(n))
    if current_platform.is_rocm():
        num_warps = 8
    else:
        num_warps = 16
        if torch.cuda.get_device_capability(src.device)[0] < 9:
            TILE_SIZE = min(512, TILE_SIZE)
    store_kernel[(1,)](src, dst, n, TILE_SIZE=TILE_SIZE, num_warps=num_warps)


def store_guarded(src, dst):
    if current_platform.has_device_capability(90):
        store_kernel[(1,)](src, dst, 64, TILE_SIZE=4096, num_warps=8)
        return
    store_kernel[(1,)](src, dst, 64, TILE_SIZE=256)


def store_major(src, dst):
    major, _minor = torch.cuda.get_device_capability()
    tile = 256
    if major >= 12:
        tile = 1024
    store_kernel[(1,)](src, dst, 64, TILE_SIZE=tile)
'''


def _store_site(tmp_path, capabilities, name="store"):
    (tmp_path / "platform.py").write_text("current_platform = None\n")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "reshape.py").write_text(STORE)
    project = Project.scan([str(p) for p in sorted(tmp_path.glob("*.py"))])
    sites = build_scenario_sites(project, [], "cuda", frozenset(capabilities))
    (site,) = [s for s in sites.launches if s.caller is None and f"in {name}()" in s.where]
    return site


def test_an_if_statement_on_the_device_capability_is_taken_per_target(tmp_path):
    # vLLM 0.33.0 reshape-and-cache: TILE_SIZE 512 below sm_90, 1024 (= 8 x 128) from sm_90 on
    site = _store_site(tmp_path, {86, 89, 120})
    got = {label_capabilities(i.label): i.value("TILE_SIZE").value for i in site.instances}
    assert got == {frozenset({86, 89}): 512, frozenset({120}): 1024}, [i.label for i in site.instances]
    assert all("TILE_SIZE per target" in i.label for i in site.instances)
    assert all(i.options["num_warps"].value == 16 for i in site.instances)  # the ROCm branch is not taken


def test_targets_on_one_side_of_the_test_give_one_instance(tmp_path):
    for caps, want in (({86, 89}, 512), ({90, 120}, 1024)):
        (inst,) = _store_site(tmp_path, caps).instances
        assert inst.value("TILE_SIZE").value == want and inst.label == ""


def test_the_capability_as_a_value_unpacks_per_target(tmp_path):
    site = _store_site(tmp_path, {89, 120}, "store_major")
    got = {label_capabilities(i.label): i.value("TILE_SIZE").value for i in site.instances}
    assert got == {frozenset({89}): 256, frozenset({120}): 1024}


def test_a_launch_under_a_capability_test_is_judged_on_those_targets_only(tmp_path):
    (tmp_path / "platform.py").write_text("current_platform = None\n")
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "reshape.py").write_text(STORE)
    project = Project.scan([str(p) for p in sorted(tmp_path.glob("*.py"))])
    sites = build_scenario_sites(project, [], "cuda", frozenset({86, 89, 120}))
    got = {}
    for s in sites.launches:
        if "in store_guarded()" in s.where:
            (inst,) = s.instances
            got[s.anchor.start.line] = (label_capabilities(inst.label), inst.value("TILE_SIZE").value)
    assert sorted(got.values(), key=str) == [(frozenset({120}), 4096), (frozenset({86, 89}), 256)], got
    # on targets that all take one side, the other launch is not made at all
    sites = build_scenario_sites(project, [], "cuda", frozenset({86, 89}))
    assert [(s.instances[0].value("TILE_SIZE").value, s.instances[0].label)
            for s in sites.launches if "in store_guarded()" in s.where] == [(256, "")]
