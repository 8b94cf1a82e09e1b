"""Engine sources and launches: wheels read from their zip, the engines' launchers restated, TMA
descriptors, compile failures as data. No engine code is in the repository: the wheels here are
zipped from the test fixture (a made-up release laid out as vLLM lays out its files)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tilefit import kernels
from tilefit.kernels.plan import Descriptor
from tilefit.kernels.spec import make_spec
from tilefit.smem import engine_source as es
from tilefit.pysource.extract import extract_kernel, is_file, mount_archive

FIXTURE = Path(__file__).parent / "fixtures" / "engine_kernels"


def has_triton() -> bool:
    from tilefit import versions

    return versions.installed_triton() is not None


needs_triton = pytest.mark.skipif(not has_triton(), reason="needs Triton")


def make_wheel(tmp_path: Path, name: str = "vllm-9.9.9-py3-none-any.whl") -> Path:
    """A wheel of the fixture tree, its package renamed to ``vllm``."""
    wheel = tmp_path / name
    with zipfile.ZipFile(wheel, "w") as zf:
        for f in sorted((FIXTURE / "fake_vllm").rglob("*.py")):
            rel = f.relative_to(FIXTURE / "fake_vllm")
            zf.write(f, f"vllm/{rel.as_posix()}")
        zf.writestr("vllm-9.9.9.dist-info/METADATA", "Name: vllm\nVersion: 9.9.9\n")
    return wheel


def tt(bm, bn, bk, g=1):
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=g)


def test_wheel_is_read_from_its_zip(tmp_path):
    wheel = make_wheel(tmp_path)
    tree = es.open_source(str(wheel))
    assert (tree.engine, tree.version) == ("vllm", "9.9.9") and tree.wheel_sha256
    rel = "vllm/model_executor/layers/fused_moe/fused_moe.py"
    assert tree.is_file(rel) and not (tmp_path / "vllm").exists()  # nothing unpacked
    scratch = extract_kernel(tree.path(rel), "fused_moe_kernel")
    # the helpers come along from the zip too (a relative import into utils.py)
    assert "token_rows" in scratch.functions and scratch.source.count("import torch") == 0
    assert not is_file(tree.path("vllm/no_such.py"))


def test_requirement_uses_the_wheel_cache_without_the_network(tmp_path):
    cache = tmp_path / "cache"
    folder = es.wheel_cache_dir(cache)
    folder.mkdir(parents=True)
    make_wheel(folder)
    tree = es.open_source("vllm==9.9.9", cache_dir=cache)  # found in the cache: no pip download
    assert tree.engine == "vllm" and tree.version == "9.9.9" and tree.label == "vllm==9.9.9"
    assert es.local_source("vllm", "9.9.9", cache) == str(folder / "vllm-9.9.9-py3-none-any.whl")


def test_bad_sources_are_refused_with_a_reason(tmp_path):
    with pytest.raises(es.EngineSourceError, match="no such"):
        es.open_source(str(tmp_path / "missing"))
    bad = tmp_path / "vllm-1.0-py3-none-any.whl"
    bad.write_text("not a zip")
    with pytest.raises(es.EngineSourceError, match="not a readable wheel"):
        es.open_source(str(bad))


def test_folder_identity_from_dist_info(tmp_path):
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (tmp_path / "sglang-0.5.23.dist-info").mkdir()
    tree = es.open_source(str(tmp_path))
    assert (tree.engine, tree.version) == ("sglang", "0.5.23")


def test_vllm_launch_names_the_engine_kernels_parameters():
    fam = kernels.get("fused_moe")
    spec = make_spec("fused_moe", "fp8_w8a8", tt(16, 128, 128), num_warps=4, num_stages=3, quant="block",
                     block_shape=(128, 128), swap_ab=True)
    function, args = fam.engine_launch("vllm", spec, "sm_90")
    names = [a.name for a in args]
    assert function == "fused_moe_kernel"
    assert names[:4] == ["a_ptr", "b_ptr", "c_ptr", "b_bias_ptr"]  # vLLM's positional order
    by = {a.name: a for a in args}
    assert by["SPLIT_K"].value == 1 and by["HAS_BIAS"].value is False and by["USE_TD"].value is False
    assert by["SWAP_AB"].value is True and by["naive_block_assignment"].value is False
    assert by["group_n"].value == 128 and by["stride_bbe"].value == 0


def test_sglang_tma_launch_passes_tensor_descriptors():
    fam = kernels.get("fused_moe")
    up = make_spec("fused_moe", "bf16", tt(128, 256, 64), num_warps=8, num_stages=4, extra={"tma": "b"},
                   problem={"N": 1536, "K": 2048, "E": 128, "M": 4096, "top_k": 8})
    _fn, args = fam.engine_launch("sglang", up, "sm_90")
    by = {a.name: a for a in args}
    assert by["a_desc"].kind == "none"
    assert by["b_desc"].kind == "tensordesc"
    assert by["b_desc"].value == Descriptor("bf16", (128, 1536, 2048), (1536 * 2048, 2048, 1), (1, 256, 64))
    assert by["USE_GDC"].value is True and by["even_Ks"].value is True  # sm_90: PDL
    down = up.evolve(extra=(("tma", "ab"),))
    _fn, args = fam.engine_launch("sglang", down, "sm_89")
    by = {a.name: a for a in args}
    assert by["a_desc"].kind == "tensordesc" and by["a_desc"].value.block_shape == (128, 64)
    assert "USE_GDC" not in by  # no PDL below sm_90


def test_block_gemm_launchers_choose_the_engines_functions():
    fam = kernels.get("block_gemm")
    fp8 = make_spec("block_gemm", "fp8_w8a8", tt(64, 128, 128), quant="block", block_shape=(128, 128))
    int8 = fp8.with_(dtype="int8_w8a8")
    assert fam.engine_function("vllm", fp8, "sm_89") == "_w8a8_triton_block_scaled_mm"
    assert fam.engine_function("sglang", fp8, "sm_89") == "_w8a8_block_fp8_matmul"
    assert fam.engine_function("sglang", int8, "sm_89") == "_w8a8_block_int8_matmul"
    assert not fam.engine_launches("vllm", int8, "sm_89")  # vLLM never loads its int8 tables


def test_table_variants_name_the_engine_of_record_and_usetma():
    from tilefit.families import classify
    from tilefit.variants import kernel_variants

    entry = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 8,
             "num_stages": 4, "USE_TMA": True}
    up = classify("sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_7_1/"
                  "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json")
    (v,) = kernel_variants(up, entry, "sm_90", "NVIDIA", up.engine)
    assert v.spec.engine == "sglang" and v.spec.triton == "3.7" and dict(v.spec.extra)["tma"] == "b"
    down = classify("sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_7_1/"
                    "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3_down.json")
    (v,) = kernel_variants(down, entry, "sm_90", "NVIDIA", down.engine)
    assert dict(v.spec.extra)["tma"] == "ab"
    # a table no engine claims is judged with each engine's kernel, each labelled
    anon = classify("E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json")
    vs = kernel_variants(anon, {k: entry[k] for k in entry if k != "USE_TMA"}, "sm_90", "NVIDIA", None)
    assert {v.spec.engine for v in vs} == {"vllm", "sglang"} and all("kernel" in v.label for v in vs)


@needs_triton
def test_tensor_descriptor_kernel_compiles_from_a_plan(tmp_path):
    """A kernel reading B through a host tensor descriptor compiles with the descriptor stand-in
    (Triton specialises it as ``tensordesc<bf16[1, 64, 64]>``)."""
    from tilefit.kernels.plan import LaunchPlan, const, int_, ptr, tensordesc
    from tilefit.smem.exact import compile_plan

    src = tmp_path / "tma_kernel.py"
    src.write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def tma_kernel(a_ptr, b_desc, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):\n"
        "    offs_m = tl.arange(0, BM)\n    offs_k = tl.arange(0, BK)\n"
        "    acc = tl.zeros((BM, BN), dtype=tl.float32)\n"
        "    for k in range(0, K, BK):\n"
        "        a = tl.load(a_ptr + offs_m[:, None] * K + (k + offs_k)[None, :])\n"
        "        b = b_desc.load([0, 0, k]).reshape(BN, BK).T\n"
        "        acc = tl.dot(a, b, acc)\n"
        "    offs_n = tl.arange(0, BN)\n"
        "    tl.store(c_ptr + offs_m[:, None] * BN + offs_n[None, :], acc.to(tl.bfloat16))\n")
    scratch = extract_kernel(src, "tma_kernel")
    scratch.load(tmp_path / "scratch")
    plan = LaunchPlan("fused_moe", scratch.name, "tma_kernel", (
        ptr("a_ptr", "bf16"), tensordesc("b_desc", "bf16", (8, 256, 1024), (256 * 1024, 1024, 1), (1, 64, 64)),
        ptr("c_ptr", "bf16"), int_("K", 1024), const("BM", 64), const("BN", 64), const("BK", 64)), 4, 3)
    result = compile_plan(plan, "sm_90", raise_on_error=False)
    assert result.error is None and result.shared_bytes > 0, result.error


def test_failure_rule_separates_failures_from_compiles():
    from tilefit.smem.calibrate import Path as CPath, Point
    from tilefit.smem.engine_calibrate import failure_rule

    path = CPath("fused_moe", "bf16")
    pts = []
    for bm in (128, 256):
        for bn, bk in ((64, 64), (128, 128), (64, 128), (128, 64)):
            for w in (4, 8):
                bad = bm == 256 and w == 4 and bn == bk
                pts.append(Point(path, (bm, bn, bk), w, 3, "sm_89", None if bad else 1,
                                 "compile failed (ttgir): error: operand #0 does not dominate this use" if bad else None))
    rule = failure_rule(pts)
    assert rule is not None
    from tilefit.formula import compile_formula

    f = compile_formula(rule, ("BM", "BN", "BK", "W", "S"))
    for p in pts:
        assert bool(f(BM=p.tile[0], BN=p.tile[1], BK=p.tile[2], W=p.num_warps, S=p.num_stages)) == (p.shared is None)


def test_points_round_trip_keeps_failures(tmp_path):
    from tilefit.smem.calibrate import Path as CPath, Point
    from tilefit.smem import engine_calibrate as ec

    path = CPath("fused_moe", "bf16")
    designed = [ec.Designed(Point(path, (256, 64, 64), 4, 3, "sm_89", None, "compile failed (ttgir): error: x"), "table"),
                ec.Designed(Point(path, (64, 64, 64), 4, 3, "sm_89", 49152), "grid")]
    doc = ec.dump_points(designed, kernel="fused_moe", engine="vllm", engine_version="0.33.0", triton_version="3.6.0")
    out = tmp_path / "points.json"
    ec.write_points(doc, out)
    back = ec.load_points(json.loads(out.read_text()))
    assert sorted(((d.point.tile, d.point.shared, d.point.error, d.design) for d in back), key=repr) == sorted(
        [((256, 64, 64), None, "compile failed (ttgir): error: x", "table"), ((64, 64, 64), 49152, None, "grid")],
        key=repr)
