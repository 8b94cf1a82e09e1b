"""``tilefit probe``: exact compiles of a sweep per arch, which devices fit, the MLA table, JSON,
the analytic fallback without Triton, ``--launch`` without a GPU, and ``--engine-kernels``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tilefit.smem import probe as P

HAVE_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed")
ENGINE = Path(__file__).resolve().parent / "fixtures" / "engine_kernels"


def test_parse_values_and_sweeps():
    assert P.parse_values("1..5") == [1, 2, 3, 4, 5]
    assert P.parse_values("32..256") == [32, 64, 128, 256]
    assert P.parse_values("4,8") == [4, 8]
    assert P.parse_sweep(["num_stages=2..3", "BK=64,128"]) == {"num_stages": [2, 3], "BLOCK_SIZE_K": [64, 128]}
    with pytest.raises(P.ProbeError):
        P.parse_sweep(["colour=1"])
    with pytest.raises(P.ProbeError):
        P.parse_values("5..1")


def test_build_points_mla_and_gemm():
    req = P.ProbeRequest("mla_decode", kv_dtypes=["bf16", "fp8"], sweeps={"num_stages": [1, 2]}, archs=["sm_121"])
    pts = P.build_points(req)
    assert [(p.labels["kv"], p.labels["num_stages"]) for p in pts] == [("bf16", 1), ("bf16", 2), ("fp8", 1), ("fp8", 2)]
    assert pts[0].spec.tile_dict["BLOCK_DMODEL"] == 512 and pts[2].spec.kv_dtype == "fp8"
    req = P.ProbeRequest("fused_moe", dtypes=["fp8_w8a8"], tile=[128, 256, 128], block_shape=(128, 128),
                         sweeps={"num_stages": [3]}, archs=["sm_90"])
    (p,) = P.build_points(req)
    assert p.spec.quant == "block" and p.spec.block_shape == (128, 128)
    with pytest.raises(P.ProbeError):
        P.build_points(P.ProbeRequest("mla_decode", sweeps={"BLOCK_SIZE_K": [64]}))


@needs_triton
def test_probe_fp8_sweep_exact(cli):
    res = cli("probe", "fused_moe", "--dtype", "fp8_w8a8", "--tile", "128,256,128", "--warps", "8",
              "--sweep", "num_stages=3..4", "--arch", "sm_89,sm_90")
    assert res.exit_code == 0, res.output
    assert "exact compiles" in res.output
    assert "98304" in res.output and "147456*" in res.output  # sm_89: 3 stages fit, 4 do not
    assert "196608" in res.output  # sm_90 keeps num_stages buffers
    assert "sm_89 101376 B" in res.output and "fits num_stages 3; overflows num_stages 4" in res.output
    assert "sm_90 232448 B" in res.output and "fits num_stages 3, 4" in res.output


@needs_triton
def test_probe_mla_table_json(cli):
    res = cli("probe", "mla_decode", "--kv-dtype", "bf16,fp8", "--sweep", "num_stages=1..2", "--arch", "sm_121",
              "--output-format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    got = {(p["kv_dtype"], p["num_stages"]): p["shared_bytes"] for p in doc["points"]}
    # the figures of the reference kernel's docstring (Triton 3.5.1-3.9, the same on sm_121)
    assert got == {("bf16", 1): 52224, ("bf16", 2): 89088, ("fp8", 1): 86016, ("fp8", 2): 120832}
    assert doc["estimator"] == "exact"
    gb10 = [p["fits"]["gb10"] for p in doc["points"]]
    assert gb10 == [True, True, True, False]
    assert {d["key"] for d in doc["devices"]["sm_121"]} >= {"gb10"}


def test_probe_without_triton_is_analytic_and_labelled(cli, monkeypatch):
    import tilefit.versions as versions

    monkeypatch.setattr(versions, "installed_triton", lambda: None)
    res = cli("probe", "fused_moe", "--dtype", "fp8_w8a8", "--tile", "128,256,128", "--warps", "8",
              "--sweep", "num_stages=3..4", "--arch", "sm_89", "--triton-version", "3.9")
    assert res.exit_code == 0, res.output
    assert "ANALYTIC MODEL" in res.output
    assert "Triton 3.9, ANALYTIC MODEL (Triton not installed" in res.output
    assert "147456" in res.output
    res = cli("probe", "fused_moe", "--arch", "sm_89", "--estimator", "exact")
    assert res.exit_code == 2 and "needs Triton" in res.output


def test_probe_launch_without_gpu_exits_2(cli, monkeypatch):
    monkeypatch.setattr(P, "local_gpu_arch", lambda: None)
    res = cli("probe", "fused_moe", "--arch", "sm_89", "--launch")
    assert res.exit_code == 2
    assert "--launch needs a local GPU" in res.output


def test_probe_targets_choose_archs_and_devices(cli, monkeypatch):
    import tilefit.versions as versions

    monkeypatch.setattr(versions, "installed_triton", lambda: None)
    res = cli("probe", "fused_moe", "--tile", "64,128,64", "--target", "rtx4090", "--target", "h100",
              "--triton-version", "3.9", "--output-format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc["devices"]) == {"sm_89", "sm_90"}
    assert [d["key"] for d in doc["devices"]["sm_89"]] == ["rtx4090"]


@needs_triton
def test_probe_engine_kernels_compares(cli):
    res = cli("probe", "fused_moe", "--dtype", "bf16", "--tile", "64,128,64", "--stages", "3", "--arch", "sm_89",
              "--engine-kernels", ENGINE)
    assert res.exit_code == 0, res.output
    assert "engine kernel: fused_moe_kernel in" in res.output
    assert "ours 49152, engine 81920 (+32768)" in res.output  # the fixture streams two weight tiles
    assert "HAS_BIAS=False" in res.output and "SWAP_AB" in res.output


@needs_triton
def test_check_engine_kernels(cli, tmp_path):
    table = tmp_path / "E=8,N=512,device_name=NVIDIA_GeForce_RTX_4090.json"
    table.write_text(json.dumps({"64": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64,
                                        "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 4}}))
    ours = cli("check", table, "--no-cache", "--isolated")
    assert ours.exit_code == 0, ours.output
    engine = cli("check", table, "--isolated", "--engine-kernels", ENGINE)
    assert engine.exit_code == 1, engine.output
    assert "SMEM001" in engine.output and "Required: 122880" in engine.output
    missing = cli("check", table, "--isolated", "--engine-kernels", tmp_path / "nope")
    assert missing.exit_code == 2


def test_engine_source_discovery_without_import():
    from tilefit.smem.engine_kernels import EngineKernelError, find_source

    path, fn = find_source(str(ENGINE), "fused_moe")
    assert fn == "fused_moe_kernel" and path.name == "fused_moe.py"
    assert find_source(str(ENGINE), "mla_decode") is None
    with pytest.raises(EngineKernelError):
        find_source(str(ENGINE / "nope"), "fused_moe")


def test_probe_analytic_by_choice_says_so(cli, monkeypatch):
    import tilefit.versions as versions

    monkeypatch.setattr(versions, "installed_triton", lambda: "3.6.0")
    res = cli("probe", "fused_moe", "--dtype", "fp8_w8a8", "--tile", "128,256,128", "--arch", "sm_89",
              "--estimator", "analytic")
    assert res.exit_code == 0, res.output
    assert "Triton 3.6, ANALYTIC MODEL (--estimator analytic" in res.output


# -- issue 19: options are validated (exit 2 with the reason); a failed compile exits 1 --------

@pytest.mark.parametrize("args, reason", [
    (("--arch", "sm_999"), "--arch sm_999: no arch entry for 'sm_999'"),
    (("--warps", "3"), "num_warps=3: Triton takes a power of two from 1 to 32"),
    (("--sweep", "num_warps=2,6"), "num_warps=6"),
    (("--stages", "0"), "num_stages=0: must be at least 1"),
    (("--tile", "0,0,0"), "BLOCK_SIZE_M=0 must be a power of two of at least 16"),
    (("--tile", "128,256"), "fused_moe takes BLOCK_SIZE_M,BLOCK_SIZE_N,BLOCK_SIZE_K[,GROUP_SIZE_M] (2 values given)"),
    (("--tile", "64,96,64"), "BLOCK_SIZE_N=96 must be a power of two"),
    (("--tile", "64,64,64,0"), "GROUP_SIZE_M=0 must be at least 1"),
    (("--sweep", "BLOCK_SIZE_K=8..64"), "BLOCK_SIZE_K=8"),
    (("--triton-version", "abc"), "--triton-version 'abc' is not a version"),
])
def test_probe_rejects_bad_options(cli, args, reason):
    r = cli("probe", "fused_moe", "--estimator", "analytic", *args)
    assert r.exit_code == 2, r.output
    assert reason in r.output and r.output.startswith("error: ")


@pytest.mark.parametrize("args,reason", [
    (("--kv-dtype", "int3"), "--kv-dtype 'int3': mla_decode takes bf16, fp16, fp8"),
    (("--dtype", "fp8_w8a8"), "--dtype 'fp8_w8a8': mla_decode takes bf16, fp16, fp32"),
])
def test_probe_rejects_a_dtype_the_family_does_not_take(cli, args, reason):
    """Was a compile of every point, each failing with "unknown Triton element type 'int3'" (exit 1)."""
    r = cli("probe", "mla_decode", "--estimator", "analytic", *args)
    assert r.exit_code == 2 and reason in r.output and r.output.startswith("error: "), r.output


def test_probe_device_lists_lead_with_the_targets_or_the_best_known_cards(cli):
    """Within a limit: the targets in the order given; without targets, the best-known cards first
    (was by key: "L20, L20Y, L4, L40, L40S, +5" for sm_89, "L40S, RTX 4090" for rtx4090 then l40s)."""
    r = cli("probe", "fused_moe", "--tile", "128,256,128", "--estimator", "analytic", "--target", "rtx4090",
            "--target", "l40s")
    assert "sm_89 101376 B (RTX 4090, L40S):" in r.output, r.output
    r = cli("probe", "fused_moe", "--tile", "128,256,128", "--estimator", "analytic", "--arch", "sm_89")
    assert "sm_89 101376 B (RTX 4090, " in r.output, r.output


def test_probe_mla_tile_takes_block_n_and_block_h(cli):
    r = cli("probe", "mla_decode", "--estimator", "analytic", "--tile", "32")
    assert r.exit_code == 2 and "mla_decode takes BLOCK_N,BLOCK_H (1 value given)" in r.output


@needs_triton
def test_probe_point_that_does_not_compile_exits_1_with_the_whole_reason(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    r = cli("probe", "fused_moe", "--dtype", "fp8_w8a8", "--arch", "sm_86", "--estimator", "exact")
    assert r.exit_code == 1, r.output
    # the table names the error, not Triton's "CompilationError: at 1:0:" header
    assert "sm_86 : ValueError(\"type fp8e4nv not supported in this architecture" in r.output
    assert "error: a point did not compile: CompilationError" in r.output
    assert "The supported fp8 dtypes are" in r.output


def test_probe_header_says_whose_kernel_and_names_the_quantisation_once(cli):
    """Issue 17: a user who compares probe's 120832 with vLLM's ``Required: 102400`` must see that
    the figures are our reference kernel's and how to get the engine's; "fp8_w8a8 block block
    128x128" named the quantisation twice."""
    res = cli("probe", "mla_decode", "--kv-dtype", "fp8", "--stages", "2", "--arch", "sm_121",
              "--estimator", "analytic")
    assert res.exit_code == 0, res.output
    assert "of tilefit's reference kernel (the engine's own: --engine sglang|vllm)" in res.output, res.output
    res = cli("probe", "scaled_mm", "--arch", "sm_89", "--estimator", "analytic")
    assert "of tilefit's reference kernel (the engine's own: --engine sglang)" in res.output, res.output
    res = cli("probe", "mla_decode", "--kv-dtype", "fp8", "--stages", "2", "--arch", "sm_121", "--engine", "vllm")
    assert "reference kernel" not in res.output.splitlines()[1], res.output
    res = cli("probe", "fused_moe", "--dtype", "fp8_w8a8", "--block-shape", "128,128", "--tile", "16,128,256",
              "--arch", "sm_89", "--estimator", "analytic")
    assert res.output.startswith("fused_moe fp8_w8a8 block 128x128, BLOCK 16x128x256"), res.output
    res = cli("probe", "fused_moe_wna16", "--arch", "sm_89", "--estimator", "analytic")
    assert res.output.startswith("fused_moe_wna16 int4_w4a16 group 128, BLOCK"), res.output
    res = cli("probe", "scaled_mm", "--arch", "sm_89", "--estimator", "analytic")
    assert res.output.startswith("scaled_mm fp8_w8a8 per_channel, BLOCK"), res.output
