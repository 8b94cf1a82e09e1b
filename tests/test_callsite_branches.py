"""Too many branches (issue 18.4): a quantised MoE launcher passes a dozen run-time arguments of
the form ``A_scale.stride(0) if A_scale is not None and A_scale.ndim == 2 else 0`` (vLLM 0.33.0's
``invoke_fused_moe_triton_kernel``), each a branch, beside the constexprs that decide the compile
(``naive_block_assignment=(sorted_token_ids is None)``, a ``compute_type`` chosen from the
activation dtype). Their product passes the instance limit; the constexprs' and options'
combinations alone do not, so those are enumerated and the run-time arguments judged as plain
integers (as they were when every branch was dropped). The fixture is our own code in that shape."""

from __future__ import annotations

from tilefit.callsites.project import Project
from tilefit.callsites.sites import MAX_DECIDING, MAX_INSTANCES, build_sites
from tilefit.callsites.values import Arms, Lit, Ref, Unknown

KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def moe_gemm(a_ptr, c_ptr, sorted_ptr, stride_asm, stride_ask, stride_bse, stride_bsk, stride_bsn, stride_bias,
             naive_block_assignment: tl.constexpr, compute_type: tl.constexpr, {extra}BLOCK_SIZE_K: tl.constexpr):
    offs = tl.arange(0, BLOCK_SIZE_K)
    tl.store(c_ptr + offs, tl.load(a_ptr + offs).to(compute_type))


def invoke(A, C, A_scale, B_scale, B_bias, sorted_token_ids{params}):
    if A.dtype == torch.bfloat16:
        compute_type = tl.bfloat16
    elif A.dtype == torch.float16:
        compute_type = tl.float16
    else:
        compute_type = tl.float32
    moe_gemm[(1,)](
        A, C, sorted_token_ids,
        A_scale.stride(0) if A_scale is not None and A_scale.ndim == 2 else 0,
        A_scale.stride(1) if A_scale is not None and A_scale.ndim == 2 else 0,
        B_scale.stride(0) if B_scale is not None else 0,
        B_scale.stride(2) if B_scale is not None and B_scale.ndim == 3 else 0,
        B_scale.stride(1) if B_scale is not None and B_scale.ndim >= 2 else 0,
        B_bias.stride(0) if B_bias is not None else 0,
        naive_block_assignment=(sorted_token_ids is None),
        compute_type=compute_type,{kwargs}
        BLOCK_SIZE_K=64,
    )
'''


def _site(tmp_path, extra="", params="", kwargs=""):
    path = tmp_path / "moe_launch.py"
    path.write_text(KERNEL.format(extra=extra, params=params, kwargs=kwargs))
    (site,) = build_sites(Project.scan([str(path)])).launches
    return site


def test_the_deciding_values_are_enumerated_beside_run_time_argument_branches(tmp_path):
    site = _site(tmp_path)
    got = set()
    for inst in site.instances:
        naive, ct = inst.args["naive_block_assignment"], inst.args["compute_type"]
        assert isinstance(naive, Lit) and isinstance(ct, Ref), (inst.label, naive, ct)
        got.add((naive.value, ct.target.rsplit(".", 1)[-1]))
        for name in ("stride_asm", "stride_bse", "stride_bias"):  # not enumerated: a run-time integer
            assert isinstance(inst.args[name], Unknown) and not isinstance(inst.args[name], Arms)
    assert got == {(n, t) for n in (True, False) for t in ("bfloat16", "float16", "float32")}
    assert len(site.instances) == 6
    assert any("those of run-time arguments not enumerated" in p for p in site.problems), site.problems


def test_too_many_deciding_combinations_still_give_up(tmp_path):
    extra = "".join(f"F{i}: tl.constexpr, " for i in range(4))
    params = "".join(f", f{i}" for i in range(4))
    kwargs = "".join(f"\n        F{i}=1 if f{i} else 2," for i in range(4))
    site = _site(tmp_path, extra, params, kwargs)  # 2 * 3 * 2**4 = 96 deciding combinations
    assert 2 * 3 * 2 ** 4 > MAX_DECIDING
    (inst,) = site.instances
    assert isinstance(inst.args["F0"], Unknown) and "too many branches" in inst.args["F0"].reason
    assert isinstance(inst.args["compute_type"], Unknown)
    assert f"more than {MAX_INSTANCES} combinations of branches" in site.problems


def test_deciding_combinations_up_to_twice_the_limit_are_enumerated(tmp_path):
    """Six MoE configs times four compute types (vLLM's batched experts under fp8 activations):
    24 deciding combinations, more than MAX_INSTANCES and within MAX_DECIDING."""
    extra = "F0: tl.constexpr, F1: tl.constexpr, "
    params = ", f0, f1"
    kwargs = "\n        F0=1 if f0 else 2,\n        F1=1 if f1 else 2,"
    site = _site(tmp_path, extra, params, kwargs)  # 2 * 3 * 2 * 2 = 24
    assert MAX_INSTANCES < 24 <= MAX_DECIDING
    assert len(site.instances) == 24
    assert all(isinstance(i.args["F1"], Lit) and isinstance(i.args["compute_type"], Ref) for i in site.instances)
