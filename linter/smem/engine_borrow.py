"""An arch that lowers a kernel like another arch family: a form borrowed from a sibling group.

Triton does not lower a dtype path the same way on every arch of a family: on sm_110 the fused
MoE's int8 dot runs as ``mma.sync`` (Triton's tcgen05 path takes no int8 operands there), so its
shared memory is the ``mma_v2`` layout -- ``max(S - 1, 1)`` operand buffers, no barrier, a scale
vector in shared memory -- not the ``tcgen05`` family's (``S`` buffers and the MMA barriers);
sm_121's fp8 dot keeps the ``mma_v2`` family's epilogue and small-A rules that a fit on its own
few points missed. The term the arch's form lacked is already a form of the calibration: the
one of the family it lowers like.

:func:`borrow_round` works on a stored calibration and compiles nothing. Per (arch, kernel, dtype
key) whose current form is not proven on that arch, every other form of the calibration (each
arch family's and arch's own, of this dtype key first, then of the others: the operand bytes are
variables) is a candidate. A candidate is **chosen on the arch's fit points** (design ``fit``: most
exact, then the shortest), and it replaces the arch's form only where it is exact on at least 90%
of them (:data:`MIN_FIT_SHARE`: the arch lowers the path like that group, not a coincidence of
sizes), on more of them than the current form, and on at least as many held-out points (designs
``table``/``grid``, which no choice saw); it is **proven** there only when it is exact on every
held-out and fit point with no verdict error. The replacement is stored as the arch's own form
(``formulas[<arch>][<dtype>]``, which the model reads before the family's), with ``origin``
``borrowed:<where>``.
"""

from __future__ import annotations

import datetime
from typing import Mapping, Sequence

from . import calibrate as cal
from .calibrate import ARCH_FAMILIES, Point


# a form "lowers like" the arch only where it is exact on at least this share of the arch's fit
# points: a sibling's form that matches half of them is a coincidence of sizes, not the layout
MIN_FIT_SHARE = 0.9


def _exact(text: str, pts: Sequence[Point], epilogue: Mapping) -> int:
    from .engine_calibrate import evaluate

    if not pts:
        return 0
    return sum(1 for p, v in zip(pts, evaluate(text, pts, epilogue)) if v == p.shared)


def current(results: Mapping[tuple, object], arch: str, kernel: str, dtype: str):
    """The result that answers ``arch`` now: the arch's own form, else its family's."""
    return results.get((arch, kernel, dtype)) or results.get((ARCH_FAMILIES.get(arch, "?"), kernel, dtype))


def borrow(results: Mapping[tuple, object], designed: Sequence, kernel: str, epilogue: Mapping,
           limits: Mapping, launched=None) -> tuple[dict, dict]:
    """``results`` with the borrowed forms (see the module docstring); and per ``arch/dtype`` taken,
    where from and the counts it was taken on. ``launched(point)``: whether a held-out point is in
    the engine's launch space (the points the proof counts)."""
    from .engine_calibrate import GroupResult, Proof, group_key, prove

    out = dict(results)
    taken: dict[str, dict] = {}
    fit: dict[tuple, list[Point]] = {}
    held: dict[tuple, list[Point]] = {}
    for d in designed:
        p = d.point
        if p.shared is None:
            continue
        key = (p.arch, group_key(p)[2])
        if d.design == "fit":
            fit.setdefault(key, []).append(p)
        elif d.design in ("table", "grid") and (launched is None or launched(p)):
            held.setdefault(key, []).append(p)
    # every form of the kernel: the dtype's own first (the operand bytes are variables, so a path
    # may lower like another: SGLang's MLA decode with an fp8 cache stages like its bf16 one)
    texts: dict[str, set[str]] = {}
    for (where, k, dtype), r in results.items():
        if k == kernel:
            texts.setdefault(dtype, set()).add(r.formula)
    every = {t for ts in texts.values() for t in ts}
    for (arch, dtype), hpts in sorted(held.items()):
        cur = current(results, arch, kernel, dtype)
        if cur is None:
            continue
        pr = cur.proofs.get(arch)
        if pr is not None and pr.proven:
            continue
        fpts = fit.get((arch, dtype), [])
        if not fpts:
            continue  # nothing to choose on that no proof point saw
        cur_fit, cur_held = _exact(cur.formula, fpts, epilogue), _exact(cur.formula, hpts, epilogue)
        best = None
        own = texts.get(dtype, set())
        for text in sorted(every, key=lambda t: (t not in own, len(t), t)):
            if text == cur.formula:
                continue
            score = _exact(text, fpts, epilogue)
            if best is None or score > best[0]:
                best = (score, text)
        if best is None or best[0] <= cur_fit or best[0] < MIN_FIT_SHARE * len(fpts):
            continue
        text = best[1]
        if _exact(text, hpts, epilogue) < cur_held:
            continue
        proofs = prove(text, hpts, epilogue, limits)
        on_fit = prove(text, fpts, epilogue, limits).get(arch)
        if on_fit is not None and not on_fit.proven:  # strict: a miss on a fit point leaves the arch unproven
            pr = proofs.setdefault(arch, Proof())
            pr.points += on_fit.points - on_fit.exact
            pr.max_error = max(pr.max_error, on_fit.max_error)  # the error bound an unproven form is used with
            pr.verdict_errors += on_fit.verdict_errors
        src = sorted((f"{w}/{dt}" if dt != dtype else w) for (w, k, dt), r in results.items()
                     if k == kernel and r.formula == text)
        out[(arch, kernel, dtype)] = GroupResult(arch, kernel, dtype, text, f"borrowed:{src[0]}", proofs)
        taken[f"{arch}/{dtype}"] = {"from": src, "fit_exact": [best[0], len(fpts)], "was_fit_exact": cur_fit,
                                    "held_out_exact": [proofs[arch].exact, len(hpts)],
                                    "was_held_out_exact": cur_held, "proven": proofs[arch].proven}
    return out, taken


def borrow_round(kernel: str, engine: str, engine_version: str, triton: str, *, write: bool = True,
                 command: str = "", package: bool = False):
    """:func:`borrow` on the stored calibration; written back (forms and points) with the round
    recorded in the provenance (``borrowed``). Nothing is compiled."""
    import json

    from . import engine_calibrate as ec
    from .engine_extend import stored_results

    fp = ec.forms_path(kernel, engine, engine_version, triton, ec.read_from(package))
    pp = ec.points_path(kernel, engine, engine_version, triton, ec.read_from(package))
    doc = json.loads(fp.read_text(encoding="utf-8"))
    if doc.get("reused"):
        raise ValueError(f"{fp} reuses the forms of Triton {doc['reused'].get('from')}")
    designed = ec.load_points(pp)
    triton_version = (doc.get("provenance") or {}).get("triton") or triton
    results = stored_results(doc, kernel)
    new, taken = borrow(results, designed, kernel, ec.shipped_epilogue(triton_version), cal.device_limits(),
                        lambda p: ec.in_launch_space(engine, p))
    prov = dict(doc.get("provenance") or {})
    if taken:
        prov["borrowed"] = [*prov.get("borrowed", []), {
            "date": datetime.date.today().isoformat(), "command": command, "groups": taken,
            "note": "an arch's form taken from another group of the calibration (another arch family's or dtype path's): chosen on the arch's fit "
                    "points, proven on its held-out points; nothing compiled (tilefit.smem.engine_borrow)"}]
    out = ec.forms_doc(new, doc.get("failures") or {}, kernel=kernel, provenance=prov,
                       triton_version=triton_version)
    kc = ec.KernelCalibration(kernel, new, designed, doc.get("failures") or {}, out)
    if write and taken:
        kc.written = ec.write_calibration(out, designed, kernel, engine, engine_version, triton_version, package)
    return kc, taken
