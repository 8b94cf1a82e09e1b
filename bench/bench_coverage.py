"""Benchmark: how much of an engine tree's kernel launches the evaluator *reaches* (issue 18.4),
without compiling: the static half of ``tilefit check --statistics``.

``--statistics`` counts a launch site evaluated when every (scenario instance, dtype variant,
target) of it got a shared-memory figure from a compile. Compiling every launch of a tree under
the seven shipped scenarios takes far longer than this 2-core machine gives a session (vLLM's
47-file ``v1/attention/ops`` did not finish cold in 900 s), so this script measures the part the
call-site work changes: a site is *reached* when the launch-like plan of every instance and
variant has a static value for every constexpr and option (``CallsiteEvaluator.plan`` succeeds
for the first target's arch). That is an upper bound of the compiled figure: a reached site may
still fail to compile or be refused by the allowlist. Sites not reached are counted under each
reason their plans give (the labels of ``tilefit.callsites.coverage``). Nothing is imported from
or run in the scanned trees.

    python bench/bench_coverage.py                         # the three trees of issue 18, 7 scenarios
    python bench/bench_coverage.py --tree PATH --sites     # one tree, every site not reached
    python bench/bench_coverage.py --record                # append the table to bench/RESULTS.md
    python bench/bench_coverage.py --baseline main         # and the same count for another revision

``--baseline REV`` exports that revision of this repository (``git archive``) into a temporary
folder and counts there too, in a child process that imports tilefit from it (its ``linter/``
as ``tilefit``, as the package-dir mapping does): both columns come from one run.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import platform
import sys
import time
from pathlib import Path

from machine import cpu_name

HERE = Path(__file__).resolve().parent
SRC = Path("/work/engines/src")
TREES = {
    "vllm 0.33.0 v1/attention/ops": SRC / "vllm-0.33.0" / "vllm" / "v1" / "attention" / "ops",
    "vllm 0.33.0 model_executor/layers/fused_moe": SRC / "vllm-0.33.0" / "vllm" / "model_executor" / "layers"
    / "fused_moe",
    "sglang 0.5.23 srt/layers/attention": SRC / "sglang-0.5.23" / "sglang" / "srt" / "layers" / "attention",
}
COVERAGE_TARGET = 0.90


def _use_source(root: str) -> None:
    """Import ``tilefit`` from the checkout ``root`` (``linter/`` is the package; ``rules/`` and
    ``device_db/`` its subpackages), not from the installed one."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tilefit", os.path.join(root, "linter", "__init__.py"),
                                                  submodule_search_locations=[os.path.join(root, "linter"), root])
    module = importlib.util.module_from_spec(spec)
    sys.modules["tilefit"] = module
    spec.loader.exec_module(module)


def _capabilities(classes) -> frozenset:
    out = set()
    for c in classes:
        digits = "".join(ch for ch in str(c.first.arch).split("_", 1)[-1] if ch.isdigit())
        if digits:
            out.add(int(digits))
    return frozenset(out)


def reach(tree: Path, scenario_names, target: str, show_sites: bool) -> dict:
    import inspect

    from tilefit.api import load_devices, resolve_targets
    from tilefit.callsites.coverage import reason_of
    from tilefit.callsites.evaluate import CallsiteEvaluator, Outcome, config_cases, launch_cases
    from tilefit.callsites.project import Project
    from tilefit.callsites.scenarios import resolve
    from tilefit.callsites.sites import build_scenario_sites
    from tilefit.config import Settings
    from tilefit.engine import group_devices

    classes = group_devices(resolve_targets(load_devices(Settings(), ()), [target]))
    arch = classes[0].first.arch
    files = sorted(str(p) for p in tree.rglob("*.py"))
    t0 = time.perf_counter()
    project = Project.scan(files)
    scenarios = resolve(scenario_names)
    accepts = inspect.signature(build_scenario_sites).parameters
    extra = (_capabilities(classes),) if "capabilities" in accepts else ()
    if "devices" in accepts:  # the targets' devices: a MoE scenario binds their fused-MoE configs
        try:  # the doctor's lookup, wired in as tilefit.cli wires it
            from tilefit.doctor.moeconfigs import install
        except ImportError:  # a revision from before the lookup was passed in
            pass
        else:
            install()
        extra += (tuple(d for c in classes for d in c.devices),)
    sites = build_scenario_sites(project, scenarios, "cuda", *extra)
    ev = CallsiteEvaluator(project, kernels={}, mode="exact", allow_import=False, estimator=None, scenarios=scenarios,
                           triton=False)
    reasons: collections.Counter = collections.Counter()
    found = reached = 0
    lines = []
    reached_sites = []  # labels of the sites reached (compared with --baseline's)

    def judge(label, cases, problem=""):
        nonlocal found, reached
        found += 1
        details = [problem] if problem else []
        for case in cases:
            for variant in ev.variants(case.kernel):
                r = ev.plan(case, variant, arch)
                if isinstance(r, Outcome):
                    details.append(r.detail)
        if cases and not details:
            reached += 1
            reached_sites.append(label)
            return
        labels = {lab for d in details for lab in reason_of(d, "unknown")} or {"no instance"}
        reasons.update(labels)
        if show_sites:
            lines.append(f"  {label}: {sorted(set(details))[0][:300] if details else 'no instance'}")

    for site in sites.launches:
        if site.kernel.autotune is None:
            judge(f"{os.path.relpath(site.path, tree)}:{site.anchor.start.line} {site.where}", launch_cases(site))
    for site in sites.autotunes:
        cases = [c for cfg in site.configs for c in config_cases(site, cfg)]
        judge(f"{os.path.relpath(site.path, tree)} autotune {site.kernel.name}", cases,
              site.problem or ("" if site.configs else "no static configs"))
    return {"files": len(files), "found": found, "reached": reached, "reasons": reasons, "lines": lines,
            "reached_sites": reached_sites,
            "seconds": time.perf_counter() - t0, "unresolved": len(sites.unresolved),
            "off_platform": sites.off_platform}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", action="append", default=[], help="package folder (repeatable; default: issue 18's three)")
    ap.add_argument("--scenario", action="append", default=[], help="scenario names (default: all shipped)")
    ap.add_argument("--target", default="consumer", help="targets: their backend and compute capabilities fold "
                                                         "platform tests; the first one's arch plans the launches")
    ap.add_argument("--sites", action="store_true", help="print every site not reached with its first reason")
    ap.add_argument("--record", action="store_true", help="append the table to bench/RESULTS.md")
    ap.add_argument("--baseline", help="a git revision of this repository to count beside the working tree")
    ap.add_argument("--source", help=argparse.SUPPRESS)  # child of --baseline: import tilefit from here
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.source:
        _use_source(args.source)
    trees = {str(p): Path(p) for p in args.tree} if args.tree else {k: v for k, v in TREES.items() if v.is_dir()}
    if not trees:
        sys.exit("no engine tree at hand (/work/engines/src); pass --tree")
    scenarios = args.scenario or ["all"]
    if args.json:
        import json

        out = {name: {k: (dict(v) if k == "reasons" else v) for k, v in reach(tree, scenarios, args.target,
                                                                             False).items() if k != "lines"}
               for name, tree in trees.items()}
        print(json.dumps(out))
        return
    base = _baseline(args, trees, scenarios) if args.baseline else {}
    rows = []
    for name, tree in trees.items():
        r = reach(tree, scenarios, args.target, args.sites)
        rows.append((name, r))
        print(f"{name}: {r['reached']} of {r['found']} reached ({r['seconds']:.1f} s)", flush=True)
        for ln in r["lines"]:
            print(ln)
        b = base.get(name)
        if args.sites and b is not None and "reached_sites" in b:  # by file:line, kernel and caller
            now, then = set(r["reached_sites"]), set(b["reached_sites"])
            for label in sorted(now - then):
                print(f"  newly reached: {label}")
            for label in sorted(then - now):
                print(f"  no longer reached: {label}")
    before = f" | {args.baseline}: reached" if base else ""
    table = [f"| tree | .py{before} | launch sites of known kernels | reached | share | vs 90% | launches off the targets "
             "dropped (ROCm-only, other GPU families) | launches of kernels from outside the tree |",
             "|---|---:|" + ("---:|" if base else "") + "---:|---:|---:|---:|---:|---:|"]

    def was(name):
        b = base.get(name)
        return f" | {b['reached']} of {b['found']} ({100 * b['reached'] / max(b['found'], 1):.1f}%)" if b else \
            (" | -" if base else "")

    for name, r in rows:
        share = r["reached"] / r["found"] if r["found"] else 0.0
        table.append(f"| {name} | {r['files']}{was(name)} | {r['found']} | {r['reached']} | {100 * share:.1f}% | "
                     f"{share / COVERAGE_TARGET:.2f}x | {r['off_platform']} | {r['unresolved']} |")
    total_found = sum(r["found"] for _, r in rows)
    total_reached = sum(r["reached"] for _, r in rows)
    share = total_reached / total_found if total_found else 0.0
    btot = ""
    if base:
        bf, br = sum(b["found"] for b in base.values()), sum(b["reached"] for b in base.values())
        btot = f" | {br} of {bf} ({100 * br / max(bf, 1):.1f}%)"
    table.append(f"| all | {sum(r['files'] for _, r in rows)}{btot} | {total_found} | {total_reached} | "
                 f"{100 * share:.1f}% | {share / COVERAGE_TARGET:.2f}x | | |")
    reasons = ["Not reached, by reason (a site counts under each of its reasons):", ""]
    for name, r in rows:
        reasons.append(f"- {name}: " + ", ".join(f"{label} {n}" for label, n in r["reasons"].most_common()))
    print("\n".join(table + [""] + reasons))
    if args.record:
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        block = [f"\n## Launch sites the evaluator reaches (`bench/bench_coverage.py`), {when}\n",
                 f"Machine: {platform.platform()}, {cpu_name()}, {os.cpu_count()} cores, Python "
                 f"{platform.python_version()}, load {os.getloadavg()[0]:.1f}. Scenarios: {', '.join(scenarios)}; "
                 f"targets {args.target} (backend and compute capabilities; plans for the first arch). No compile: "
                 "a site is reached when every instance and dtype variant has a static value for every constexpr "
                 "and option (an upper bound of `--statistics`' compiled figure).\n", *table, "", *reasons, ""]
        with open(HERE / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write("\n".join(block))


def _baseline(args, trees, scenarios) -> dict:
    """The counts of ``args.baseline`` (exported with ``git archive``), in a child process."""
    import json
    import subprocess
    import tarfile
    import tempfile

    root = HERE.parent
    with tempfile.TemporaryDirectory(prefix="tilefit-baseline-") as tmp:
        data = subprocess.run(["git", "-C", str(root), "archive", args.baseline], check=True,
                              capture_output=True).stdout
        archive = Path(tmp) / "src.tar"
        archive.write_bytes(data)
        with tarfile.open(archive) as tar:
            tar.extractall(Path(tmp) / "src")
        cmd = [sys.executable, str(HERE / "bench_coverage.py"), "--json", "--source", str(Path(tmp) / "src"),
               "--target", args.target]
        for tree in trees.values():
            cmd += ["--tree", str(tree)]
        for s in scenarios:
            cmd += ["--scenario", s]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tmp).stdout
    got = json.loads(out.strip().splitlines()[-1])
    return {name: got[str(tree)] for name, tree in trees.items()}


if __name__ == "__main__":
    main()
