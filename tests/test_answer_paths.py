"""The engine model's answers read a spec's arch-free variables once and each arch's epilogue
scratch positionally (``AnalyticModel.tile_values``), and the lint engine's screen asks the
estimator in one call per entry (``Estimator.variants_fit``, ``Estimate.surely_fits``): the same
answers and verdicts as the per-arch keyword path and the three checks they stand for."""

from __future__ import annotations

import itertools

import pytest

from tilefit.estimate import Estimator, EstimatorUnavailable
from tilefit.kernels import registry
from tilefit.kernels.spec import make_spec
from tilefit.smem import analytic
from tilefit.smem.analytic import PER_ARCH, Estimate
from tilefit.smem.engine_model import EngineModel
from tilefit.variants import kernel_variants

from corpus_tables import triton_tables

ARCHS = (("sm_89", "NVIDIA"), ("sm_120", "NVIDIA"), ("sm_86", "NVIDIA"), ("sm_90", "NVIDIA"),
         ("sm_121", "NVIDIA"), ("gfx942", "AMD"))


@pytest.fixture(scope="module")
def corpus_variants(corpus_files) -> list[tuple[tuple, str]]:
    """(an entry's variants, arch) of every 6th corpus table's entries on six archs."""
    out = []
    for _path, table in triton_tables(corpus_files, 6):
        meta = table.meta
        for _key, entry in table.live_entries():
            for arch, vendor in ARCHS:
                variants = kernel_variants(meta, entry, arch, vendor, meta.engine)
                if variants:
                    out.append((variants, arch))
    return out


def test_positional_answers_are_the_keyword_answers(corpus_variants, monkeypatch):
    specs = {(v.spec.smem_key, arch): (v.spec, arch) for variants, arch in corpus_variants for v in variants
             if v.spec.engine}
    assert len(specs) > 1000
    fast = EngineModel()
    got = [fast.answer(spec, arch) for spec, arch in specs.values()]
    assert sum(a is not None and not a.compiled for a in got) > 500  # forms evaluated, not only compiles
    monkeypatch.setattr(analytic.AnalyticModel, "tile_values", lambda self, spec: PER_ARCH)
    slow = EngineModel()
    assert got == [slow.answer(spec, arch) for spec, arch in specs.values()]


def test_a_family_that_overrides_form_variables_is_asked_per_arch(monkeypatch):
    base = registry.get("fused_moe")

    class Own(type(base)):
        def form_variables(self, spec, operand_bytes, epilogue, arch_family, arch):
            return super().form_variables(spec, operand_bytes, epilogue, arch_family, arch)

    own = object.__new__(Own)
    own.__dict__.update(base.__dict__)
    monkeypatch.setattr(registry, "find", lambda name: own)
    spec = make_spec("fused_moe", "bf16", {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64,
                                           "GROUP_SIZE_M": 1}, num_warps=4, num_stages=3)
    model = analytic.load_model()
    assert model.tile_values(spec) is PER_ARCH
    monkeypatch.setattr(registry, "find", lambda name: base)
    values, question = model.tile_values(spec)
    assert question is not None and len(values) == len(analytic.VARIABLES) - 1


@pytest.mark.parametrize("status", ["exact", "calibrated", "derived", "uncalibrated"])
def test_surely_fits_is_usable_fits_and_not_over(status):
    for shared, error, limit in itertools.product((0, 99, 100, 101, 150), (None, 0, 1, 30, 200), (50, 100, 130)):
        est = Estimate(shared, "analytic", "sm_89", status, "", error)
        want = est.usable and est.certainly_fits(limit) and not est.certainly_over(limit)
        assert est.surely_fits(limit) == want, (shared, error, limit)


def _screen(estimator, variants, arch, limit) -> bool:
    """The screen as three checks and a failure look-up per variant."""
    for v in variants:
        try:
            est = estimator.estimate(v.spec, arch, limit)
        except EstimatorUnavailable:
            return False
        if not est.usable or not est.certainly_fits(limit) or est.certainly_over(limit):
            return False
        if estimator.compile_failure(v.spec, arch):
            return False
    return True


def test_variants_fit_is_the_screen(corpus_variants):
    one, other = Estimator("analytic"), Estimator("analytic")
    verdicts = []
    for (variants, arch), limit in zip(corpus_variants, itertools.cycle((101376, 65536, 232448, 49152))):
        got = one.variants_fit(variants, arch, limit)
        assert got == _screen(other, variants, arch, limit), ([v.spec.key() for v in variants], arch, limit)
        verdicts.append(got)
    assert any(verdicts) and not all(verdicts)


def test_a_spec_s_point_name_is_its_point_s(corpus_variants):
    from tilefit.smem import calibrate

    specs = {v.spec.reference for variants, _arch in corpus_variants for v in variants}
    named = 0
    for spec in specs:
        pt, got = calibrate.spec_point(spec, "sm_89"), calibrate.spec_point_name(spec)
        assert got == (None if pt is None else (pt.path.name, pt.tile)), spec.key()
        named += got is not None
    assert named > 100
