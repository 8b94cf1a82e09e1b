"""Compile SGLang's fused MoE TMA launches that a check of the corpus judges on CUDA archs without
a TMA unit (sm_80-sm_89), with the Triton release each table's folder names, and store them as
compiled points (design ``table``) of that release's record
(``kernels/fused_moe/smem/sglang-<v>/points-triton-X.Y.json``), with a provenance record.

Why: SGLang takes a table's ``USE_TMA`` wherever Triton has host tensor descriptors; below sm_90
Triton lowers them to pointer loads, a kernel whose shared memory no form covers yet (28672 B for
the B300 ``triton_3_7_1`` entry 16x64x128 w4 s6 on sm_89, where our plain kernel needs 102400).
A check answers a stored point with its compiled bytes (``EngineModel.compiled``), so these
entries are judged with the engine's own figure instead of our plain kernel's form, and no
compile is made. Entries off the corpus keep the plain form (the estimate says so).

    python bench/sglang_tma_table_points.py --engine SGLANG_WHEEL --corpus ../shared/corpus \\
        --triton-python 3.4=PY --triton-python 3.5=PY ... [-j 2]

One child per release (``$TILEFIT_TRITON_PYTHON``: an environment with that Triton only, as
``calibrate smem --triton-python``). Nothing of the engine is imported (its kernel is taken by AST).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time


def _items(corpus: list[str]) -> dict[str, list]:
    from tilefit.app import touched_items
    from tilefit.estimate import _has_tma
    from tilefit.smem import calibrate as cal

    out: dict[str, dict] = {}
    for spec, arch in touched_items(corpus):
        if spec.kernel != "fused_moe" or spec.engine != "sglang" or "tma" not in dict(spec.extra) or _has_tma(arch):
            continue
        if not spec.triton:
            continue  # the installed release: its own calibration (not a probe record) answers
        pt = cal.spec_point(spec.reference, arch)
        if pt is not None:
            out.setdefault(spec.triton, {})[cal._ident(pt)] = pt
    return {k: list(v.values()) for k, v in out.items()}


def release(engine: str, rel: str, points_json: str, jobs: int, command: str) -> dict:
    """In the child: compile ``points_json``'s points with this process's Triton (``rel``) and add
    them to the release's record."""
    from tilefit import versions
    from tilefit.smem import calibrate as cal
    from tilefit.smem import engine_calibrate as ec
    from tilefit.smem import engine_extend
    from tilefit.smem.engine_kernels import EngineKernels

    got = ec.compile_release()
    if versions.major_minor(got) != rel:
        raise SystemExit(f"the compiles' Triton is {got}, not {rel}")
    wanted = []
    for row in json.loads(points_json):
        path = cal.Path.from_json(row["path"])
        wanted.append(cal.Point(path, tuple(row["tile"]), row["w"], row["s"], row["arch"]))
    fp = ec.forms_path("fused_moe", "sglang", "0.5.23", rel, True)
    pp = ec.points_path("fused_moe", "sglang", "0.5.23", rel, True)
    doc = json.loads(fp.read_text(encoding="utf-8"))
    stored = ec.load_points(pp)
    have = {cal._ident(d.point) for d in stored}
    todo = [ec.Designed(p, "table") for p in wanted if cal._ident(p) not in have]
    ek = EngineKernels(engine, engine="sglang")
    t0 = time.perf_counter()
    done = ec.compile_points(ek, todo, jobs)
    done = [d for d in done if not (d.point.error or "").startswith("setup")]
    everything = engine_extend.merged_points(stored, done)
    compiled = sum(1 for d in done if d.point.shared is not None)
    prov = doc.setdefault("provenance", {})
    prov.setdefault("table_points", []).append({
        "date": datetime.date.today().isoformat(), "command": command, "triton": got,
        "archs": sorted({d.point.arch for d in done}), "points": len(done), "compiled": compiled,
        "failed": len(done) - compiled, "seconds": round(time.perf_counter() - t0, 1),
        "note": "SGLang's USE_TMA launches a check of the corpus judges on CUDA archs without a TMA unit (the "
                "descriptors lowered to pointer loads), compiled with this release and stored as design 'table': "
                "answered with their compiled bytes; not part of the probe record (the groups' reuse is unchanged)"})
    ec.write_points(ec.dump_points(everything, kernel="fused_moe", engine="sglang", engine_version="0.5.23",
                                   triton_version=got), pp)
    ec.write_forms(doc, fp)
    return {"release": rel, "points": len(done), "compiled": compiled, "already": len(wanted) - len(todo)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--corpus", action="append", required=True)
    ap.add_argument("--triton-python", action="append", default=[], metavar="X.Y=PY")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--child", nargs=2, metavar=("REL", "POINTS_JSON_FILE"))
    ap.add_argument("--command", default="")
    args = ap.parse_args(argv)
    if args.child:
        rel, f = args.child
        with open(f, encoding="utf-8") as fh:
            print(json.dumps(release(args.engine, rel, fh.read(), args.jobs, args.command)))
        return 0
    pythons = dict(x.split("=", 1) for x in args.triton_python)
    command = "python bench/sglang_tma_table_points.py " + " ".join(argv or sys.argv[1:])
    import tempfile

    for rel, pts in sorted(_items(args.corpus).items()):
        if rel not in pythons:
            print(f"Triton {rel}: {len(pts)} points, no --triton-python {rel}=PY: skipped")
            continue
        rows = [{"path": p.path.to_json(), "tile": list(p.tile), "w": p.num_warps, "s": p.num_stages, "arch": p.arch}
                for p in pts]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
            json.dump(rows, fh)
        env = dict(os.environ, TILEFIT_TRITON_PYTHON=pythons[rel])
        out = subprocess.run([sys.executable, __file__, "--engine", args.engine, "--corpus", args.corpus[0],
                              "-j", str(args.jobs), "--command", command, "--child", rel, fh.name],
                             env=env, capture_output=True, text=True)
        os.unlink(fh.name)
        if out.returncode:
            print(out.stderr[-3000:])
            return out.returncode
        print(out.stdout.strip().splitlines()[-1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
