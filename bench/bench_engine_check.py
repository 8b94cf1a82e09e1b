"""`tilefit check` over the corpus with a fresh cache and Triton installed, default settings
(``--estimator auto``), side by side with a bare ``json.load`` loop over the same files (issue 17's
target: under 10x the bare loop cold -- nothing compiled -- with each file's own device and with
``--target consumer``; under 3x warm). Each measurement runs in its own process (a cold run must
start with nothing in memory); the bare loop and the checks are interleaved round by round and
the printed ratios are of medians (in-process wall time, and apart the process's CPU time, which
other jobs on the cores inflate less; a split check's workers' CPU is not in it), the spread is (max - min) / median of a row's rounds. Peak
memory is each process's maximum resident set, and apart its largest child's (a split check's
workers, :mod:`tilefit.parallel`, or a compile); ``workers`` lists, per round, how many the check was split over (1:
serial, as on a machine whose cores other jobs keep busy; ``$TILEFIT_JOBS`` sets it).
Every run reads tilefit's bytecode from a folder that priming runs (one per case, before the rounds)
wrote, as an installed package has it: with ``PYTHONDONTWRITEBYTECODE`` set (as on the shared
machine) each run would otherwise compile the modules it imports lazily from source, a third of a
second that is no part of a check (``--no-bytecode`` keeps the environment's setting).

    python bench/bench_engine_check.py [CORPUS] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_name, load  # noqa: E402


def _paths(root: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith(".json"))


def worker(kind: str, root: str, targets: list[str]) -> dict:
    if kind == "bare":
        paths = _paths(root)
        c = time.process_time()
        t = time.perf_counter()
        for p in paths:
            with open(p, "rb") as fh:
                json.load(fh)
        seconds = time.perf_counter() - t
        cpu = time.process_time() - c
        extra: dict = {"files": len(paths)}
    else:
        from tilefit.api import CheckOptions, build_engine, run_check
        from tilefit.config import Settings

        c = time.process_time()
        t = time.perf_counter()
        settings = Settings()
        opts = CheckOptions(targets=targets)
        engine = build_engine(settings, opts)
        result = run_check([root], opts, settings, engine)
        seconds = time.perf_counter() - t
        cpu = time.process_time() - c
        from tilefit import parallel

        extra = {"diagnostics": len(result.diagnostics), "files": result.files_checked,
                 "compiles": engine.estimator.compiles, "estimator": engine.estimator.mode,
                 "jobs": parallel.last_jobs}
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child's: workers, compiles
    return {"seconds": seconds, "cpu": cpu, "peak_mib": peak / 1024, "child_mib": child / 1024, **extra}


def run(kind: str, root: str, targets: list[str], cache: str, pycache: str | None = None) -> dict:
    env = dict(os.environ, TILEFIT_CACHE_DIR=cache)
    if pycache is not None:  # bytecode as an installed package has it (pip compiles it at install time)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    args = [sys.executable, __file__, "--worker", kind, root] + [a for t in targets for a in ("--target", t)]
    t = time.perf_counter()
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    doc["wall"] = wall
    return doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpus"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", default=None)
    ap.add_argument("--target", action="append", default=[])
    ap.add_argument("--no-bytecode", action="store_true",
                    help="run as the environment says (with PYTHONDONTWRITEBYTECODE set, every run compiles "
                         "tilefit's modules from source, which an installed package never does)")
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.corpus, args.target)))
        return 0
    from tilefit import versions

    cases = {"own device": [], "--target consumer": ["consumer"]}
    pycache = None
    if not args.no_bytecode:
        # one priming run writes the bytecode (outside the rounds); every measured run reads it
        pycache = tempfile.mkdtemp(prefix="tilefit-bench-pyc-")
        for targets in cases.values():
            run("check", args.corpus, targets, tempfile.mkdtemp(prefix="tilefit-bench-"), pycache)
    rows: dict[str, list[dict]] = {"bare": []}
    for name in cases:
        rows[f"cold, {name}"] = []
        rows[f"warm, {name}"] = []
    for _ in range(args.rounds):
        rows["bare"].append(run("bare", args.corpus, [], tempfile.mkdtemp(), pycache))
        for name, targets in cases.items():
            cache = tempfile.mkdtemp(prefix="tilefit-bench-")  # a fresh cache: nothing compiled, nothing stored
            rows[f"cold, {name}"].append(run("check", args.corpus, targets, cache, pycache))
            rows[f"warm, {name}"].append(run("check", args.corpus, targets, cache, pycache))
    bare = statistics.median(r["seconds"] for r in rows["bare"])
    bare_wall = statistics.median(r["wall"] for r in rows["bare"])
    bare_cpu = statistics.median(r["cpu"] for r in rows["bare"])
    print(f"corpus {args.corpus}: {rows['bare'][0]['files']} files; Triton {versions.installed_triton()}; "
          f"medians of {args.rounds} interleaved rounds, one process per run")
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, {load()}")
    print("bytecode: " + ("as the environment says (--no-bytecode)" if pycache is None else
                          f"compiled once before the rounds, as installed ({pycache})"))
    print(f"{'run':32} {'in-process':>11} {'ratio':>7} {'CPU':>8} {'ratio':>7} {'process wall':>13} {'ratio':>7} {'peak RSS':>9} "
          f"{'compiles':>8} {'diagnostics':>11} {'spread':>7} {'workers':>8} {'child RSS':>9}")

    def spread(rs) -> str:  # (max - min) / median of the in-process times over the rounds: the noise band
        xs = [r["seconds"] for r in rs]
        return f"{(max(xs) - min(xs)) / statistics.median(xs) * 100:6.0f}%"

    print(f"{'bare json.load loop':32} {bare * 1000:9.0f}ms {1.0:6.1f}x {bare_cpu * 1000:6.0f}ms {1.0:6.1f}x "
          f"{bare_wall:12.2f}s {1.0:6.1f}x "
          f"{statistics.median(r['peak_mib'] for r in rows['bare']):7.0f}MB {'':8} {'':11} {spread(rows['bare'])}")
    for name, rs in rows.items():
        if name == "bare":
            continue
        s = statistics.median(r["seconds"] for r in rs)
        w = statistics.median(r["wall"] for r in rs)
        cpu = statistics.median(r["cpu"] for r in rs)  # the check's process only (a split's workers not counted)
        print(f"{name:32} {s * 1000:9.0f}ms {s / bare:6.1f}x {cpu * 1000:6.0f}ms {cpu / bare_cpu:6.1f}x {w:12.2f}s {w / bare_wall:6.1f}x "
              f"{max(r['peak_mib'] for r in rs):7.0f}MB {max(r['compiles'] for r in rs):8d} "
              f"{rs[0]['diagnostics']:11d} {spread(rs)} {'/'.join(str(r.get('jobs', 1)) for r in rs):>8} "
              f"{max(r.get('child_mib', 0) for r in rs):7.0f}MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
