"""``calibrate smem --engine ... --extend --arch A``: more archs for a stored engine calibration.

A calibration's compiled points are facts of the engine's kernel, the Triton release and the
arch; compiling them again for a new arch would change nothing of them. ``--extend`` therefore
keeps everything the stored calibration (``triton-X.Y.json`` and ``points-triton-X.Y.json`` of
the engine's folder) holds and calibrates only the new archs, with the same designs (seeded per
engine, path and arch: the new archs' points are the ones a calibration of all archs at once
would compile). The two are merged group by group (:func:`merge`):

* an arch family the stored calibration has no form for (``cdna3`` when gfx942 is new) takes the
  new calibration's forms and proofs as they are;
* for a new arch of a family that has a stored form (sm_110 in ``tcgen05`` beside sm_100), the
  stored form is proven on every point compiled for the new arch -- none of them was seen when
  it was chosen, so all are held out. It is the new arch's form when it is exact on all of them;
  else the new calibration's form, as the arch's own form, where that one is proven there; else
  the stored form stays, with the new arch's (unproven) figures as its error bound;
* stored groups, forms and proofs are never changed, and the stored archs are not compiled.

The provenance keeps the stored calibration's and lists each extension (archs, command, date,
points, seconds). Nothing here imports triton.
"""

from __future__ import annotations

import datetime
from typing import Mapping, Sequence

from . import calibrate as cal
from .calibrate import ARCH_FAMILIES


def stored_results(doc: Mapping, kernel: str) -> dict:
    """The :class:`~tilefit.smem.engine_calibrate.GroupResult` of every form of a forms file."""
    from .engine_calibrate import GroupResult, Proof

    out = {}
    for where, per in (doc.get("formulas") or {}).items():
        for dtype, text in per.items():
            proofs = {a: Proof(**pr) for a, pr in ((doc.get("proofs") or {}).get(where, {}).get(dtype) or {}).items()}
            out[(where, kernel, dtype)] = GroupResult(where, kernel, dtype, text,
                                                      (doc.get("origin") or {}).get(where, {}).get(dtype, "?"),
                                                      proofs, (doc.get("fits") or {}).get(where, {}).get(dtype))
    return out


def merge(stored: Mapping[tuple, object], new: Mapping[tuple, object], new_points: Sequence, new_archs: Sequence[str],
          epilogue: Mapping, limits: Mapping) -> tuple[dict, dict]:
    """Stored results plus the new archs' (see the module docstring). Returns the merged results
    and, per new arch and group, how it was settled (``{"arch/family/dtype": how}``)."""
    from .engine_calibrate import GroupResult, group_key, prove

    out = dict(stored)
    how: dict[str, str] = {}
    compiled = [p for p in new_points if p.shared is not None and p.arch in new_archs]
    stored_families = {(k[0], k[2]) for k in stored if k[0] not in ARCH_FAMILIES}
    for key, r in sorted(new.items()):
        where, kernel, dtype = key
        family = ARCH_FAMILIES.get(where, where)
        if where in ARCH_FAMILIES:  # an arch's own form from the new calibration
            if where in new_archs and key not in stored:
                out[key] = r
                how[f"{where}/{family}/{dtype}"] = "own form of the new calibration"
            continue
        if (family, dtype) not in stored_families:
            out[key] = r
            for arch in sorted(r.proofs):
                how[f"{arch}/{family}/{dtype}"] = "new arch family: the new calibration's form"
            continue
        old = stored[(family, kernel, dtype)]
        for arch in sorted({p.arch for p in compiled if group_key(p) == (family, kernel, dtype)}):
            if (arch, kernel, dtype) in stored:
                continue
            pts = [p for p in compiled if p.arch == arch and group_key(p) == (family, kernel, dtype)]
            on_old = prove(old.formula, pts, epilogue, limits).get(arch)
            mine = r.proofs.get(arch)
            # the new form was chosen on some of these points: it counts only where it is exact on
            # every one of them (the fit points too) and proven on its held-out ones
            strict = prove(r.formula, pts, epilogue, limits).get(arch) if r.formula != old.formula else None
            if on_old is not None and on_old.proven:
                old.proofs[arch] = on_old
                how[f"{arch}/{family}/{dtype}"] = f"stored form exact on all {on_old.points} compiled points"
            elif mine is not None and mine.proven and strict is not None and strict.proven:
                out[(arch, kernel, dtype)] = GroupResult(arch, kernel, dtype, r.formula, f"{r.origin}:extend",
                                                         {arch: mine}, r.fit)
                how[f"{arch}/{family}/{dtype}"] = (f"own form (the stored form misses here), exact on all "
                                                   f"{strict.points} compiled points")
            elif on_old is not None:
                old.proofs[arch] = on_old
                how[f"{arch}/{family}/{dtype}"] = (f"not proven: stored form exact on {on_old.exact}/{on_old.points}, "
                                                   f"max error {on_old.max_error} B")
    return out, how


def extension_record(archs: Sequence[str], command: str, seconds: float, points: Sequence, how: Mapping) -> dict:
    compiled = sum(1 for d in points if d.point.shared is not None)
    return {"archs": list(archs), "date": datetime.date.today().isoformat(), "command": command,
            "points": len(points), "compiled": compiled, "failed": len(points) - compiled,
            "seconds": round(seconds, 1), "settled": dict(sorted(how.items())),
            "note": "the stored calibration's points kept as compiled (not recompiled); the new archs calibrated "
                    "with the same seeded designs and merged group by group (tilefit.smem.engine_extend)"}


def merged_points(stored: Sequence, new: Sequence) -> list:
    """The stored points and the new ones; a new point of a stored ident replaces nothing."""
    seen = {cal._ident(d.point) for d in stored}
    return list(stored) + [d for d in new if cal._ident(d.point) not in seen]
