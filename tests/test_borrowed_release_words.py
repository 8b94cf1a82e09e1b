"""An answer borrowed from another Triton release says which release it borrowed and why its
error bound is what it is (issues 17/19 review): SGLang 0.5.23 has no calibration for Triton 3.1,
so a ``triton_3_1_0`` table on sm_89 is answered with 3.4's forms. Their form is proven exact on
sm_89's held-out compiles for 3.4 -- a 0 B bound that is 3.4's, not a measure of 3.1 -- and the
words must not read "exact on 8/8 ... (not proven)" beside a 0 B bound with no reason given."""

from __future__ import annotations

from tilefit.smem import engine_calibrate as ec
from tilefit.smem.engine_model import EngineModel, triton_chain


def _answer(triton: str, arch: str = "sm_89"):
    spec = ec.Point(ec.Path("fused_moe", "bf16"), (64, 128, 128), 4, 3, arch).spec().with_(engine="sglang",
                                                                                        triton=triton)
    return EngineModel("3.9").answer(spec, arch, forms_only=True)


def test_a_borrowed_release_names_the_release_and_whose_bound_it_carries():
    (first, note), *_ = triton_chain("fused_moe", "sglang", "0.5.23", "3.1.0")
    assert first == "3.4" and "no calibration for Triton 3.1" in note  # the release borrowed, from the records
    got = _answer("3.1.0")
    assert not got.proven and got.max_error == 0, got
    assert "for Triton 3.4, the release borrowed" in got.detail, got.detail
    assert "(not proven)" not in got.detail  # proven for 3.4: what is unproven is 3.1, said by the note
    assert "not proven for 3.1" in got.detail
    assert got.detail.endswith("its error bound, 0 B, is that of Triton 3.4's form (the release borrowed), "
                               "not a measure of Triton 3.1"), got.detail


def test_the_release_s_own_answer_has_no_borrowed_words():
    got = _answer("3.4.0")
    assert got.proven and got.max_error is None, got
    assert "borrowed" not in got.detail and "form proven exact on" in got.detail, got.detail
