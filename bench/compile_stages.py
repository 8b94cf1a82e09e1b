"""Where one call-site compile's time goes (issue 18 item 5): Triton's stages, timed in-process.

Collects the first wave's distinct compile jobs of ``tilefit check TREE --target consumer`` (like
``compile_census.py``; nothing compiled there), then compiles the first ``--limit`` of them in
this process (the scratch modules are written and loaded as the compile child does) with each
pipeline stage timed: Triton's import and backend set-up, ``make_ir`` (the AST code generator),
``ttir``, ``ttgir`` and the ``llir`` stage up to the shared-memory allocation. Prints the sum per
stage and per arch, to show what sharing a stage between the archs of one specialisation could
save.

    python bench/compile_stages.py /work/engines/src/vllm-0.33.0/vllm/v1/worker/gpu/spec_decode --limit 60
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
import time

from prefetch_hook import add_check_arguments, no_time_budget, run_to_prefetch


def main() -> None:
    ap = argparse.ArgumentParser()
    add_check_arguments(ap)
    ap.add_argument("--limit", type=int, default=60)
    args = ap.parse_args()
    no_time_budget()
    import tilefit.callsites.prefetch as prefetch_mod
    from tilefit.callsites.evaluate import CompileJob

    got: list = []

    def collect(evaluator, sites, classes):
        seen = set()
        for case in prefetch_mod._cases(sites):
            for variant in evaluator.variants(case.kernel):
                for c in classes:
                    job = evaluator.job(case, variant, c.first)
                    if isinstance(job, CompileJob) and job.identity not in seen and job.src.kind == "scratch":
                        seen.add(job.identity)
                        got.append((evaluator, job))

    run_to_prefetch(args, collect)
    # order: one specialisation's archs together, as a pool sharing stages would take them
    got.sort(key=lambda ej: (ej[1].identity[0], ej[1].key, ej[1].arch))
    got = got[:args.limit]
    t0 = time.perf_counter()
    import triton  # noqa: F401
    from triton.compiler import compiler as tc

    from tilefit.smem import exact

    setup = time.perf_counter() - t0
    spent: collections.Counter = collections.Counter()
    per_arch: collections.Counter = collections.Counter()
    current = {"arch": None}

    real_make_ir = tc.ASTSource.make_ir

    @functools.wraps(real_make_ir)  # tilefit.smem.exact reads make_ir's signature
    def timed_make_ir(self, *a, **k):
        t = time.perf_counter()
        try:
            return real_make_ir(self, *a, **k)
        finally:
            spent["make_ir (AST code generation)"] += time.perf_counter() - t

    tc.ASTSource.make_ir = timed_make_ir
    real_add_stages = None
    from triton.compiler.compiler import make_backend

    def wrap_backend(backend):
        nonlocal real_add_stages
        cls = type(backend)
        if getattr(cls, "_timed", False):
            return
        orig = cls.add_stages

        def add_stages(self, stages, options, language):
            orig(self, stages, options, language)
            for name, fn in list(stages.items()):
                def timed(mod, md, _fn=fn, _name=name):
                    t = time.perf_counter()
                    try:
                        return _fn(mod, md)
                    finally:
                        spent[f"stage {_name}"] += time.perf_counter() - t
                stages[name] = timed

        cls.add_stages = add_stages
        cls._timed = True

    from triton.backends.compiler import GPUTarget

    for arch in sorted({j.arch for _, j in got}):
        backend_name, value, ws = exact.parse_arch(arch)
        wrap_backend(make_backend(GPUTarget(backend_name, value, ws)))
    total = 0.0
    errors = 0
    for ev, job in got:
        job.src.scratch.check()
        job.src.scratch.write()
        job.src.scratch.load()
        current["arch"] = job.arch
        t = time.perf_counter()
        r = exact.compile_plan(ev.plan_of(job), job.arch, raise_on_error=False)
        dt = time.perf_counter() - t
        total += dt
        per_arch[job.arch] += dt
        errors += r.error is not None
    n = len(got)
    print(f"{n} compiles ({errors} failed) in {total:.1f} s, {total / max(n, 1):.3f} s each; "
          f"import triton + backends {setup:.1f} s once")
    for name, s in spent.most_common():
        print(f"  {name:40s} {s:7.1f} s  {100 * s / total:5.1f}%")
    for arch, s in sorted(per_arch.items()):
        print(f"  arch {arch:8s} {s:7.1f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
