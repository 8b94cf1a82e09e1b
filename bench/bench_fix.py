"""Fixer time for the whole corpus, next to the check time, in the same run.

    python bench/bench_fix.py                     # consumer targets, analytic estimator
    python bench/bench_fix.py --record            # also append a section to bench/RESULTS.md

Each repetition works on a fresh copy of the corpus and a fresh engine (no memo carried over;
module-level caches such as the analytic model and the config lattices stay warm after the first
repetition, as in a long-lived process). Timed, per repetition:

* ``check``: ``run_check`` without fix planning (what CI's plain lint costs);
* ``check+plan``: ``run_check`` with fixes planned (the concise output's ``[*]`` marks);
* ``fix``: ``run_fix`` with writes (check, plan, splice, verify, atomic write);
* ``fix again``: the second, no-op run on the fixed copy.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def corpus_root(tmp: Path) -> Path:
    env = os.environ.get("TILEFIT_CORPUS")
    if env:
        return Path(env)
    shared = REPO.parent / "shared" / "corpus"
    if (shared / "README.md").is_file():
        return shared
    with tarfile.open(REPO / "tests" / "data" / "corpus.tar.xz") as tar:
        tar.extractall(tmp / "extracted", filter="data")
    return tmp / "extracted" / "corpus"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = "load %.1f" % os.getloadavg()[0]
    except OSError:
        load = ""
    return f"{platform.node() or 'host'}: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {load}"


def one(source: Path, work: Path, targets: list[str], estimator: str) -> dict:
    from tilefit.api import CheckOptions, run_check
    from tilefit.fix import run_fix

    root = work / "corpus"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(source, root)
    for p in root.rglob("*.json"):
        p.chmod(0o644)
    opts = dict(targets=targets, estimator=estimator)
    out = {}
    t = time.perf_counter()
    check = run_check([str(root)], CheckOptions(**opts))
    out["check"] = time.perf_counter() - t
    t = time.perf_counter()
    run_check([str(root)], CheckOptions(fix=True, **opts))
    out["check+plan"] = time.perf_counter() - t
    t = time.perf_counter()
    fixed = run_fix([str(root)], CheckOptions(**opts))
    out["fix"] = time.perf_counter() - t
    t = time.perf_counter()
    again = run_fix([str(root)], CheckOptions(**opts))
    out["fix again"] = time.perf_counter() - t
    out["files"] = check.files_checked
    out["entries"] = check.engine.stats.entries
    out["smem001"] = sum(1 for d in check.diagnostics if d.code == "SMEM001")
    out["fixed"] = sum(fixed.fixed.values())
    out["files changed"] = len(fixed.files)
    out["errors"] = len(fixed.errors) + len(again.files)
    out["left"] = sum(1 for d in fixed.check.diagnostics if d.code in ("SMEM001", "THR001"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", "-t", action="append", dest="targets", help="default: consumer")
    ap.add_argument("--estimator", default="analytic")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--record", action="store_true", help="append the results to bench/RESULTS.md")
    args = ap.parse_args(argv)
    targets = args.targets or ["consumer"]
    with tempfile.TemporaryDirectory(prefix="tilefit-bench-") as tmp:
        tmp_path = Path(tmp)
        os.environ.setdefault("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
        source = corpus_root(tmp_path)
        runs = [one(source, tmp_path, targets, args.estimator) for _ in range(max(1, args.repeat))]
    keys = ("check", "check+plan", "fix", "fix again")
    first = runs[0]
    rows = [f"| {k} | {first[k]:.2f} | {statistics.median(r[k] for r in runs):.2f} | "
            f"{min(r[k] for r in runs):.2f} |" for k in keys]
    header = (f"corpus: {first['files']} files, {first['entries']} entries; targets {', '.join(targets)}; "
              f"estimator {args.estimator}; {first['smem001']} SMEM001, {first['fixed']} fixed in "
              f"{first['files changed']} files, {first['left']} left, {first['errors']} errors")
    table = ["| step | first run, s | median of %d, s | best, s |" % len(runs), "|---|---:|---:|---:|"] + rows
    print(header)
    print("\n".join(table))
    ratio = statistics.median(r["fix"] / r["check"] for r in runs)
    print(f"fix / check time: {ratio:.1f}x")
    if args.record:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        section = [f"## bench_fix.py, {stamp}", "", f"Machine: {machine()}.", "", header + ".", ""] + table + [
            "", f"`fix` takes {ratio:.1f}x the time of `check` (median).", ""]
        results = REPO / "bench" / "RESULTS.md"
        existing = results.read_text() if results.exists() else "# Benchmark results\n\nAppend-only.\n\n"
        results.write_text(existing.rstrip("\n") + "\n\n" + "\n".join(section))
        print(f"recorded in {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
