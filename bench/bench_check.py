"""`tilefit check` over the whole corpus against the `consumer` group, side by side with a bare
loop that only `json.load`s the same files (issue 2's speed target: under 3x the bare loop, and
under 1 s on a 2-core machine). Both run in this process, interleaved, several rounds; the
printed ratio is of medians.

    python bench/bench_check.py [CORPUS] [--rounds 5] [--target consumer]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path


def bare_loop(paths) -> float:
    t = time.perf_counter()
    for p in paths:
        with open(p, "rb") as fh:
            json.load(fh)
    return time.perf_counter() - t


def check(root: str, targets, cache: bool = True) -> tuple[float, int]:
    from tilefit.api import CheckOptions, run_check
    from tilefit.config import Settings

    t = time.perf_counter()
    result = run_check([root], CheckOptions(targets=list(targets), estimator="analytic", use_cache=cache), Settings())
    return time.perf_counter() - t, len(result.diagnostics)


def cli_wall(root: str, targets) -> float:
    args = [sys.executable, "-m", "tilefit", "check", root, "--isolated", "--estimator", "analytic", "-q",
            "--statistics"] + [a for t in targets for a in ("--target", t)]
    t = time.perf_counter()
    subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "corpus"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--target", action="append", default=None)
    args = ap.parse_args(argv)
    targets = args.target or ["consumer"]
    paths = [os.path.join(d, f) for d, _, fs in os.walk(args.corpus) for f in fs if f.endswith(".json")]
    check(args.corpus, targets)  # warm the device-DB and schema caches
    check(args.corpus, [])
    bare, chk, cold, default, diags = [], [], [], [], 0
    for _ in range(args.rounds):
        bare.append(bare_loop(paths))
        t, diags = check(args.corpus, targets)
        chk.append(t)
        cold.append(check(args.corpus, targets, cache=False)[0])
        default.append(check(args.corpus, [])[0])
    wall = [cli_wall(args.corpus, targets) for _ in range(3)]
    b, c, k, d = (statistics.median(x) for x in (bare, chk, cold, default))
    print(f"files {len(paths)}, diagnostics {diags}, targets {targets}, medians of {args.rounds} interleaved rounds")
    print(f"bare json.load loop: {b * 1000:.0f} ms")
    print(f"check, warm result cache: {c * 1000:.0f} ms   ratio {c / b:.1f}x")
    print(f"check, no cache:          {k * 1000:.0f} ms   ratio {k / b:.1f}x")
    print(f"check without extra targets (each file's own device), warm: {d * 1000:.0f} ms   ratio {d / b:.1f}x")
    print(f"`tilefit check` command wall (incl. interpreter start): {statistics.median(wall):.2f} s")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
