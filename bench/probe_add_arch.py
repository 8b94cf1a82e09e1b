"""Add archs to the stored probe of a Triton release that reuses another release's forms.

A release probed with ``calibrate smem --probe-from 3.9 --arch ...`` reuses 3.9's forms only on
the archs its probe compared (``reused.groups[...].archs``): an arch left out (sm_110 in the 3.5-3.8
probes) has no proven answer there. Running the probe again with ``--arch sm_110`` would write a
file with sm_110's groups only; this script instead compiles the probe set of the new archs
(:func:`tilefit.smem.engine_calibrate.probe_set`, drawn from the base release's points of those
archs, deterministic) with the release's Triton, appends them to the release's stored probe points
and re-counts the probe record from all stored points (:func:`tilefit.smem.engine_recount.recount`,
the comparison the probe itself makes). A group reuses the base forms on the new arch only when
every compiled probe point of it there gives the base release's bytes. The provenance lists each
extension (archs, points, compiled, seconds, command, date).

    nice -n 15 python bench/probe_add_arch.py --kernel fused_moe --engine sglang \\
        --release 3.5=/tmp/t350/bin/python --arch sm_110 --scale 0.5 --cache-dir DIR -j 2
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time

ENGINES = {
    "vllm": ("/work/engines/wheels/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl", "0.33.0"),
    "sglang": ("/work/engines/wheels/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl", "0.5.23"),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", required=True)
    ap.add_argument("--engine", required=True, choices=sorted(ENGINES))
    ap.add_argument("--release", action="append", required=True, metavar="X.Y=PYTHON")
    ap.add_argument("--arch", action="append", required=True)
    ap.add_argument("--base", default="3.9")
    ap.add_argument("--scale", type=float, default=None,
                    help="probe points per (path, arch) as a share of PROBE_PER [default: the release's own probe's]")
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)

    from tilefit.smem import calibrate as cal
    from tilefit.smem import engine_calibrate as ec
    from tilefit.smem import engine_recount, interpreter
    from tilefit.smem.engine_kernels import EngineKernels

    wheel, version = ENGINES[args.engine]
    base_pts = [d for d in ec.load_points(ec.points_path(args.kernel, args.engine, version, args.base, True))
                if d.point.arch in args.arch]
    for rel in args.release:
        name, python = rel.split("=", 1)
        fp = ec.forms_path(args.kernel, args.engine, version, name, True)
        pp = ec.points_path(args.kernel, args.engine, version, name, True)
        doc = json.loads(fp.read_text(encoding="utf-8"))
        if (doc.get("reused") or {}).get("from") != args.base:
            print(f"{fp}: does not reuse Triton {args.base}'s forms; skipped", flush=True)
            continue
        per = (doc.get("provenance") or {}).get("design", {}).get("probe_per", ec.PROBE_PER)
        scale = args.scale if args.scale is not None else per / ec.PROBE_PER
        # risk tiles are drawn on an arch family's first arch, which the release's own probe held
        probe, _risky = ec.probe_set(base_pts, scale, 0.0)
        interpreter.use(python)
        have = interpreter.compile_triton_version()
        if versions_mm(have) != name:
            raise SystemExit(f"{python} compiles with Triton {have}, not {name}")
        ek = EngineKernels(wheel, cache_dir=args.cache_dir, engine=args.engine)
        t0 = time.perf_counter()
        done = ec.compile_points(ek, probe, args.jobs)
        seconds = time.perf_counter() - t0
        compiled = sum(d.point.shared is not None for d in done)
        setup = [d for d in done if d.point.error and d.point.error.startswith("setup")]
        print(f"{name} ({have}) {args.engine} {args.kernel} {','.join(args.arch)}: {len(done)} probe points, "
              f"{compiled} compiled, {len(done) - compiled - len(setup)} do not compile, {len(setup)} setup errors, "
              f"{seconds:.0f} s", flush=True)
        if setup:
            print("  first setup error:", setup[0].point.error[:300], flush=True)
        if args.dry_run:
            continue
        stored = ec.load_points(pp)
        known = {cal._ident(d.point) for d in stored}
        fresh = [d for d in done if cal._ident(d.point) not in known]
        ec.write_points(ec.dump_points(stored + fresh, kernel=args.kernel, engine=args.engine,
                                       engine_version=version, triton_version=have), pp)
        moved = engine_recount.recount(args.kernel, args.engine, version, args.base, package=True,
                                       log=lambda m: print("  " + m, flush=True))
        doc = json.loads(fp.read_text(encoding="utf-8"))
        ext = doc.setdefault("provenance", {}).setdefault("probe_extensions", [])
        ext.append({"archs": sorted(args.arch), "points": len(done), "compiled": compiled,
                    "seconds": round(seconds), "date": datetime.date.today().isoformat(),
                    "command": "python bench/probe_add_arch.py " + " ".join(argv or sys.argv[1:]),
                    "note": "probe points of these archs added to the stored probe (no risk tiles: those are "
                            "drawn on each arch family's first arch), record re-counted from all stored points"})
        ec.write_forms(doc, fp)
        for key, rec in sorted(((doc.get("reused") or {}).get("groups") or {}).items()):
            print(f"  reused {key}: {rec}", flush=True)
        for key, rec in sorted(((doc.get("reused") or {}).get("differing") or {}).items()):
            if any(a in (rec.get("archs") or ()) for a in args.arch):
                print(f"  differing {key}: {rec}", flush=True)
        print(f"  moved: {moved}", flush=True)
    return 0


def versions_mm(v: str) -> str:
    from tilefit import versions

    return versions.major_minor(v)


if __name__ == "__main__":
    sys.exit(main())
