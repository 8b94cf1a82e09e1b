"""Census of the compiles a cold ``tilefit check PKG --target consumer`` asks for (issue 18 item 5).

Runs the real command in this process up to the compile prefetch (like ``pipeline_profile.py``),
compiles nothing, and sorts the first wave's distinct compile jobs (``CompileJob.identity``: kernel
source hash, the plan's specialisation key, the arch compiled: ``CompileJob.target``, the first of
its arch class) by what could answer them (``TILEFIT_ARCH_CLASSES=0``: every arch on its own):

* **same specialisation**: jobs of one kernel (the raw-value count is what the prefetch compiled before
  ``CompileJob.key`` was keyed by :mod:`tilefit.callsites.speckey`) that differ only in the raw values of non-constexpr
  ints (4096 vs 8192: both ``i32`` divisible by 16) or floats -- Triton's launch specialiser gives
  them the same signature and attributes, so the compile (and its shared memory) is the same;
* **calibrated family**: jobs whose kernel has the function name of a calibrated kernel family
  (``fused_moe_kernel``, ``_fwd_grouped_kernel_stage1``, ...), with and without a proven
  closed form for the arch (the engine calibration's held-out proof);
* **autotune expansions**: jobs that only autotune configs ask for (no plain launch does);
* **archs**: the jobs if every arch were merged (an upper bound), and the compiles with the arch
  classes proven per Triton release (:mod:`tilefit.smem.archclass`, what a run compiles).

    python bench/compile_census.py /work/engines/src/vllm-0.33.0/vllm [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time

from prefetch_hook import add_check_arguments, no_time_budget, run_to_prefetch


def main() -> None:
    ap = argparse.ArgumentParser()
    add_check_arguments(ap)
    ap.add_argument("--json", help="write the counts as JSON")
    ap.add_argument("--top", type=int, default=12, help="kernels with the most jobs to list")
    ap.add_argument("--vary", type=int, default=0, help="for the N kernels with the most jobs, which arguments vary")
    args = ap.parse_args()
    no_time_budget()
    from tilefit import kernels
    from tilefit.callsites.evaluate import CompileJob, config_cases, launch_cases, known_spec
    from tilefit.callsites.speckey import arg_key

    def specialisation_key(job) -> str:
        return repr(([(a.name, a.kind, arg_key(a.kind, a.value)) for a in job.args], job.num_warps,
                     job.num_stages, job.options))

    out: dict = {}
    t0 = time.perf_counter()

    def counted(evaluator, sites, classes):
        devices = [c.first for c in classes]
        origin: dict = {}  # identity -> {"launch", "autotune"}
        jobs: dict = {}
        raw: set = set()  # the jobs keyed by the launch's raw values
        requests = 0
        for kind, cases in (("launch", [c for s in sites.launches for c in launch_cases(s)]),
                            ("autotune", [c for s in sites.autotunes for cfg in s.configs
                                          for c in config_cases(s, cfg)])):
            for case in cases:
                for variant in evaluator.variants(case.kernel):
                    for dev in devices:
                        requests += 1
                        job = evaluator.job(case, variant, dev)
                        if not isinstance(job, CompileJob):
                            continue
                        origin.setdefault(job.identity, set()).add(kind)
                        raw.add((job.identity[0], repr(([(a.name, a.kind, repr(a.value)) for a in job.args],
                                                        job.num_warps, job.num_stages, job.options)), job.arch))
                        jobs.setdefault(job.identity, (job, variant, dev))
        spec_groups = collections.defaultdict(list)
        no_arch = set()
        fam = collections.Counter()
        per_kernel = collections.Counter()
        for ident, (job, variant, dev) in jobs.items():
            spec_groups[(ident[0], specialisation_key(job), job.arch)].append(ident)
            no_arch.add((ident[0], specialisation_key(job)))
            per_kernel[job.case.kernel.key] += 1
            family = kernels.by_function(job.case.kernel.name)
            if family is None:
                continue
            spec = known_spec(job.case, variant, evaluator.info(job.case.kernel), job.num_warps, job.num_stages)
            label = family.name
            if spec is None:
                fam[(label, "no spec from the launch")] += 1
                continue
            try:
                est = evaluator.estimator.model.estimate(spec, job.arch)
                fam[(label, f"form: {est.status}")] += 1
            except Exception as exc:  # noqa: BLE001
                fam[(label, f"no form ({type(exc).__name__})")] += 1
        for name, _ in per_kernel.most_common(args.vary):
            mine = [job for job, _, _ in jobs.values() if job.case.kernel.key == name and job.arch == devices[0].arch]
            varying = collections.Counter()
            for field in ("num_warps", "num_stages", "options"):
                varying[field] = len({repr(getattr(j, field)) for j in mine})
            for a in mine[0].args if mine else ():
                varying[f"{a.name}:{a.kind}"] = len({repr(arg_key(x.kind, x.value)) for j in mine for x in j.args
                                                      if x.name == a.name})
            out.setdefault("varying (first arch)", {})[name] = {
                "jobs": len(mine), **{k: n for k, n in varying.items() if n > 1}}
        only_autotune = sum(1 for o in origin.values() if o == {"autotune"})
        out.update({
            "seconds to the prefetch": round(time.perf_counter() - t0, 1),
            "requests (case, variant, arch)": requests,
            "distinct jobs (the launch's raw values)": len(raw),
            "distinct jobs (identity)": len(jobs),
            "distinct specialisations (same compile)": len(spec_groups),
            "compiles with the arch classes (CompileJob.target)": len(
                {(ident[0], specialisation_key(job), job.target) for ident, (job, _, _) in jobs.items()}),
            "per compiled arch (classes)": dict(collections.Counter(
                j.target for j in {(i[0], specialisation_key(j), j.target): j for i, (j, _, _) in jobs.items()}.values())),
            "specialisations if archs were merged": len(no_arch),
            "jobs only autotune configs ask for": only_autotune,
            "specialisations only autotune configs ask for": sum(
                1 for ids in spec_groups.values() if all(origin[i] == {"autotune"} for i in ids)),
            "per arch": dict(collections.Counter(k[2] for k in spec_groups)),
            "calibrated families (jobs)": {f"{a}: {b}": n for (a, b), n in sorted(fam.items())},
            "kernels": len({ident[0] for ident in jobs}),
            "top kernels by jobs": per_kernel.most_common(args.top),
        })

    run_to_prefetch(args, counted)
    for k, v in out.items():
        print(f"{k}: {v}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1, default=str)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
