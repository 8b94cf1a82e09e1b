"""The fix planner's shared-memory need per target arch (``FixPlanner.need``), on a real table.

Its memo once keyed answers by arch *family* (sm_80, sm_86, sm_89 and sm_120 share mma_v2's
forms), so the first arch asked answered for all: on SGLang's int8 block GEMM table for the
A100, sm_80's figure (uncalibrated, counted at its upper error bound) came back for sm_89, where
the engine calibration gives the exact bytes, and the fix titles said 83456 where the RTX 4090
needs 82944.
"""

from __future__ import annotations

import pytest

from tilefit.api import CheckOptions
from tilefit.app import run_check
from tilefit.fix import make_planner
from tilefit.variants import kernel_variants

TABLE = ("sglang-0.5.23/sglang/kernels/ops/gemm/configs/"
         "N=1536,K=1536,device_name=NVIDIA_A100-SXM4-80GB,dtype=int8_w8a8,block_shape=[128, 128].json")


def _worst(engine, meta, entry, arch, vendor="NVIDIA"):
    """The estimator's own answer, uncalibrated forms at their upper bound (as the planner counts)."""
    worst = None
    for v in kernel_variants(meta, entry, arch, vendor, meta.engine):
        est = engine.estimator.estimate(v.spec, arch)
        need = est.shared_bytes + ((est.max_error or 0) if est.status == "uncalibrated" else 0)
        worst = need if worst is None else max(worst, need)
    return worst


@pytest.fixture(scope="module")
def checked(corpus):
    path = str(corpus / TABLE)
    result = run_check([path], CheckOptions(targets=["consumer"], estimator="analytic", use_cache=False))
    return result.tables[path], result.engine


def test_need_is_each_arch_own_figure_whatever_arch_was_asked_first(checked):
    table, engine = checked
    entry = dict(table.value["2048"], num_stages=3)
    by_arch = {arch: _worst(engine, table.meta, entry, arch) for arch in ("sm_80", "sm_89", "sm_120")}
    # the premise: the A100's own arch is uncalibrated (bound added), the consumer archs are exact
    assert by_arch["sm_80"] > by_arch["sm_89"]
    for order in (("sm_80", "sm_89", "sm_120"), ("sm_89", "sm_120", "sm_80")):
        planner = make_planner(engine)
        got = {arch: planner.need(table.meta, entry, arch, "NVIDIA") for arch in order}
        assert got == by_arch, order
        # a second ask is answered from the memo, with the same figure
        assert {arch: planner.need(table.meta, entry, arch, "NVIDIA") for arch in order} == by_arch


def test_fix_titles_quote_the_target_arch_own_bytes(checked, corpus):
    from tilefit.api import CheckOptions as Opts

    path = str(corpus / TABLE)
    result = run_check([path], Opts(targets=["rtx4090"], estimator="analytic", use_cache=False, fix=True))
    fixed = [d for d in result.diagnostics if d.fix is not None and d.target == "rtx4090"]
    assert fixed
    table, engine = checked
    for d in fixed:
        key = d.pointer.split("/")[1]
        chosen = d.fix.expected[f"/{key}"]
        assert f"({_worst(engine, table.meta, chosen, 'sm_89')} of 101376 bytes on sm_89)" in d.fix.title


# One table of each kind the planner searches with GROUP_SIZE_M: vLLM's fused MoE (int8_w8a16
# feeds two kernels, one the wNa16 kernel), SGLang's with USE_TMA, a ROCm table, block GEMMs.
GROUPED_TABLES = (
    "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/E=1,N=1792,device_name=NVIDIA_H100_80GB_HBM3,"
    "dtype=int8_w8a16.json",
    "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/E=128,N=1024,device_name=AMD_Instinct_MI300X,"
    "dtype=fp8_w8a8.json",
    "sglang-0.5.23/sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_7_1/E=256,N=512,"
    "device_name=NVIDIA_H200_down.json",
    "vllm-0.33.0/vllm/model_executor/layers/quantization/utils/configs/N=10240,K=5120,device_name=NVIDIA_L40S,"
    "dtype=fp8_w8a8,block_shape=[128,128].json",
    TABLE,
)


def test_the_bytes_do_not_depend_on_group_size_m(corpus):
    """The planner's shared-memory memo drops GROUP_SIZE_M's value (``smem_key``): on every entry
    of these tables, on the file's arch and the consumer archs, every in-domain GROUP_SIZE_M gives
    the estimator's figure of the entry's own; an out-of-domain one gives none, even after an
    in-domain one was asked."""
    from tilefit.fix.planner import smem_key

    paths = [str(corpus / t) for t in GROUPED_TABLES]
    result = run_check(paths, CheckOptions(targets=["rtx4090", "rtx5090", "rtx3090"], estimator="analytic",
                                           use_cache=False))
    engine = result.engine
    checked = 0
    for path in paths:
        table = result.tables[path]
        vendor = "AMD" if "AMD" in path else "NVIDIA"
        archs = ("gfx942",) if vendor == "AMD" else ("sm_80", "sm_86", "sm_89", "sm_90", "sm_120")
        for arch in archs:
            planner = make_planner(engine)
            for _key, entry in table.entries():
                own = _worst(engine, table.meta, entry, arch, vendor)
                for g in (1, 7, 64, 2**31 - 1):
                    other = dict(entry, GROUP_SIZE_M=g)
                    assert smem_key(table.meta.family, other) == smem_key(table.meta.family, entry)
                    assert _worst(engine, table.meta, other, arch, vendor) == own, (path, arch, entry, g)
                    assert planner.need(table.meta, other, arch, vendor) == own
                    checked += 1
                for g in (0, 2**31):
                    bad = dict(entry, GROUP_SIZE_M=g)
                    assert _worst(engine, table.meta, bad, arch, vendor) is None
                    assert planner.need(table.meta, bad, arch, vendor) is None
    assert checked > 1000


def test_a_table_plans_the_same_after_a_twin_of_another_triton_folder(corpus):
    """The planner's predictions were memoised per (shape, device, config), and a prediction
    reads the config's shared memory: SGLang's triton_3_2_0 and triton_3_7_1 tables of one
    shape need different bytes, so the 3.7.1 table planned after its 3.2.0 twin ranked with the
    twin's figures (two entries got other fixes than when checked alone)."""
    folder = "sglang-0.5.23/sglang/srt/layers/moe/moe_runner/triton_utils/configs/"
    late = str(corpus / folder / "triton_3_7_1" / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json")
    early = str(corpus / folder / "triton_3_2_0" / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json")

    def fixes(paths):
        result = run_check(paths, CheckOptions(targets=["consumer"], estimator="analytic", use_cache=False, fix=True))
        return [(d.pointer, d.fix.title) for d in result.diagnostics if d.path == late and d.fix is not None]

    alone = fixes([late])
    assert len(alone) > 5
    assert fixes([early, late]) == alone


def test_a_config_the_engines_kernel_cannot_compile_is_never_a_candidate(tmp_path):
    """Issue 17 item 3: vLLM 0.33.0's ``fused_moe_kernel``, bf16, 256x64x64 w4 s3 on sm_89 does
    not compile under Triton 3.6 (81920 B, it would fit the RTX 4090): the planner counts it as
    no candidate there, and as one under 3.9, where it compiles."""
    from tilefit.fix.planner import COMPILE_FAILS

    folder = tmp_path / "vllm" / "model_executor" / "layers" / "fused_moe" / "configs"
    folder.mkdir(parents=True)
    path = folder / "E=8,N=14336,device_name=NVIDIA_GeForce_RTX_4090.json"
    entry = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4,
             "num_stages": 3}
    path.write_text('{"256": %s}' % str(entry).replace("'", '"'))
    needs = {}
    for triton in ("3.6", "3.9"):
        result = run_check([str(path)], CheckOptions(estimator="analytic", use_cache=False, triton_version=triton))
        table = result.tables[str(path)]
        assert table.meta.engine == "vllm"
        needs[triton] = make_planner(result.engine).need(table.meta, entry, "sm_89", "NVIDIA")
        assert [d.code for d in result.diagnostics] == (["CMP001"] if triton == "3.6" else []), result.diagnostics
    assert needs == {"3.6": COMPILE_FAILS, "3.9": 81920}


def test_the_search_estimator_reads_the_checks_engine_model_where_the_release_is_the_same():
    """``Estimator.analytic_twin`` (the planner's search estimator under ``auto``) shares the
    check's engine model, whose answers depend on the Triton release alone, and only where the
    check reads the installed release: one under another release keeps its own."""
    from tilefit.estimate import Estimator

    est = Estimator("auto")
    twin = est.analytic_twin()
    assert twin.mode == "analytic" and twin.model is est.model
    assert twin.engine_model is est.engine_model
    pinned = Estimator("auto", model=est.model, triton_version="0.0.1")
    other = pinned.analytic_twin()
    assert other.engine_model is not pinned.engine_model
    assert other.engine_model.triton == est.engine_model.triton != pinned.engine_model.triton
