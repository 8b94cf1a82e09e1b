"""sm_110's int8_w8a8 fused MoE under Triton 3.9 (issue 17, items 2/5): an mma.sync dot on a tcgen05 arch.

The TTGIR of SGLang's and vLLM's kernels on sm_110 shows an ``#ttg.nvidia_mma`` (version 2)
accumulator for the int8 x int8 dot, where bf16 and fp8 take tcgen05: the epilogue converts the
mma.sync layout, whose scratch is sm_120's epilogue table (the model's ``epilogue.path_arch``),
not sm_100's. These tests hold the model to the engines' stored compiles on sm_110.
"""

from __future__ import annotations

import pytest

from tilefit.kernels import make_spec
from tilefit.smem import calibrate as cal
from tilefit.smem import engine_calibrate as ec
from tilefit.smem.analytic import load_model
from tilefit.smem.engine_model import EngineModel

ENGINES = (("sglang", "0.5.23"), ("vllm", "0.33.0"))


def _spec(dtype, quant, tile, w, s):
    bm, bn, bk = tile
    return make_spec("fused_moe", dtype, {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk,
                                          "GROUP_SIZE_M": 1}, num_warps=w, num_stages=s, quant=quant)


def test_the_int8_epilogue_on_sm110_is_read_from_sm120s_table_and_the_others_from_sm100s():
    model = load_model("3.9")
    int8 = _spec("int8_w8a8", "per_tensor", (256, 128, 32), 4, 2)
    bf16 = _spec("bf16", "none", (256, 128, 32), 4, 2)
    assert model.variables(int8, "tcgen05", "sm_110")["E"] == model.variables(int8, "mma_v2", "sm_120")["E"]
    assert model.variables(int8, "tcgen05", "sm_110")["E"] != model.variables(int8, "tcgen05", "sm_100")["E"]
    assert model.variables(bf16, "tcgen05", "sm_110")["E"] == model.variables(bf16, "tcgen05", "sm_100")["E"]


@pytest.mark.parametrize("engine,version", ENGINES)
def test_every_compiled_sm110_int8_point_is_answered_by_a_proven_form_with_its_bytes(engine, version):
    """Every point the calibration compiled for sm_110 int8_w8a8 (held-out, fit, the witnesses of
    the one-stage B operand kept in registers) gets the engine's bytes from the form, and the
    form is proven there on held-out points."""
    model = EngineModel("3.9")
    pts = [d for d in ec.load_points(ec.points_path("fused_moe", engine, version, "3.9"))
           if d.point.arch == "sm_110" and cal.form_dtype(d.point.path) == "int8_w8a8" and d.point.shared]
    assert len({d.point.path.name for d in pts}) == 3  # per-tensor, per-channel, block
    assert sum(d.design in ("table", "grid") for d in pts) >= 20
    for d in pts:
        p = d.point
        ans = model.answer(p.spec().with_(engine=engine, triton="3.9"), "sm_110", forms_only=True)
        assert ans is not None and ans.shared_bytes == p.shared, (p, ans)
        assert ans.proven and "form proven exact on" in ans.detail, ans.detail


@pytest.mark.parametrize("engine,version", ENGINES)
def test_one_stage_b_in_registers_is_stored_as_a_witness(engine, version):
    """16x32x32 at 4 warps, one stage: B (32x32 int8, one mma k-step, 8 columns per warp) reaches
    the dot operand layout without shared memory, 1024 B (the epilogue), where counting its
    buffer says 1536."""
    pts = {(d.point.path.name, d.point.tile, d.point.num_warps, d.point.num_stages): d.point.shared
           for d in ec.load_points(ec.points_path("fused_moe", engine, version, "3.9")) if d.point.arch == "sm_110"}
    assert pts[("fused_moe/int8_w8a8/per_tensor", (16, 32, 32), 4, 1)] == 1024
