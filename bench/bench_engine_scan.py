"""Benchmark: ``tilefit check`` over an engine's real package (issue 18's speed and coverage targets).

For each tree (default: sglang 0.5.23 and vLLM 0.33.0 unpacked under /work/engines/src; never
copied into the repo) runs, each in a fresh process and side by side:

1. **cold**: an empty tilefit cache folder (every distinct launch compiled);
2. **warm**: the same command again on that cache;

with ``--target consumer --statistics`` (and ``--scenario`` values when given), and prints
seconds, CPU seconds (user + system of the process and its compile children, ``wait4``), the
load average at start and end, peak memory (``wait4``'s ``ru_maxrss``: the largest of the
process and the compile children it waited for) and the call-site coverage ``--statistics`` reports, each next to
its target as a ratio: cold under 300 s, warm under 15 s, peak memory under 1 GiB, at least 90%
of the launch sites of known kernels evaluated.

    python bench/bench_engine_scan.py --record                      # both engines
    python bench/bench_engine_scan.py --tree /path/to/sglang --scenario all --timeout 1800
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_name

HERE = Path(__file__).resolve().parent
TREES = {
    "sglang 0.5.23": Path("/work/engines/src/sglang-0.5.23/sglang"),
    "vllm 0.33.0": Path("/work/engines/src/vllm-0.33.0/vllm"),
}
TARGETS = {"cold": 300.0, "warm": 15.0}
MEMORY_TARGET_MB = 1024.0
COVERAGE_TARGET = 0.90


def run_once(tree: Path, cache: Path, args, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "tilefit", "check", str(tree), "--target", args.target, "--statistics",
           "--isolated", "--exit-zero"]
    for s in args.scenario:
        cmd += ["--scenario", s]
    if args.select:
        cmd += ["--select", args.select]
    env = dict(os.environ, TILEFIT_CACHE_DIR=str(cache))
    out_path = cache.parent / f"out-{time.monotonic_ns()}.txt"
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    with open(out_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tree.parent)
        deadline = t0 + timeout
        status = rusage = None
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, rusage = os.wait4(proc.pid, 0)
                status = None
                break
            time.sleep(0.2)
    seconds = time.perf_counter() - t0
    text = out_path.read_text(errors="replace")
    m = re.search(r"call sites: (\d+) found, (\d+) evaluated", text)
    return {"seconds": seconds, "rss_mb": rusage.ru_maxrss / 1024.0, "timed_out": status is None,
            "cpu": rusage.ru_utime + rusage.ru_stime, "load": (load0, os.getloadavg()[0]),
            "found": int(m.group(1)) if m else None, "evaluated": int(m.group(2)) if m else None,
            "text": text}


def ratio(value: float | None, target: float) -> str:
    return f"{value / target:.2f}x" if value is not None else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", default=[], help="package folder (repeatable; default: both engines)")
    ap.add_argument("--target", default="consumer")
    ap.add_argument("--scenario", action="append", default=[])
    ap.add_argument("--select", default=None, help="rule codes (e.g. SMEM002,SMEM003,EST002: the call-site rules only)")
    ap.add_argument("--timeout", type=float, default=1500.0, help="seconds per run before it is stopped")
    ap.add_argument("--record", action="store_true", help="append the table to bench/RESULTS.md")
    ap.add_argument("--keep-cache", metavar="DIR", default=None,
                    help="put each tree's cache folder under DIR (DIR/<n>/cache, must not exist) and keep it, "
                         "to compare reports or time later runs on the same compiles")
    args = ap.parse_args()
    trees = {str(p): Path(p) for p in args.tree} if args.tree else {k: v for k, v in TREES.items() if v.is_dir()}
    rows = []
    reasons = {}
    for n, (name, tree) in enumerate(trees.items()):
        if args.keep_cache:
            work = Path(args.keep_cache) / str(n)
            work.mkdir(parents=True)
        else:
            work = Path(tempfile.mkdtemp(prefix="tilefit-bench-"))
        try:
            cache = work / "cache"
            for mode in ("cold", "warm"):
                r = run_once(tree, cache, args, args.timeout)
                rows.append((name, mode, r))
                print(f"{name} {mode}: {r['seconds']:.1f} s, {r['cpu']:.1f} s CPU, load {r['load'][0]:.1f}-"
                      f"{r['load'][1]:.1f}, {r['rss_mb']:.0f} MB, "
                      f"{r['evaluated']}/{r['found']} evaluated{' (stopped)' if r['timed_out'] else ''}",
                      flush=True)
                if r["timed_out"]:
                    break
            reasons[name] = [ln for ln in rows[-1][2]["text"].splitlines()
                             if ln.startswith("call sites:") or "not evaluated:" in ln or ln.startswith("  launches")]
        finally:
            if not args.keep_cache:
                shutil.rmtree(work, ignore_errors=True)
    files = {name: sum(1 for _ in tree.rglob("*.py")) for name, tree in trees.items()}
    lines = ["| tree | run | seconds | vs target | CPU s | load | peak MB | vs 1024 MB | sites evaluated | vs 90% |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, mode, r in rows:
        cov = r["evaluated"] / r["found"] if r["found"] else None
        secs = f"{r['seconds']:.1f}" + (" (stopped)" if r["timed_out"] else "")
        lines.append(f"| {name} ({files[name]} .py) | {mode} | {secs} | {ratio(r['seconds'], TARGETS[mode])} | "
                     f"{r['cpu']:.0f} | {r['load'][0]:.1f}-{r['load'][1]:.1f} | "
                     f"{r['rss_mb']:.0f} | {ratio(r['rss_mb'], MEMORY_TARGET_MB)} | "
                     f"{r['evaluated'] if r['evaluated'] is not None else '-'} of {r['found'] if r['found'] is not None else '-'}"
                     f"{f' ({100 * cov:.1f}%)' if cov is not None else ''} | "
                     f"{ratio(cov, COVERAGE_TARGET) if cov is not None else '-'} |")
    table = "\n".join(lines)
    print(table)
    for name, text in reasons.items():
        print(f"\n{name}:\n" + "\n".join(text))
    if args.record:
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        load = os.getloadavg()[0]
        scen = f"; scenarios {', '.join(args.scenario)}" if args.scenario else "; no scenario"
        scen += f"; --select {args.select}" if args.select else ""
        block = [f"\n## Engine trees (`bench/bench_engine_scan.py`), {when}\n",
                 f"Machine: {platform.platform()}, {cpu_name()}, {os.cpu_count()} cores, Python "
                 f"{platform.python_version()}, load {load:.1f} at the end. `tilefit check PKG --target "
                 f"{args.target} --statistics`{scen}. Ratios are measured value / target (below 1 meets it).\n",
                 table, ""]
        for name, text in reasons.items():
            block += [f"{name}:", "", "```", *text, "```", ""]
        with open(HERE / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write("\n".join(block))


if __name__ == "__main__":
    main()
