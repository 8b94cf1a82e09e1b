"""Exact estimator: ahead-of-time compiles of our reference kernels reproduce measured figures.

Each compile takes ~0.1-0.3 s (stopped at the shared-memory allocation); the file runs ~15.
The facts were measured with Triton 3.9 on this machine and match 3.5.1/3.6/3.7.1/3.8 as well.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tilefit.kernels.spec import make_spec

HAVE_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed")


def moe(dtype, bm, bn, bk, warps, stages, quant="none", **kw):
    tile = dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=1)
    return make_spec("fused_moe", dtype, tile, num_warps=warps, num_stages=stages, quant=quant,
                     problem=dict(N=1536, K=2048, top_k=8), **kw)


FP8_BIG = moe("fp8_w8a8", 128, 256, 128, 8, 4, "per_tensor")

FACTS = [
    # the SGLang fp8 prefill default that crashes 99 KiB GPUs: (S-1)*(BM+BN)*BK on mma.sync
    pytest.param(FP8_BIG, "sm_89", 147456, id="fp8-128x256x128-s4-sm89"),
    pytest.param(FP8_BIG, "sm_120", 147456, id="fp8-128x256x128-s4-sm120"),
    # wgmma: S buffers
    pytest.param(FP8_BIG, "sm_90", 196608, id="fp8-128x256x128-s4-sm90"),
    pytest.param(FP8_BIG.with_(num_stages=3), "sm_89", 98304, id="fp8-128x256x128-s3-sm89"),
    pytest.param(moe("fp16", 64, 128, 128, 4, 4), "sm_89", 147456, id="fp16-64x128x128-s4-sm89"),
    # the epilogue's layout-conversion scratch dominates
    pytest.param(moe("bf16", 256, 128, 64, 8, 2), "sm_89", 65536, id="bf16-256x128x64-s2-sm89"),
]


@needs_triton
@pytest.mark.parametrize("spec,arch,expected", FACTS)
def test_measured_facts(spec, arch, expected):
    from tilefit.smem.exact import exact_shared_bytes

    assert exact_shared_bytes(spec, arch) == expected


@needs_triton
def test_num_stages_matters():
    """Proves the launch specialisation: without the alignment facts the pipeliner does nothing."""
    from tilefit.smem.exact import exact_shared_bytes

    s4 = exact_shared_bytes(moe("fp16", 64, 128, 128, 4, 4), "sm_89")
    s2 = exact_shared_bytes(moe("fp16", 64, 128, 128, 4, 2), "sm_89")
    assert (s4, s2) == (147456, 49152)


@needs_triton
def test_early_stop_agrees_with_llir_stage():
    from tilefit.smem.exact import compile_spec

    spec = FP8_BIG.with_(num_stages=3)
    alloc = compile_spec(spec, "sm_89", stop="alloc")
    llir = compile_spec(spec, "sm_89", stop="llir")
    assert alloc.stage == "alloc" and llir.stage == "llir"
    assert alloc.shared_bytes == llir.shared_bytes == 98304
    assert alloc.threads == 256


@needs_triton
def test_compile_failure_is_typed():
    from tilefit.smem.exact import CompileFailed, compile_spec, exact_shared_bytes

    spec = FP8_BIG.with_(num_stages=3)
    with pytest.raises(CompileFailed) as info:
        exact_shared_bytes(spec, "sm_80")  # no fp8e4nv on Ampere
    assert "fp8e4nv" in info.value.message and info.value.arch == "sm_80"
    result = compile_spec(spec, "sm_80", raise_on_error=False)
    assert result.shared_bytes is None and not result.ok and "fp8e4nv" in result.error
    with pytest.raises(CompileFailed) as info:
        exact_shared_bytes(moe("bf16", 64, 64, 32, 3, 2), "sm_89")
    assert info.value.stage == "options" and "power of 2" in info.value.message


@needs_triton
def test_mla_decode_v100_matches_reported_compiler_figures():
    """1Cat-vLLM PR#211: 4 B * (BLOCK_H*(512+64) + BLOCK_N*512) on sm_70, num_stages no effect."""
    from tilefit.smem.exact import exact_shared_bytes

    def mla(block_n):
        return make_spec("mla_decode", "fp16", dict(BLOCK_N=block_n, BLOCK_H=16), num_warps=4, num_stages=2,
                         kv_dtype="fp16", problem=dict(num_heads=16, Lk=576, Lv=512))

    assert exact_shared_bytes(mla(32), "sm_70") == 102400
    assert exact_shared_bytes(mla(16), "sm_70") == 69632


@needs_triton
def test_amd_cross_compile():
    from tilefit.smem.exact import compile_spec

    result = compile_spec(moe("fp16", 64, 128, 64, 4, 2), "gfx942")
    assert result.shared_bytes == 24576 and result.threads == 4 * 64


def test_parse_arch():
    from tilefit.smem.exact import UnsupportedArch, parse_arch

    assert parse_arch("sm_89") == ("cuda", 89, 32)
    assert parse_arch("sm_90a") == ("cuda", 90, 32)
    assert parse_arch("sm_121") == ("cuda", 121, 32)
    assert parse_arch("gfx942") == ("hip", "gfx942", 64)
    assert parse_arch("gfx1201") == ("hip", "gfx1201", 32)
    with pytest.raises(UnsupportedArch):
        parse_arch("tpu_v5")


def test_launch_plan_is_engine_like():
    from tilefit.kernels import launch_plan

    plan = launch_plan(moe("fp8_w8a8", 64, 128, 128, 4, 3, "block", block_shape=(128, 128)))
    args = plan.arg_dict()
    assert args["a_ptr"].value == "fp8e4nv" and args["c_ptr"].value == "bf16"
    assert args["stride_ak"].value == 1 and args["stride_bk"].value == 1  # become constexpr 1
    assert args["group_n"].kind == "constexpr" and args["group_n"].value == 128
    assert args["stride_asm"].value == 2048 // 128 and args["stride_bsn"].value == 2048 // 128
    plan = launch_plan(moe("int8_w8a16", 64, 128, 64, 4, 3))
    assert plan.arg("a_scale_ptr").kind == "none"
    with pytest.raises(ValueError):
        launch_plan(moe("int4_w4a16", 64, 128, 64, 4, 3))


def test_light_modules_do_not_import_triton_or_torch():
    code = (
        "import sys\n"
        "import tilefit.kernels.plan, tilefit.smem.cache, tilefit.smem.exact, tilefit.kernels\n"
        "import tilefit.kernels.checks, tilefit.kernels.interpret\n"
        "from tilefit.kernels import launch_plan\n"
        "from tilefit.kernels.spec import make_spec\n"
        "launch_plan(make_spec('fused_moe', 'fp16', {'BLOCK_SIZE_M': 64, 'BLOCK_SIZE_N': 64, 'BLOCK_SIZE_K': 32}))\n"
        "bad = [m for m in ('triton', 'torch') if m in sys.modules]\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_engine_launch_policies():
    from tilefit.serving.launch import clamp_block_k as vllm_block_k, swap_ab_applies as engine_swaps_ab

    assert engine_swaps_ab("fp8_w8a8", "sm_90a", 16, 128)
    assert not engine_swaps_ab("fp8_w8a8", "sm_89", 16, 128)
    assert not engine_swaps_ab("fp8_w8a8", "sm_90", 64, 128)
    assert not engine_swaps_ab("bf16", "sm_90", 16, 128)
    assert vllm_block_k(256, (128, 128)) == 128 and vllm_block_k(64, (128, 128)) == 64
    assert vllm_block_k(128, None) == 128


def test_descriptor_stand_ins_keep_their_element_type_across_launches():
    """Triton's launch specialiser caches a tensor's dtype string by the dtype object's identity
    (hash or address): stand-in dtypes made afresh per descriptor were freed and their address
    reused by the next one, so an fp16 descriptor after a bf16 one was specialised as bf16 (seen
    as a stored fp8 TMA figure with a bf16 A tile). Every descriptor keeps its own type."""
    pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    from triton.tools.tensor_descriptor import TensorDescriptor

    from tilefit.kernels.plan import tensordesc
    from tilefit.smem import exact

    backend = make_backend(GPUTarget("cuda", 90, 32))
    specialize = exact._specialize_fn()
    order = ("bf16", "fp8e4nv", "bf16", "fp16", "fp8e4nv", "fp16", "fp32", "bf16", "fp16")
    for ty in order:  # the stand-in base as a launch plan's descriptor argument makes it
        desc = exact._arg_value(tensordesc("a_desc", ty, (128, 64), (64, 1), (64, 64)))
        assert specialize(backend, desc, False, True, True)[0] == f"tensordesc<{ty}[64, 64]>", ty
        del desc
    for ty in order:  # one made and dropped right before the next (the freed address is reused at once)
        got = specialize(backend, TensorDescriptor(exact._Tensor(ty), [128, 64], [64, 1], [64, 64]),
                         False, True, True)[0]
        assert got == f"tensordesc<{ty}[64, 64]>", (ty, got)
