"""A launch keyword that names a kernel parameter is an argument (issue 18.4): Triton binds
``kernel[grid](..., launch_pdl=x)`` to the kernel's own ``launch_pdl: tl.constexpr`` when it
declares one (the generated binder takes the kernel's parameters first, the rest as options), so
the value is the constexpr's; only for a kernel without that parameter is it the PDL launch
option. vLLM 0.33.0's ``router/dsv4_topk.py`` launches a kernel of the first kind; it was
reported as "launch_pdl not passed at the launch". The fixture is our own code in that shape."""

from __future__ import annotations

from tilefit.callsites.evaluate import CallsiteEvaluator, Outcome, launch_cases
from tilefit.callsites.project import Project
from tilefit.callsites.sites import build_sites

SOURCE = '''import triton
import triton.language as tl


@triton.jit
def topk_kernel(x_ptr, out_ptr, BLOCK_N: tl.constexpr, launch_pdl: tl.constexpr):
    offs = tl.arange(0, BLOCK_N)
    v = tl.load(x_ptr + offs)
    if launch_pdl:
        tl.extra.cuda.gdc_launch_dependents()
    tl.store(out_ptr + offs, v)


@triton.jit
def copy_kernel(x_ptr, out_ptr, BLOCK_N: tl.constexpr):
    offs = tl.arange(0, BLOCK_N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def topk(x, out, pdl: bool = False):
    topk_kernel[(1,)](x, out, BLOCK_N=256, num_warps=1, launch_pdl=pdl)


def copy(x, out):
    copy_kernel[(1,)](x, out, BLOCK_N=256, num_warps=4, launch_pdl=True)
'''


def _sites(tmp_path):
    path = tmp_path / "router_topk.py"
    path.write_text(SOURCE)
    project = Project.scan([str(path)])
    return project, {s.kernel.name: s for s in build_sites(project).launches}


def test_a_keyword_the_kernel_declares_is_its_argument(tmp_path):
    project, sites = _sites(tmp_path)
    (inst,) = sites["topk_kernel"].instances
    assert "launch_pdl" in inst.args and "launch_pdl" not in inst.options
    assert inst.value("launch_pdl").value is False  # the launcher's default, not an option
    ev = CallsiteEvaluator(project, kernels={}, mode="exact", allow_import=False, estimator=None, triton=False)
    (case,) = launch_cases(sites["topk_kernel"])
    assert case.value("launch_pdl") is False
    for variant in ev.variants(case.kernel):
        planned = ev.plan(case, variant, "sm_90")
        assert not isinstance(planned, Outcome), planned.detail
        args, num_warps, _, options = planned
        assert [a.value for a in args if a.name == "launch_pdl"] == [False] and num_warps == 1
        assert "launch_pdl" not in dict(options)


def test_the_keyword_stays_an_option_for_a_kernel_without_that_parameter(tmp_path):
    _, sites = _sites(tmp_path)
    (inst,) = sites["copy_kernel"].instances
    assert "launch_pdl" in inst.options and "launch_pdl" not in inst.args
    assert inst.value("launch_pdl").value is True
