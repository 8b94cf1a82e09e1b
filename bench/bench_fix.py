"""Fixer time for the whole corpus, next to the check time, in the same run.

    python bench/bench_fix.py                     # consumer targets, analytic estimator
    python bench/bench_fix.py --record            # also append a section to bench/RESULTS.md

Each repetition works on a fresh copy of the corpus and a fresh engine (no memo carried over;
module-level caches such as the analytic model and the config lattices stay warm after the first
repetition, as in a long-lived process). Timed, per repetition:

* ``check``: ``run_check`` without fix planning (what CI's plain lint costs);
* ``check+marks``: ``run_check`` with fixes planned without ranking (plain ``check``'s ``[*]``);
* ``check+plan``: ``run_check`` with fixes planned and ranked (``--output-format json``);
* ``fix``: ``run_fix`` with writes (check, plan, splice, verify, atomic write);
* ``fix again``: the second, no-op run on the fixed copy.

``--sweep FILE`` (a JSON-lines file of measured kernel times, one object per line with
``dtype``, ``M``, ``config``, ``time_us``, as ``bench/tune_h200.py``'s sweep phase writes for the
Qwen3-30B-A3B gate/up GEMM on an H200 with every config that fits sm_89) also scores the
fixer's GPU-free picks: an H200 table whose entries are SGLang's old default (fp8) / a
128x256x64 s4 config (bf16) at every batch size is fixed for the RTX 4090, and the picks' and the
naive fix's measured times are compared with the best fitting config's.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from corpus_root import corpus_root
from machine import cpu_name, load

REPO = Path(__file__).resolve().parents[1]


def machine() -> str:
    return (f"{platform.node() or 'host'}: {cpu_name()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, {load()}")


def one(source: Path, work: Path, targets: list[str], estimator: str) -> dict:
    from tilefit.api import CheckOptions
    from tilefit.app import run_check, run_fix

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
    run_check([str(root)], CheckOptions(fix=True, fix_rank=False, **opts))
    out["check+marks"] = time.perf_counter() - t
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


SWEEP_OFFENDING = {
    "fp8_w8a8": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32,
                 "num_warps": 8, "num_stages": 4},
    "bf16": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
             "num_warps": 8, "num_stages": 4},
}
SWEEP_FILES = {"fp8_w8a8": "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
               "bf16": "E=128,N=768,device_name=NVIDIA_H200.json"}
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def score_picks(sweep: Path, work: Path) -> tuple[list[str], dict]:
    """The fixer's picks and the naive fix against measured times (speed = best / time)."""
    import json

    from tilefit.app import compare_fixes

    meas: dict[tuple, float] = {}
    for line in sweep.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("status", "ok") == "ok" and r.get("time_us"):
            meas[(r["dtype"], r["M"], tuple(r["config"][k] for k in KEYS))] = r["time_us"]

    def lookup(dtype, M, cfg):
        key = tuple(cfg.get(k) for k in KEYS)
        if (dtype, M, key) in meas:
            return meas[(dtype, M, key)], ""
        for g in (16, 1):  # GROUP_SIZE_M barely matters here; the sweep has 1 and 16
            alt = key[:3] + (g,) + key[4:]
            if (dtype, M, alt) in meas:
                return meas[(dtype, M, alt)], f" (G{g} measured)"
        return None, " (not measured)"

    Ms = sorted({m for _, m, _ in meas})
    rows = ["| dtype | M | fixer's pick | speed | naive fix | speed |", "|---|---:|---|---:|---|---:|"]
    chosen, naive = [], []
    for dtype, name in SWEEP_FILES.items():
        if not any(d == dtype for d, _, _ in meas):
            continue
        path = work / name
        path.write_text(json.dumps({str(M): SWEEP_OFFENDING[dtype] for M in Ms}, indent=4))
        for row in compare_fixes(str(path), ["rtx4090"]):
            best = min(t for (d, m, _), t in meas.items() if d == dtype and m == row.M)
            tc, nc = lookup(dtype, row.M, row.chosen)
            tn, nn = lookup(dtype, row.M, row.naive)
            if tc:
                chosen.append(best / tc)
            if tn:
                naive.append(best / tn)
            fmt = lambda c: "/".join(str(c.get(k)) for k in KEYS)  # noqa: E731
            rows.append(f"| {dtype} | {row.M} | {fmt(row.chosen)} | "
                        f"{f'{best / tc:.3f}' if tc else 'n/a'}{nc} | {fmt(row.naive)} | "
                        f"{f'{best / tn:.3f}' if tn else 'n/a'}{nn} |")
    stats = {"chosen_median": statistics.median(chosen) if chosen else None, "chosen_min": min(chosen, default=None),
             "naive_median": statistics.median(naive) if naive else None, "naive_min": min(naive, default=None),
             "scored": len(chosen)}
    return rows, stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", "-t", action="append", dest="targets", help="default: consumer")
    ap.add_argument("--estimator", default="analytic")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--record", action="store_true", help="append the results to bench/RESULTS.md")
    ap.add_argument("--sweep", type=Path, default=None, help="measured sweep (JSON lines) to score the picks on")
    args = ap.parse_args(argv)
    targets = args.targets or ["consumer"]
    with tempfile.TemporaryDirectory(prefix="tilefit-bench-") as tmp:
        tmp_path = Path(tmp)
        os.environ.setdefault("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
        source = corpus_root(tmp_path)
        runs = [one(source, tmp_path, targets, args.estimator) for _ in range(max(1, args.repeat))]
        picks = score_picks(args.sweep, tmp_path) if args.sweep else None
    keys = ("check", "check+marks", "check+plan", "fix", "fix again")
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
    pick_lines: list[str] = []
    if picks is not None:
        rows, st = picks
        pick_lines = ["", f"Fixer's GPU-free picks vs the measured sweep `{args.sweep.name}` (speed = best fitting "
                      f"config's time / the pick's time): picks median {st['chosen_median']:.3f}, min "
                      f"{st['chosen_min']:.3f}; naive fix median {st['naive_median']:.3f}, min {st['naive_min']:.3f} "
                      f"({st['scored']} scored).", ""] + rows
        print("\n".join(pick_lines))
    if args.record:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        section = [f"## bench_fix.py, {stamp}", "", f"Machine: {machine()}.", "", header + ".", ""] + table + [
            "", f"`fix` takes {ratio:.1f}x the time of `check` (median)."] + pick_lines + [""]
        results = REPO / "bench" / "RESULTS.md"
        existing = results.read_text() if results.exists() else "# Benchmark results\n\nAppend-only.\n\n"
        results.write_text(existing.rstrip("\n") + "\n\n" + "\n".join(section))
        print(f"recorded in {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
