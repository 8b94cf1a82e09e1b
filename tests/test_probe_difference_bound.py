"""The error bound of an answer borrowed because the release's own probe differed (issue 17 review).

A Triton release X whose probe compared a group (arch family x dtype path) with the base release
and found it differing has no form of its own for it: the answer is another release's form, not
proven for X. Its error bound is then the largest difference X's probe saw on that group plus
the borrowed form's own held-out error (the form is within its error of its release, which is within
the probe's difference of X) -- not the borrowed form's own error alone (0 B for a proven form),
which says nothing of X and passed or failed entries silently within that difference of a limit.
"""

from __future__ import annotations

import pytest

from tilefit.smem import calibrate as cal
from tilefit.smem import engine_calibrate as ec
from tilefit.smem.engine_model import EngineModel, kernel_forms

from test_triton_releases import IDS, RECORDS, _doc, _probe

SM89_LIMIT = 101376  # sm_89's opt-in shared memory per block (device_db)


def test_a_table_within_the_probe_s_difference_of_the_limit_is_undecided_not_passed():
    """SGLang 0.5.23's fused MoE, fp8_w8a8 (per-tensor), a ``triton_3_4_0`` table on sm_89: 3.4's
    probe of mma_v2/fp8_w8a8 found 9 of 10 points identical to 3.9, up to 15360 B apart, so 3.4
    has no form of its own and 3.5's (proven on sm_89 for 3.5, 0 B) answers. 64x128x128 w4 s5
    needs 98304 B by that form, 3072 B under sm_89's limit: within the probe's difference, the
    verdict is undecided (EST001), not a pass; ``auto`` compiles nothing."""
    from tilefit.estimate import Estimator

    gap = kernel_forms("fused_moe", "sglang", "0.5.23", "3.4").probe_max_difference("mma_v2", "fp8_w8a8")
    assert gap == 15360
    spec = ec.Point(ec.Path("fused_moe", "fp8_w8a8"), (64, 128, 128), 4, 5, "sm_89").spec().with_(
        engine="sglang", triton="3.4.0")
    est = Estimator("auto", triton_version="3.9", exact=lambda s, a: pytest.fail("compiled"))
    got = est.estimate(spec, "sm_89", SM89_LIMIT)
    assert (got.shared_bytes, got.status, got.max_error) == (98304, "uncalibrated", gap), got
    assert SM89_LIMIT - got.shared_bytes < gap
    assert not got.certainly_fits(SM89_LIMIT) and not got.certainly_over(SM89_LIMIT)
    assert got.detail.endswith("its error bound, 15360 B, is the largest difference Triton 3.4's probe saw "
                               "from Triton 3.9 on this path (15360 B) plus Triton 3.5's form's own (0 B)"), got.detail
    assert est.compiles == 0
    # the release borrowed, asked for itself, is proven there: no bound, a certain pass
    own = Estimator("auto", triton_version="3.9").estimate(spec.with_(triton="3.5.0"), "sm_89", SM89_LIMIT)
    assert (own.shared_bytes, own.status) == (98304, "calibrated") and own.certainly_fits(SM89_LIMIT)


def _check_borrowed_bounds(kernel, engine, version, triton) -> int:
    """The probe points checked: at every compiled probe point of a group X's probe found
    differing that a borrowed form answers with a bound, the bound is at least the probe's largest
    difference on the group and covers X's own compiled bytes at that point."""
    model = EngineModel(triton)
    forms = kernel_forms(kernel, engine, version, triton)
    differing = _doc(kernel, engine, version, triton)["reused"].get("differing") or {}
    checked = 0
    for p in _probe(kernel, engine, version, triton):
        key = f"{p.family}/{cal.form_dtype(p.path)}"
        if key not in differing or p.shared is None:
            continue
        ans = model.answer(p.spec().with_(engine=engine, triton=f"{triton}.0"), p.arch, forms_only=True)
        if ans is None or ans.max_error is None or f"Triton {triton}'s probe:" not in ans.detail:
            continue  # no release has a form for it, or none with a bound: no verdict rests on it
        gap = forms.probe_max_difference(p.family, cal.form_dtype(p.path))
        assert gap is not None and ans.max_error >= gap, (p, ans)
        assert abs(ans.shared_bytes - p.shared) <= ans.max_error, (p, ans)
        checked += 1
    return checked


@pytest.mark.parametrize("kernel,engine,version,triton", RECORDS, ids=IDS)
def test_a_borrowed_answer_on_a_group_that_differed_carries_the_probe_s_difference(kernel, engine, version,
                                                                                  triton):
    _check_borrowed_bounds(kernel, engine, version, triton)


def test_the_records_have_probe_points_of_groups_that_differed_to_check():
    assert sum(_check_borrowed_bounds(*rec) for rec in RECORDS) >= 1000
