"""Compile a stored engine calibration's points again and correct the figures that changed.

``calibrate smem --engine SRC --recheck [--arch A] [--recheck-path TEXT]``: every stored compiled
point (and stored failure) of the installed Triton's calibration of ``SRC``'s kernel -- of those
archs, of the dtype paths whose name contains TEXT -- is compiled again with the engine's kernel;
a figure that differs replaces the stored one (a stored failure that compiles now becomes a
figure, and the reverse; a failure's changed wording is not a change). For when a stored figure
is in doubt -- a compile made under a fault since fixed (e.g. descriptor dtypes mixed up by
Triton's specialiser cache, see :func:`tilefit.smem.exact._torch_dtype`). The forms stay; the
proofs of every group a changed point belongs to are counted again on that group's stored points
(strict: a miss on any compiled point leaves its arch unproven, as a candidate round counts), the
failures are drawn again, and the probe records of the releases that reuse this calibration are
re-counted
(:mod:`tilefit.smem.engine_recount`). A release that reuses another's forms (a probe record, ``reused``:
``--triton-python`` with that release) has its probe and table points rechecked the same way and its
probe record re-counted against the base release's forms. The provenance lists each change.
"""

from __future__ import annotations

import datetime
import json
from typing import Callable, Sequence

from .. import versions
from . import calibrate as cal
from . import engine_calibrate as ec


def _stored_design(stored, point) -> str | None:
    """The design of ``point`` among the stored points (identity, else the first equal one)."""
    for d in stored:
        if d.point is point:
            return d.design
    return next((d.design for d in stored if d.point == point), None)


def recheck(source: str, kernel: str, *, archs: Sequence[str] | None = None, paths: Sequence[str] | None = None,
            jobs: int | None = None, cache_dir=None, write: bool = True, command: str = "",
            log: Callable[[str], None] | None = None, progress_factory=None,
            package: bool = False) -> ec.KernelCalibration:
    """Recheck ``kernel``'s stored calibration of ``source`` (see the module's docstring); an arch's
    own form (``formulas[<arch>]``, a borrowed one) keeps its proofs as they were."""
    from .engine_kernels import EngineKernels
    from .engine_source import open_source

    log = log or (lambda m: None)
    triton_version = ec.compile_release()
    tree = open_source(source, cache_dir, log)
    engine, engine_version = tree.engine, tree.version or "unknown"
    if engine is None:
        raise ValueError(f"{source}: cannot tell which engine this is (name a wheel or a vllm/sglang tree)")
    ek = EngineKernels(source, cache_dir=cache_dir, engine=engine, tree=tree)
    read = True if package else None
    fp = ec.forms_path(kernel, engine, engine_version, triton_version, read)
    pp = ec.points_path(kernel, engine, engine_version, triton_version, read)
    if not fp.is_file() or not pp.is_file():
        raise ValueError(f"no calibration of {engine} {engine_version} {kernel} for Triton "
                         f"{versions.major_minor(triton_version)} to recheck ({fp})")
    doc = json.loads(fp.read_text(encoding="utf-8"))
    base = (doc.get("reused") or {}).get("from")  # a probe record: its points are rechecked, then re-counted
    stored = ec.load_points(pp)
    todo = [i for i, d in enumerate(stored) if (not archs or d.point.arch in archs)
            and (not paths or any(x in d.point.path.name for x in paths))]
    log(f"{engine} {engine_version} {kernel}: compiling {len(todo)} stored points again")
    done = ec.compile_points(ek, [stored[i] for i in todo], jobs,
                             progress_factory(f"{kernel}: stored points", len(todo)) if progress_factory else None)
    changed = []
    everything = list(stored)
    for i, d in zip(todo, done):
        old, new = stored[i].point, d.point
        if new.error and new.error.startswith("setup"):
            continue  # our setup failed this time: the stored figure stays
        if old.shared != new.shared:  # a figure, or compiles / does not (a failure's wording is not a change)
            changed.append((old, new))
            everything[i] = ec.Designed(new, stored[i].design)
    for old, new in changed:
        log(f"  {old.arch} {old.path.name} {'x'.join(map(str, old.tile))} w{old.num_warps} s{old.num_stages}: "
            f"{old.shared if old.shared is not None else 'does not compile'} -> "
            f"{new.shared if new.shared is not None else 'does not compile'}")
    groups = {ec.group_key(new) for _old, new in changed}
    limits = cal.device_limits()
    epilogue = ec.shipped_epilogue(triton_version)
    proofs = doc.setdefault("proofs", {})
    for family, k, dtype in sorted(groups):
        text = (doc.get("formulas") or {}).get(family, {}).get(dtype)
        if text is None:
            continue
        mine = [d for d in everything if ec.group_key(d.point) == (family, k, dtype)]
        counted = ec.prove(text, [d.point for d in mine if d.design in ("table", "grid")], epilogue, limits)
        ec.hold_strictly(counted, ec.prove(text, [d.point for d in mine if d.design not in ("table", "grid")],
                                           epilogue, limits))
        proofs.setdefault(family, {})[dtype] = {a: pr.to_json() for a, pr in sorted(counted.items())}
    doc["failures"] = ec.failures_of([d.point for d in everything])
    prov = doc.setdefault("provenance", {})
    if base is None:
        prov["compiled"] = sum(1 for d in everything if d.point.shared is not None)
        prov["failed"] = len(everything) - prov["compiled"]
    elif "compiled" in prov:  # a probe record counts its probe points (its table points are listed apart)
        moved = sum((new.shared is not None) - (old.shared is not None)
                    for old, new in changed if _stored_design(stored, old) != "table")
        prov["compiled"] += moved
        prov["failed"] = max(prov.get("failed", 0) - moved, 0)
    prov.setdefault("rechecked", []).append({
        "date": datetime.date.today().isoformat(), "command": command, "triton": triton_version,
        "points": len(todo), "archs": sorted({stored[i].point.arch for i in todo}),
        "paths": sorted({stored[i].point.path.name for i in todo}),
        "changed": [[old.path.name, old.arch, *old.tile, old.num_warps, old.num_stages, old.shared, new.shared]
                    for old, new in changed],
        "note": "stored points compiled again (tilefit.smem.engine_recheck); a figure that differed was replaced "
                "and the proofs of its group counted again on the stored points"})
    results = {}
    for family, per in (doc.get("formulas") or {}).items():
        for dtype, text in per.items():
            got = {a: ec.Proof(**pr) for a, pr in (proofs.get(family, {}).get(dtype) or {}).items()}
            results[(family, kernel, dtype)] = ec.GroupResult(family, kernel, dtype, text,
                                                              (doc.get("origin") or {}).get(family, {}).get(dtype, "?"),
                                                              got, (doc.get("fits") or {}).get(family, {}).get(dtype))
    kc = ec.KernelCalibration(kernel, results, everything, doc.get("failures") or {}, doc)
    log(f"{kernel}: {len(changed)} of {len(todo)} stored points changed")
    if write and changed:
        kc.written = ec.write_calibration(doc, everything, kernel, engine, engine_version, triton_version, package)
        from .engine_recount import recount

        recount(kernel, engine, engine_version, base or versions.major_minor(triton_version), package=package,
                log=log)
    return kc
