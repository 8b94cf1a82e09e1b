"""``calibrate smem --engine ... --candidates``: the family's witness points (compiles a written
candidate was made from, ``calibration.engine_witnesses``) are compiled beside the fresh design and
count strictly for the current form as for the candidate (tilefit.smem.engine_calibrate). The
compiler is stood in for by the forms themselves -- the witnesses' own figures are the engine's
(25624 / 8720 B, recorded in family.json) -- so nothing here needs Triton or the engine's wheel."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tilefit.smem import calibrate as cal
from tilefit.smem import engine_calibrate as ec

GROUP = ("mma_v2", "fused_moe", "fp8_w8a8+tma_b")


@pytest.fixture
def round_(engine_package_copy, monkeypatch):
    from tilefit.smem import engine_kernels, engine_model, engine_source

    dst = engine_package_copy("fused_moe", "sglang", "0.5.23")
    monkeypatch.setattr(ec, "compile_release", lambda: "3.9.0")
    monkeypatch.setattr(engine_source, "open_source", lambda *a, **k: SimpleNamespace(engine="sglang", version="0.5.23"))
    monkeypatch.setattr(engine_kernels, "EngineKernels", lambda *a, **k: None)
    cands = ec.engine_candidates("fused_moe", "sglang")
    doc = json.loads((dst / "triton-3.9.json").read_text(encoding="utf-8"))
    # the form the shipped round replaced (its provenance keeps it) is the group's form again here
    # (a later round's record moves it to earlier_candidates)
    rounds = [doc["provenance"]["candidates"], *reversed(doc["provenance"].get("earlier_candidates", []))]
    doc["formulas"]["mma_v2"]["fp8_w8a8+tma_b"] = next(
        r["groups"]["mma_v2/fp8_w8a8+tma_b"]["replaced"] for r in rounds
        if "replaced" in r["groups"].get("mma_v2/fp8_w8a8+tma_b", {}))
    doc["provenance"]["candidates"]["groups"] = {}
    doc["provenance"].pop("earlier_candidates", None)
    ec.write_forms(doc, dst / "triton-3.9.json")
    # the fp8 tma_b witnesses (the family's others, of the one-stage B in registers, stay stored)
    witnesses = {cal._ident(d.point) for d in ec.engine_witnesses("fused_moe", "sglang", ["sm_120", "sm_121"], set())
                 if d.point.path.tma == "b"}
    assert len(witnesses) == 4
    kept = [d for d in ec.load_points(dst / "points-triton-3.9.json") if cal._ident(d.point) not in witnesses]
    ec.write_points(ec.dump_points(kept, kernel="fused_moe", engine="sglang", engine_version="0.5.23",
                                   triton_version="3.9.0"), dst / "points-triton-3.9.json")
    epilogue = ec.shipped_epilogue("3.9.0")
    compiled = []

    def compile_points(_ek, designed, _jobs=None, _progress=None):
        # the engine's bytes: the written candidate's where the family has one, else the shipped form
        out = []
        for d in designed:
            key = ec.group_key(d.point)
            text = cands.get(key) or doc["formulas"][key[0]][key[2]]
            shared = ec.evaluate(text, [d.point], epilogue)[0]
            out.append(ec.Designed(ec.Point(d.point.path, d.point.tile, d.point.num_warps, d.point.num_stages,
                                            d.point.arch, shared), d.design))
        compiled.extend(out)
        return out

    monkeypatch.setattr(ec, "compile_points", compile_points)
    engine_model.forget()
    yield SimpleNamespace(dst=dst, doc=doc, cand=cands[GROUP], compiled=compiled, monkeypatch=monkeypatch)
    engine_model.forget()


def test_a_witness_the_shipped_form_misses_lets_the_candidate_in(round_):
    assert round_.doc["formulas"]["mma_v2"]["fp8_w8a8+tma_b"] != round_.cand
    kc = ec.candidate_round("sglang==0.5.23", "fused_moe", archs=["sm_120"], scale=0.5, package=True)
    w = [d for d in round_.compiled if d.point.tile == (16, 256, 32) and d.point.num_warps == 8]
    assert [d.point.shared for d in w] == [25624] and w[0].design == "fit"  # the engine's figure (family.json)
    after = json.loads((round_.dst / "triton-3.9.json").read_text(encoding="utf-8"))
    assert after["formulas"]["mma_v2"]["fp8_w8a8+tma_b"] == round_.cand
    assert "mma_v2/fp8_w8a8+tma_b" in after["provenance"]["candidates"]["groups"]
    stored = {cal._ident(d.point): (d.point.shared, d.design) for d in ec.load_points(round_.dst / "points-triton-3.9.json")}
    assert stored[cal._ident(w[0].point)] == (25624, "fit")
    assert kc.written


def test_without_the_witness_the_tie_keeps_the_shipped_form(round_):
    round_.monkeypatch.setattr(ec, "engine_witnesses", lambda *a: [])
    ec.candidate_round("sglang==0.5.23", "fused_moe", archs=["sm_120"], scale=0.5, package=True)
    after = json.loads((round_.dst / "triton-3.9.json").read_text(encoding="utf-8"))
    assert after["formulas"]["mma_v2"]["fp8_w8a8+tma_b"] == round_.doc["formulas"]["mma_v2"]["fp8_w8a8+tma_b"]


def test_one_key_writes_the_same_forms_for_several_arch_families():
    """SGLang's TMA launch on the archs without a TMA unit is one set of forms for sm_80/86/87/89
    (written once in family.json), while sm_89 alone adds its fp8 forms."""
    cands = ec.engine_candidates("fused_moe", "sglang")
    tma_b = {fam: text for (fam, _k, dtype), text in cands.items() if dtype == "bf16+tma_b"}
    assert {"sm_80", "sm_86", "sm_87", "sm_89"} <= set(tma_b)
    assert len({tma_b[a] for a in ("sm_80", "sm_86", "sm_87", "sm_89")}) == 1
    assert ("sm_89", "fused_moe", "fp8_w8a8+tma_b") in cands and ("sm_80", "fused_moe", "fp8_w8a8+tma_b") not in cands


def test_a_form_written_twice_for_one_arch_family_is_refused(monkeypatch):
    from tilefit.kernels import registry

    family = SimpleNamespace(calibration={"engine_candidates": {"sglang": {
        "sm_80,sm_86": {"bf16": "BM*BK*a"}, "sm_86": {"bf16": "BK*BN*b"}}}})
    monkeypatch.setattr(registry, "get", lambda name: family)
    with pytest.raises(ValueError, match="sm_86 bf16 twice"):
        ec.engine_candidates("fused_moe", "sglang")
