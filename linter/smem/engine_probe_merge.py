"""``calibrate smem --engine W --probe-from 3.9 --extend --arch A``: more archs for a release's probe record.

A Triton release without a calibration of its own ships a probe record (``reused`` of its
``triton-X.Y.json``: per (arch family, dtype path) group, its compiles of a probe set compared with
the base release's) and its probe points. Probing more archs (the AMD archs, sm_110) must not cost
a new probe of the archs already probed, nor drop them: the new archs' probe points are added to the
stored ones and every group is counted again from the merged points (:func:`records`), with the
rule the first probe used (:func:`tilefit.smem.engine_calibrate.compare_probe`,
:func:`~tilefit.smem.engine_calibrate.reuses`) and one more:

* a group the stored record has not (``cdna3/bf16`` when gfx942 is new) is counted as a probe of it
  alone would count it;
* a group the stored record reuses keeps its stored archs as they were; a new arch joins it only
  when that arch's own points prove the base release's bytes (all identical, at least
  :data:`~tilefit.smem.engine_calibrate.MIN_PROBE_POINTS`), else its record is kept apart under the
  group's ``not_reused_on`` -- the base form is then not proven on that arch (the loader reuses a
  group's forms only on its ``archs``) and its answer carries the arch's figures;
* a group the stored record does not reuse is counted again over the stored and the new points
  together, by the first probe's rule.

The stored points, failures, forms and provenance are kept; the provenance lists each extension
(``probe_extensions``; a calibration's own ``--extend`` lists its ``extensions``).
Nothing here imports triton.
"""

from __future__ import annotations

import datetime
from typing import Iterable, Mapping, Sequence

from . import calibrate as cal


def probe_pairs(points: Iterable, base_by: Mapping, base_doc: Mapping, epilogue: Mapping) -> dict[str, list]:
    """``{"family/dtype": [(X's point, the base release's), ...]}`` of a record's probe points
    (compiled table points -- design ``table`` -- answer with their own bytes and are no probe)."""
    from .engine_calibrate import base_point

    out: dict[str, list] = {}
    for d in points:
        if d.design == "table":
            continue
        p = d.point
        if p.error and p.error.startswith("setup"):
            continue
        b = base_point(p, base_by, base_doc, epilogue)
        if b is not None:
            out.setdefault(f"{p.family}/{cal.form_dtype(p.path)}", []).append((p, b))
    return out


def records(pairs: Mapping[str, Sequence], stored: Mapping | None, new_archs: Iterable[str], base_doc: Mapping,
            epilogue: Mapping) -> tuple[dict, dict]:
    """``(groups, differing)`` of the merged record (see the module docstring). ``stored``: the
    stored ``reused`` record (None: a first probe); ``new_archs``: the archs this probe adds (a
    stored group's ``not_reused_on`` archs stay apart in any case)."""
    from .engine_calibrate import compare_probe, reuses

    new = set(new_archs)
    old_groups = (stored or {}).get("groups") or {}
    groups: dict[str, dict] = {}
    differing: dict[str, dict] = {}
    for key, ps in sorted(pairs.items()):
        old = old_groups.get(key)
        if old is None:
            rec = compare_probe(ps, base_doc, epilogue)
            (groups if reuses(rec) else differing)[key] = rec
            continue
        apart = set(old.get("not_reused_on") or {}) | new
        main = [pr for pr in ps if pr[0].arch not in apart]
        kept: dict[str, dict] = {}
        for arch in sorted({pr[0].arch for pr in ps} & apart):
            mine = [pr for pr in ps if pr[0].arch == arch]
            arch_rec = compare_probe(mine, base_doc, epilogue)
            if arch in new and arch not in (old.get("not_reused_on") or {}) and reuses(arch_rec):
                main += mine
            else:
                kept[arch] = arch_rec
        rec = compare_probe(main, base_doc, epilogue)
        if not reuses(rec):  # the stored archs no longer prove it (a recount after the base changed)
            differing[key] = compare_probe(ps, base_doc, epilogue)
            continue
        if kept:
            rec["not_reused_on"] = kept
        groups[key] = rec
    return groups, differing


def merge_failures(stored: Mapping, new: Mapping) -> dict:
    """The stored failures and the new archs' (an arch is in one of them only)."""
    out = {arch: dict(per) for arch, per in stored.items()}
    for arch, per in new.items():
        out.setdefault(arch, {}).update(per)
    return dict(sorted(out.items()))


def probed_archs(doc: Mapping) -> set[str]:
    """The archs a release's probe record has probed: its first probe's and each extension's."""
    prov = doc.get("provenance") or {}
    out = set(prov.get("archs") or ())
    for ext in prov.get("probe_extensions") or ():
        out.update(ext.get("archs") or ())
    return out


def extension_record(archs: Sequence[str], triton: str, command: str, seconds: float, points: Sequence,
                     design: Mapping, moved: Mapping) -> dict:
    compiled = sum(1 for d in points if d.point.shared is not None)
    return {"archs": list(archs), "triton": triton, "date": datetime.date.today().isoformat(), "command": command,
            "points": len(points), "compiled": compiled, "failed": len(points) - compiled,
            "seconds": round(seconds, 1), "design": dict(design), "groups": dict(moved),
            "note": "the stored probe points kept as compiled (not recompiled); the new archs' probe points "
                    "added and every group counted again from the merged points (tilefit.smem.engine_probe_merge)"}


def changes(stored: Mapping, groups: Mapping, differing: Mapping) -> dict[str, list[str]]:
    """Which groups the merge added (reused / differing) or extended to a new arch, for the record."""
    old_g, old_d = stored.get("groups") or {}, stored.get("differing") or {}
    out = {"new_reused": sorted(set(groups) - set(old_g)), "new_differing": sorted(set(differing) - set(old_d)),
           "reused_on_more_archs": sorted(k for k in groups if k in old_g
                                          and set(groups[k].get("archs", ())) != set(old_g[k].get("archs", ()))),
           "not_reused_on_new_archs": sorted(k for k in groups if set(groups[k].get("not_reused_on") or {})
                                             - set((old_g.get(k) or {}).get("not_reused_on") or {}))}
    return {k: v for k, v in out.items() if v}
