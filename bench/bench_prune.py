"""Benchmark: how many ``prune_configs_by`` functions of an engine tree tilefit evaluates
statically (issue 18, item 3), per autotune list, launch case and target, under the shipped
scenarios; and, for the ones evaluated, how many configs they keep. No compile: the prune is
interpreted (:mod:`tilefit.callsites.prune`), nothing is imported from or run in the trees.

    python bench/bench_prune.py                       # sglang 0.5.23 and vllm 0.33.0, --target consumer
    python bench/bench_prune.py --tree PATH --target datacenter
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import sys
import time
from pathlib import Path

ENGINES = Path("/work/engines/src")
TREES = [ENGINES / "sglang-0.5.23" / "sglang", ENGINES / "vllm-0.33.0" / "vllm"]


def measure(tree: Path, target: str, scenario_names) -> dict:
    from tilefit.api import load_devices, resolve_targets
    from tilefit.callsites.evaluate import config_cases
    from tilefit.callsites.project import Project
    from tilefit.callsites.prune import PruneEvaluator
    from tilefit.callsites.scenarios import resolve
    from tilefit.callsites.sites import build_scenario_sites
    from tilefit.callsites.values import arch_capability
    from tilefit.config import Settings
    from tilefit.engine import group_devices

    classes = group_devices(resolve_targets(load_devices(Settings(), ()), [target]))
    classes = [c for c in classes if c.first.smem_per_block_optin is not None]
    files = sorted(str(p) for p in tree.rglob("*.py"))
    t0 = time.perf_counter()
    project = Project.scan(files)
    caps = frozenset(c for c in (arch_capability(k.first.arch) for k in classes) if c is not None)
    sites = build_scenario_sites(project, resolve(scenario_names), "cuda", caps,
                                 tuple(d for c in classes for d in c.devices))
    prunes = PruneEvaluator(project.evaluator)
    lists = evaluated = 0
    reasons: collections.Counter = collections.Counter()
    rows = []
    for site in sites.autotunes:
        if prunes.spec(site) is None or not site.configs:
            continue
        lists += 1
        cases = config_cases(site, site.configs[0])
        results = [prunes.result(site, case.given, case.reasons, dclass) for case in cases for dclass in classes]
        done = [r for r in results if r.kept is not None]
        failed = [r for r in results if r.kept is None]
        if done and not failed:
            evaluated += 1
        for r in failed[:1]:
            reasons[_short(r.reason)] += 1
        kept = sorted({len(r.kept) for r in done})
        rows.append(f"  {os.path.relpath(site.path, tree)} {site.kernel.name} [{prunes.spec(site).name}]: "
                    f"{len(done)}/{len(results)} (case, target) evaluated"
                    + (f", keeps {'/'.join(map(str, kept))} of {len(site.configs)}" if kept else "")
                    + (", device read" if any(r.device_read for r in done) else "")
                    + (f"; not: {failed[0].reason[:160]}" if failed else ""))
    return {"lists": lists, "evaluated": evaluated, "reasons": reasons, "rows": rows,
            "seconds": time.perf_counter() - t0, "files": len(files)}


def _short(reason: str | None) -> str:
    r = reason or "?"
    for key in ("run time", "without a default", "not passed", "is not defined", "not in the scanned tree",
                "statement", "not a function", "device property", "calls `"):
        if key in r:
            return key
    return r[:60]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", type=Path)
    ap.add_argument("--target", default="consumer")
    ap.add_argument("--scenario", action="append", default=[])
    args = ap.parse_args()
    trees = args.tree or TREES
    scenarios = args.scenario or ["all"]
    print(f"python {platform.python_version()}, load {os.getloadavg()[0]:.1f}, target {args.target}, "
          f"scenarios {', '.join(scenarios)}")
    for tree in trees:
        if not tree.is_dir():
            print(f"{tree}: not found", file=sys.stderr)
            return 2
        r = measure(tree, args.target, scenarios)
        print(f"{tree}: {r['files']} files, {r['lists']} autotune lists with an early_config_prune, "
              f"{r['evaluated']} evaluated for every launch case and target ({r['seconds']:.1f} s)")
        for reason, n in r["reasons"].most_common():
            print(f"    not evaluated: {n} x {reason}")
        print("\n".join(r["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
