"""SGLang's channel-wise fp8 tables are judged with SGLang's own ``scaled_mm_kernel``.

A ``dtype=fp8_w8a8_channelwise`` table is read by SGLang 0.5.23's ``get_w8a8_channelwise_fp8_config``
and launched through ``triton_scaled_mm`` -> ``scaled_mm_kernel`` (per-token x per-channel scales,
no GROUP_SIZE_M): the ``scaled_mm`` family. Its forms are calibrated on compiles of SGLang's kernel
(``kernels/scaled_mm/smem/sglang-0.5.23``) and proven on held-out compiles of every arch the
corpus and the consumer cards touch, so a check of these tables compiles nothing."""

from __future__ import annotations

import json

import pytest

from tilefit.families import classify
from tilefit.kernels import registry
from tilefit.smem.engine_model import EngineModel
from tilefit.variants import kernel_variants

SGL_CFG = "sglang-0.5.23/sglang/kernels/ops/gemm/configs"
ARCHS = ["sm_89", "sm_120", "sm_121", "sm_110", "sm_90", "sm_100", "sm_103"]


def _tables(corpus):
    return sorted((corpus / SGL_CFG).glob("*dtype=fp8_w8a8_channelwise.json"))


def _entries(corpus):
    for t in _tables(corpus):
        meta = classify(str(t))
        for key, cfg in json.loads(t.read_text()).items():
            if cfg:  # a null entry: CUTLASS won at that M, no Triton launch
                yield t, meta, key, cfg


def test_channelwise_entries_launch_sglangs_scaled_mm(corpus):
    assert len(_tables(corpus)) == 4
    assert registry.by_function("scaled_mm_kernel").name == "scaled_mm"
    n = 0
    for t, meta, key, cfg in _entries(corpus):
        (v,) = kernel_variants(meta, cfg, "sm_89", "NVIDIA", meta.engine)
        assert v.spec.kernel == "scaled_mm" and v.spec.engine == "sglang" and v.spec.quant == "per_channel", t.name
        assert "GROUP_SIZE_M" not in v.spec.tile_dict
        assert registry.get("scaled_mm").engine_function("sglang", v.spec, "sm_89") == "scaled_mm_kernel"
        n += 1
    assert n >= 60


@pytest.mark.parametrize("arch", ARCHS)
def test_every_channelwise_entry_has_a_proven_or_compiled_figure(corpus, arch):
    em = EngineModel("3.9.0")
    seen = set()
    for _t, meta, _key, cfg in _entries(corpus):
        (v,) = kernel_variants(meta, cfg, arch, "NVIDIA", meta.engine)
        if v.spec in seen:
            continue
        seen.add(v.spec)
        got = em.answer(v.spec, arch)
        assert got is not None and (got.proven or got.compiled), (arch, cfg, got)
    assert len(seen) == 37


def test_a_compiled_point_is_the_forms_figure():
    """The stored compile of an L40S entry (sm_89) and the proven form agree to the byte."""
    em = EngineModel("3.9.0")
    from tilefit.kernels.spec import make_spec

    spec = make_spec("scaled_mm", "fp8_w8a8", dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=32, BLOCK_SIZE_K=256),
                     num_warps=4, num_stages=5, quant="per_channel").evolve(engine="sglang")
    # the fitted mma_v2 form: 4 copies of A (64x256) and of B (256x32) on sm_89
    assert em.answer(spec, "sm_89", forms_only=True).shared_bytes == 4 * (64 * 256 + 256 * 32)
    # tcgen05 (sm_110): the warp-group MMA keeps num_stages copies plus 16 B of barriers
    assert em.answer(spec, "sm_110", forms_only=True).shared_bytes == 5 * (64 * 256 + 256 * 32) + 16
    assert em.answer(spec.evolve(num_warps=2), "sm_110", forms_only=True).shared_bytes == 4 * (64 * 256 + 256 * 32)


def test_check_of_channelwise_tables_compiles_nothing(corpus, tmp_path, monkeypatch):
    from tilefit.api import CheckOptions, build_engine, run_check
    from tilefit.config import Settings

    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    for targets in ([], ["consumer"]):
        opts = CheckOptions(targets=targets, use_cache=False, progress=False)
        settings = Settings()
        engine = build_engine(settings, opts)
        asked = []
        real = engine.estimator.precompile
        monkeypatch.setattr(engine.estimator, "precompile",
                            lambda *a, **k: asked.extend(engine.estimator.deferred) or real(*a, **k))
        res = run_check([str(t) for t in _tables(corpus)], opts, settings, engine)
        assert res.files_checked == 4 and not res.errors
        assert asked == [] and engine.estimator.compiles == 0, (targets, asked[:5])
