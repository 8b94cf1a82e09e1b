"""Arch classes (tilefit.smem.archclass): archs that compile alike up to the allocation.

The classes are checked against the compute-capability reads listed with them, and, on the
Triton release they were derived for, compiled: a sample of launches (our fixture GEMM, a
pipelined dot, a compile that fails) on every arch of each class gives the same bytes and the
same failures, while the archs a read splits (sm_110 with sm_120; sm_86 with sm_89 for fp8) do
not. About 20 compiles (in a child each); skipped without Triton or on another release.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefit.smem import archclass

FIXTURES = Path(__file__).parent / "fixtures" / "callsites" / "engine"


def _release():
    (release,) = [r for r in archclass._releases() if "3.9.0" in r["triton"]]
    return release


def test_shipped_classes_follow_from_their_reads():
    release = _release()
    archclass.check_classes(release)  # what loading does
    assert {tuple(c["archs"]) for c in release["classes"]} == {("sm_120", "sm_121"), ("sm_86", "sm_87", "sm_89")}
    # the reads split what the cold-cache census had found alike (sm_110 = sm_120 on 299 of 299)
    with pytest.raises(ValueError, match=r"sm_110.*sm_120.*is split by"):
        archclass.check_classes({**release, "classes": [{"archs": ["sm_110", "sm_120"], "when": "always"}]})
    with pytest.raises(ValueError, match="cc >= 89"):
        archclass.check_classes({**release, "classes": [{"archs": ["sm_86", "sm_89"], "when": "always"}]})
    with pytest.raises(ValueError, match="two classes"):
        archclass.check_classes({**release, "classes": [{"archs": ["sm_86", "sm_87"], "when": "no_fp8"},
                                                        {"archs": ["sm_87", "sm_89"], "when": "no_fp8"}]})


def test_predicates_and_where_a_class_applies(monkeypatch):
    assert archclass.predicate("cc // 10 in (8, 9)")(89) and not archclass.predicate("cc // 10 in (8, 9)")(100)
    assert archclass.predicate("cc < 120")(110) and not archclass.predicate("cc < 120")(121)
    with pytest.raises(ValueError):
        archclass.predicate("cc >= __import__('os')")
    key = '["k", [["a", "ptr", "bf16"]], 4, 3, []]'
    assert archclass.compile_arch("sm_121", "3.9.0", key, "tl.dot(a, b)") == "sm_120"
    assert archclass.compile_arch("sm_89", "3.9.0", key, "tl.dot(a, b)") == "sm_86"
    assert archclass.compile_arch("sm_89", "3.9.0", key.replace("bf16", "fp8e5"), "x") == "sm_89"
    assert archclass.compile_arch("sm_89", "3.9.0", key, "x.to(tl.float8e4nv)") == "sm_89"
    assert archclass.compile_arch("sm_121", "3.9.0", key, None) == "sm_121"  # an imported module: text unknown
    assert archclass.compile_arch("sm_110", "3.9.0", key, "x") == "sm_110"
    assert archclass.compile_arch("sm_121", "3.8.0", key, "x") == "sm_121"  # not derived for 3.8
    monkeypatch.setenv("TILEFIT_ARCH_CLASSES", "0")
    assert archclass.compile_arch("sm_121", "3.9.0", key, "x") == "sm_121"


@pytest.fixture
def evaluator(tmp_path, monkeypatch):
    triton = pytest.importorskip("triton")
    if triton.__version__ not in _release()["triton"]:
        pytest.skip(f"the classes were derived for {_release()['triton']}, not Triton {triton.__version__}")
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    from tilefit.callsites.evaluate import CallsiteEvaluator
    from tilefit.callsites.project import Project

    def make(paths, kernels):
        return CallsiteEvaluator(Project.scan([str(p) for p in paths]), kernels=kernels)

    return make


def test_every_arch_of_a_class_compiles_alike(evaluator, monkeypatch):
    from tilefit.callsites.evaluate import CompileJob, config_cases, launch_cases
    from tilefit.callsites.sites import build_sites
    from tilefit.device_db import load_database

    db = load_database()
    gemm = FIXTURES / "ops" / "gemm.py"
    mla = sorted((FIXTURES / "attention").glob("*.py"))
    samples = []
    ev = evaluator([gemm], {"engine.ops.gemm:matmul_kernel": {"a_ptr,b_ptr": ["bf16"]}})
    site = next(s for s in build_sites(ev.project).autotunes if s.kernel.name == "matmul_kernel")
    for config in site.configs[:1]:  # 147456 B on sm_89: 3 buffered stages of a pipelined dot
        samples += [(ev, case) for case in config_cases(site, config)]
    bad = evaluator([gemm], {"engine.ops.gemm:matmul_kernel": {"a_ptr": ["fp16"], "b_ptr": ["bf16"]}})
    site = next(s for s in build_sites(bad.project).autotunes if s.kernel.name == "matmul_kernel")
    samples += [(bad, case) for case in config_cases(site, site.configs[1])]  # fails: mixed dtypes
    mev = evaluator(mla, {"engine.attention.mla_decode:_mla_grouped_stage1": {
        "kv_cache": ["bf16", "fp8e4nv"], "Att_Out": ["fp32"], "kv_group_num": [16], "q_head_num": [16],
        "NUM_KV_SPLITS": [4]}})
    (launch,) = build_sites(mev.project).launches
    samples += [(mev, case) for case in launch_cases(launch)]

    monkeypatch.setenv("TILEFIT_ARCH_CLASSES", "0")  # compile every arch on its own
    seen = {"ok": 0, "failed": 0, "fp8 kept apart": 0}
    for cls in _release()["classes"]:
        for ev_, case in samples:
            for variant in ev_.variants(case.kernel):
                per_arch = {}
                for arch in cls["archs"]:
                    job = ev_.job(case, variant, db.get(arch))
                    if not isinstance(job, CompileJob):
                        per_arch[arch] = job.status
                        continue
                    text = job.src.scratch.source
                    monkeypatch.delenv("TILEFIT_ARCH_CLASSES")
                    merged = archclass.compile_arch(arch, "3.9.0", job.key, text)
                    monkeypatch.setenv("TILEFIT_ARCH_CLASSES", "0")
                    if merged == arch and arch != cls["archs"][0]:
                        seen["fp8 kept apart"] += 1  # not merged: nothing to compare
                        continue
                    out = ev_.run(case, variant, db.get(arch))
                    per_arch[arch] = (out.status, out.shared, out.detail)
                    seen[out.status] = seen.get(out.status, 0) + 1
                compared = {v for a, v in per_arch.items() if not isinstance(v, str)}
                assert len(compared) <= 1, (cls["archs"], case.label, variant.label, per_arch)
    assert seen["ok"] >= 8 and seen["failed"] >= 2 and seen["fp8 kept apart"] >= 1, seen


def test_a_split_the_reads_predict_shows_in_the_bytes(evaluator, monkeypatch):
    """sm_110 lowers a dot with mma v5 (tcgen05), sm_120 with mma v2: one compile cannot answer both."""
    from tilefit.callsites.evaluate import config_cases
    from tilefit.callsites.sites import build_sites
    from tilefit.device_db import load_database

    db = load_database()
    ev = evaluator([FIXTURES / "ops" / "gemm.py"], {"engine.ops.gemm:matmul_kernel": {"a_ptr,b_ptr": ["bf16"]}})
    site = next(s for s in build_sites(ev.project).autotunes if s.kernel.name == "matmul_kernel")
    (case,) = config_cases(site, site.configs[1])
    (variant,) = ev.variants(case.kernel)
    a, b = (ev.run(case, variant, db.get(arch)) for arch in ("sm_110", "sm_120"))
    assert a.ok and b.ok and a.shared != b.shared, (a, b)


def test_engine_kernel_points_of_one_class_share_a_compile(tmp_path, monkeypatch):
    """A table's engine-kernel points (tilefit.smem.engine_kernels) on sm_120 and sm_121: one
    compile, kept under sm_120, answers both; with the classes off each arch compiles, alike."""
    triton = pytest.importorskip("triton")
    if triton.__version__ not in _release()["triton"]:
        pytest.skip(f"the classes were derived for {_release()['triton']}, not Triton {triton.__version__}")
    from tilefit.kernels.spec import make_spec
    from tilefit.smem.engine_kernels import EngineKernels

    engine = Path(__file__).parent / "fixtures" / "engine_kernels"
    spec = make_spec("fused_moe", "bf16", dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=1),
                     num_warps=4, num_stages=3)
    shared = EngineKernels(str(engine), cache_dir=tmp_path / "on")
    got = shared.many([(spec, "sm_120"), (spec, "sm_121")], jobs=1)
    assert shared.stats["compiles"] == 1
    assert [p.name for p in (tmp_path / "on").glob("engine/*/triton-*/*")] == ["sm_120"]
    monkeypatch.setenv("TILEFIT_ARCH_CLASSES", "0")
    apart = EngineKernels(str(engine), cache_dir=tmp_path / "off")
    alone = apart.many([(spec, "sm_120"), (spec, "sm_121")], jobs=1)
    assert apart.stats["compiles"] == 2
    assert sorted(p.name for p in (tmp_path / "off").glob("engine/*/triton-*/*")) == ["sm_120", "sm_121"]
    assert got[(spec, "sm_121")].shared_bytes == alone[(spec, "sm_121")].shared_bytes > 0
    assert got[(spec, "sm_121")] == alone[(spec, "sm_121")] and got[(spec, "sm_120")] == alone[(spec, "sm_120")]


def test_frontend_classes_follow_from_the_frontend_reads(monkeypatch):
    f = archclass.frontend_class
    text = "acc = tl.dot(a, b)"
    assert f("sm_110", "3.9.0", text) == f("sm_120", "3.9.0", text) == f("sm_121", "3.9.0", text)
    assert f("sm_86", "3.9.0", text) == f("sm_87", "3.9.0", text) != f("sm_89", "3.9.0", text)  # fp8e4nv
    assert f("sm_89", "3.9.0", text) != f("sm_120", "3.9.0", text)  # cc >= 90, cc < 100
    # the code generator reads options.arch in a Gluon kernel and in triton.language.extra.hip's helpers
    assert f("sm_120", "3.9.0", "from triton.experimental import gluon") is None
    assert f("sm_120", "3.9.0", "tl.extra.hip.libdevice") is None
    assert f("sm_120", "3.9.0", None) is None and f("sm_120", "3.8.0", text) is None and f("gfx942", "3.9.0", text) is None
    monkeypatch.setenv("TILEFIT_ARCH_CLASSES", "0")
    assert f("sm_120", "3.9.0", text) is None


def test_a_frontend_failure_answers_its_twins_as_their_own_compiles_do(evaluator, monkeypatch, tmp_path):
    """A compile that fails in the AST code generator (dot operands of two dtypes) on sm_110 and
    sm_120: the prefetch compiles one and stores its failure for the other; compiled each on its
    own (classes off, another cache), the outcomes are the same, message included."""
    from tilefit.callsites.evaluate import config_cases
    from tilefit.callsites.prefetch import prefetch
    from tilefit.callsites.sites import Sites, build_sites
    from tilefit.device_db import load_database
    from tilefit.engine import group_devices
    from tilefit.smem.pool import CompilePool

    db = load_database()
    devices = [db.get("sm_110"), db.get("sm_120")]
    kernels = {"engine.ops.gemm:matmul_kernel": {"a_ptr": ["fp16"], "b_ptr": ["bf16"]}}

    def outcomes(ev):
        site = next(s for s in build_sites(ev.project).autotunes if s.kernel.name == "matmul_kernel")
        site.configs = site.configs[1:2]
        with CompilePool(1) as pool:
            stats = prefetch(ev, Sites([], [site], []), group_devices(devices), pool=pool)
        (case,) = config_cases(site, site.configs[0])
        (variant,) = ev.variants(case.kernel)
        return stats, [ev.run(case, variant, d) for d in devices]

    stats, shared = outcomes(evaluator([FIXTURES / "ops" / "gemm.py"], kernels))
    assert stats.compiled == 1 and stats.shared == 1, stats
    monkeypatch.setenv("TILEFIT_ARCH_CLASSES", "0")
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "apart"))
    stats, apart = outcomes(evaluator([FIXTURES / "ops" / "gemm.py"], kernels))
    assert stats.compiled == 2 and stats.shared == 0, stats
    assert [o.status for o in shared] == ["failed", "failed"] and "dtype" in shared[0].detail, shared
    assert shared == apart
