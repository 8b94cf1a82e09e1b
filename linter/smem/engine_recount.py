"""Re-count the probe records of the releases that reuse a calibration, after its forms change.

A Triton release X without a calibration of its own (``calibrate smem --probe-from``) ships its
probe record (``reused``: per group, X's compiled probe points compared with the base release's
compiles, or with the base release's *form* where the base never compiled the point) and X's
probe points. When the base release's forms change (``--candidates`` takes a written form), the
comparisons with the base form change with them: this module counts every such record again from
the stored points -- no compile, no Triton -- exactly as the probe counted it
(:func:`tilefit.smem.engine_calibrate.compare_probe`), and moves a group between ``groups``
(reuses the base forms) and ``differing``. A group that X calibrated afresh (a form of X's own)
keeps its own form and record.
"""

from __future__ import annotations

import datetime
import json
from typing import Callable

from tilefit.atomicfile import write_atomic

from . import calibrate as cal
from . import engine_calibrate as ec
from . import engine_files as files
from . import engine_probe_merge as pm


def _releases(kernel: str, engine: str, version: str) -> list[str]:
    """The releases with a forms file of this engine release (the package's and the user's)."""
    out = set()
    for folder in (files.package_dir(kernel, engine, version), files.user_dir(kernel, engine, version)):
        if folder is not None and folder.is_dir():
            out.update(fp.name[len("triton-"):-len(".json")] for fp in folder.glob("triton-*.json"))
    return sorted(out)


def recount(kernel: str, engine: str, version: str, base: str, *, package: bool = False,
            write: bool = True, log: Callable[[str], None] | None = None) -> dict[str, dict]:
    """Re-count the probe record of every release whose ``reused.from`` is ``base``; returns
    ``{release: {"reused": [...], "differing": [...]}}`` of the groups that changed side. Reads
    each file where the model reads it and writes a changed record (``write``) where the base's
    calibration is written (the package's data with ``package``, else the user data folder's,
    with the release's probe points copied beside it)."""
    log = log or (lambda m: None)
    base_doc = json.loads(ec.forms_path(kernel, engine, version, base, True if package else None)
                          .read_text(encoding="utf-8"))
    base_by = {cal._ident(d.point): d.point
               for d in ec.load_points(ec.points_path(kernel, engine, version, base, True if package else None))}
    epilogue = ec.shipped_epilogue(base)
    changed: dict[str, dict] = {}
    for rel in _releases(kernel, engine, version):
        fp = ec.forms_path(kernel, engine, version, rel, True if package else None)
        pp = ec.points_path(kernel, engine, version, rel, True if package else None)
        if not fp.is_file():
            continue
        doc = json.loads(fp.read_text(encoding="utf-8"))
        rec = doc.get("reused") or {}
        if rec.get("from") != base or not rec.get("min_points") or not pp.is_file():
            continue
        # compiled table points answer with their own bytes: not the probe (probe_pairs skips them)
        pairs = pm.probe_pairs(ec.load_points(pp), base_by, base_doc, epilogue)
        own = {f"{fam}/{dtype}" for fam, per in (doc.get("formulas") or {}).items() for dtype in per}
        groups, differing = dict(rec.get("groups") or {}), dict(rec.get("differing") or {})
        moved = {"reused": [], "differing": []}
        # an arch an extension kept apart (not_reused_on) stays apart: pm.records counts it on its own
        got_groups, got_differing = pm.records({k: v for k, v in pairs.items() if k not in own}, rec, (),
                                               base_doc, epilogue)
        for key in sorted(set(pairs) - own):
            if key in got_groups:
                if key not in groups:
                    moved["reused"].append(key)
                differing.pop(key, None)
                groups[key] = got_groups[key]
            else:
                if key in groups:
                    moved["differing"].append(key)
                groups.pop(key, None)
                differing[key] = got_differing[key]
        new = dict(rec, groups=dict(sorted(groups.items())), differing=dict(sorted(differing.items())))
        if new["groups"] == (rec.get("groups") or {}) and new["differing"] == (rec.get("differing") or {}):
            continue
        if moved["reused"] or moved["differing"]:
            changed[rel] = moved
        log(f"{kernel} {engine} {version} Triton {rel}: probe record re-counted against {base}'s forms"
            + (f"; now reused: {', '.join(moved['reused'])}" if moved["reused"] else "")
            + (f"; now differing: {', '.join(moved['differing'])}" if moved["differing"] else ""))
        if write:
            new["recounted"] = {"date": datetime.date.today().isoformat(), "against": f"the forms of Triton {base}",
                                "note": "re-counted from the stored probe points after the base release's calibration "
                                        "changed (tilefit.smem.engine_recount); nothing compiled"}
            doc["reused"] = new
            out_fp = ec.forms_path(kernel, engine, version, rel, package)
            out_pp = ec.points_path(kernel, engine, version, rel, package)
            if out_pp != pp:
                out_pp.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(out_pp, pp.read_text(encoding="utf-8"))
            ec.write_forms(doc, out_fp)
    if write and changed:
        from . import engine_model

        engine_model.forget()
    return changed

