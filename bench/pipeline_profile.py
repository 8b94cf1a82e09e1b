"""Profile of ``tilefit check PKG --target consumer`` up to the compiles (issue 18 item 5).

Runs the real command in this process, with the phases of the Python path timed: the scan
(``Project.scan``), the sites (``build_scenario_sites``) and the first wave of the compile
prefetch, which is *counted*, not compiled (the run stops there). Prints CPU and wall seconds,
the peak and current RSS after each phase, and the compiles a cold run needs: requests,
distinct specialisations, per arch.

    python bench/pipeline_profile.py /work/engines/src/sglang-0.5.23/sglang [--scenario all]
"""

from __future__ import annotations

import argparse
import collections
import resource
import sys
import time

from prefetch_hook import add_check_arguments, no_time_budget, run_to_prefetch


def _rss_now() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0



def main() -> None:
    ap = argparse.ArgumentParser()
    add_check_arguments(ap)
    ap.add_argument("--dump", help="write the sites and the distinct compile jobs, one a line, sorted (to diff two runs)")
    ap.add_argument("--no-time-budget", action="store_true",
                    help="no wall-clock budget per site (the step budget stays): runs on a loaded machine compare")
    args = ap.parse_args()
    if args.no_time_budget:
        no_time_budget()

    import tilefit.pyengine as pyengine
    import tilefit.callsites.prefetch as prefetch_mod

    t0, w0 = time.process_time(), time.perf_counter()
    marks = []

    def mark(name):
        marks.append((name, time.process_time() - t0, time.perf_counter() - w0,
                      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, _rss_now()))

    scan, sites_fn = pyengine.Project.scan, pyengine.build_scenario_sites
    counts: dict = {}

    def timed_scan(*a, **k):
        mark("start of the Python path")
        p = scan(*a, **k)
        mark(f"scan ({p.stats.files} files, {p.stats.parsed} parsed, {len(p.by_path)} modules)")
        return p

    def timed_sites(*a, **k):
        s = sites_fn(*a, **k)
        mark(f"sites ({len(s.launches)} launch sites, {len(s.autotunes)} autotune lists)")
        return s

    def counted(evaluator, sites, classes):
        stats = prefetch_mod.PrefetchStats()
        cases = list(prefetch_mod._cases(sites))
        first = [(case, variant, c.first) for case in cases for variant in evaluator.variants(case.kernel)
                 for c in classes]
        jobs = prefetch_mod._jobs(evaluator, first, stats, set())
        mark(f"wave-1 jobs ({len(cases)} cases)")
        counts["requests"], counts["distinct"], counts["to compile"] = stats.requests, stats.distinct, len(jobs)
        counts["per arch"] = dict(collections.Counter(j.arch for j in jobs))
        counts["kernels"] = len({j.src.scratch for j in jobs if getattr(j, "src", None) is not None})
        if args.dump:
            lines = [f"job {j.identity!r}" for j in jobs]
            for s in sites.launches:
                lines.append(f"site {s.kernel.key} {s.path}:{s.anchor} {s.lines} caller="
                             f"{s.caller.node.lineno if s.caller is not None else None} "
                             f"{[i.label for i in s.instances]} {s.problems}")
            for a in sites.autotunes:
                lines.append(f"autotune {a.kernel.key} {len(a.configs)} {a.problem} {len(a.launches)}")
            for launch, reason in sites.unresolved:
                lines.append(f"unresolved {launch.module.path}:{launch.line} {reason}")
            lines.append(f"off_platform {sites.off_platform}")
            with open(args.dump, "w") as fh:
                fh.write("\n".join(sorted(lines)) + "\n")

    pyengine.Project.scan = timed_scan
    pyengine.build_scenario_sites = timed_sites
    run_to_prefetch(args, counted)
    for name, cpu, wall, peak, now in marks:
        print(f"{name:70s} {cpu:7.1f} s CPU {wall:7.1f} s wall  peak {peak:6.0f} MB  now {now:6.0f} MB")
    for k, v in counts.items():
        print(f"{k}: {v}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
