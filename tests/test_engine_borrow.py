"""``calibrate smem --engine ... --borrow``: an arch that lowers a path like another arch family
takes that family's form, chosen on the arch's fit points and proven on its held-out points --
checked on the shipped calibrations' compiled points (no Triton, nothing compiled)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tilefit.cli import cli as main
from tilefit.smem import calibrate as cal
from tilefit.smem import engine_borrow, engine_calibrate as ec
from tilefit.smem.engine_extend import stored_results

VLLM_MOE = ("fused_moe", "vllm", "0.33.0", "3.9")
SGLANG_MOE = ("fused_moe", "sglang", "0.5.23", "3.9")


def _stored(which):
    doc = json.loads(ec.forms_path(*which).read_text(encoding="utf-8"))
    return doc, ec.load_points(ec.points_path(*which))


def _unborrowed(doc, kernel):
    """The stored results without the forms a borrow round added (the calibration before it)."""
    return {k: r for k, r in stored_results(doc, kernel).items() if not r.origin.startswith("borrowed:")}


def test_sm110_int8_lowers_like_mma_sync_not_tcgen05():
    """SGLang's fused MoE, int8 on sm_110: the tcgen05 form (S buffers, MMA barriers) misses most
    compiles. Without a form of sm_110's own and without the witness points (the calibration
    before the 2026-12-03 candidate round) the round takes the mma.sync family's, exact on more
    held-out and fit points there; the witnesses (one stage, B kept in registers) are fit points
    it misses, so with them it is not taken; sm_120's own form, written for the same one-stage B
    (a separate candidate round on sm_120), is exact on all of them: sm_110 lowers int8 as sm_120."""
    doc, designed = _stored(SGLANG_MOE)
    base = _unborrowed(doc, "fused_moe")
    base.pop(("sm_110", "fused_moe", "int8_w8a8"), None)
    witnesses = {cal._ident(d.point) for d in ec.engine_witnesses("fused_moe", "sglang", ["sm_110"], set())}
    assert len(witnesses) == 9
    before = [d for d in designed if cal._ident(d.point) not in witnesses]
    got, taken = engine_borrow.borrow(base, before, "fused_moe", ec.shipped_epilogue("3.9"), cal.device_limits(),
                                      lambda p: ec.in_launch_space("sglang", p))
    how = taken["sm_110/int8_w8a8"]
    assert any(w.startswith("mma_v2") for w in how["from"])
    exact, held_out = how["held_out_exact"]
    assert exact == held_out and exact > how["was_held_out_exact"]
    assert how["fit_exact"][0] > how["was_fit_exact"]
    r = got[("sm_110", "fused_moe", "int8_w8a8")]
    held = [d.point for d in designed if d.design in ("table", "grid") and d.point.shared is not None
            and d.point.arch == "sm_110" and cal.form_dtype(d.point.path) == "int8_w8a8"]
    got_b = ec.evaluate(r.formula, held, ec.shipped_epilogue("3.9"))
    assert held and sum(g == p.shared for g, p in zip(got_b, held)) == how["held_out_exact"][0]
    # a proven group is never touched
    assert all(k[0] != "sm_89" for k in got if k not in base)
    _got, taken = engine_borrow.borrow(base, designed, "fused_moe", ec.shipped_epilogue("3.9"), cal.device_limits(),
                                       lambda p: ec.in_launch_space("sglang", p))
    how = taken["sm_110/int8_w8a8"]
    assert "sm_120" in how["from"] and all(w != "mma_v2" for w in how["from"])
    assert how["fit_exact"][0] == how["fit_exact"][1] and how["held_out_exact"][0] == how["held_out_exact"][1]
    assert doc["origin"]["sm_110"]["int8_w8a8"] == "candidate"
    assert doc["proofs"]["sm_110"]["int8_w8a8"]["sm_110"]["exact"] == doc["proofs"]["sm_110"]["int8_w8a8"]["sm_110"]["points"]


def test_a_borrowed_form_is_proven_only_where_it_is_exact_on_every_point():
    doc, designed = _stored(VLLM_MOE)
    got, taken = engine_borrow.borrow(_unborrowed(doc, "fused_moe"), designed, "fused_moe",
                                      ec.shipped_epilogue("3.9"), cal.device_limits())
    for group, how in taken.items():
        arch, dtype = group.split("/", 1)
        pr = got[(arch, "fused_moe", dtype)].proofs[arch]
        all_exact = how["fit_exact"][0] == how["fit_exact"][1] and how["held_out_exact"][0] == how["held_out_exact"][1]
        assert pr.proven == all_exact == how["proven"]


def test_the_shipped_borrowed_forms_are_what_the_round_chooses():
    """The shipped files are the round's output: run again on them, it takes nothing more."""
    for which in (VLLM_MOE, SGLANG_MOE):
        doc, _ = _stored(which)
        assert doc["provenance"].get("borrowed"), which
        _kc, taken = engine_borrow.borrow_round(*which, write=False)
        assert taken == {}, which


def test_borrow_refuses_options_that_compile():
    r = CliRunner().invoke(main, ["calibrate", "smem", "--engine", "vllm==0.33.0", "--borrow", "--arch", "sm_89",
                                  "--package"])
    assert r.exit_code == 2 and "--borrow" in r.output and "Traceback" not in r.output
