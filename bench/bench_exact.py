"""Exact vs analytic shared-memory estimation: per unique specialisation and over the corpus.

    python bench/bench_exact.py [--corpus ../shared/corpus] [--cold-files 60] [--jobs 2] [--out FILE]

1. Enumerates the distinct (spec, arch) pairs ``tilefit check --estimator exact`` compiles for the
   corpus (each table against the device its file name names), by running the check in-process
   with a recording estimator.
2. Per unique specialisation (a sample): cold exact (a compile, stopped at the shared-memory
   allocation), warm exact (a fresh estimator answering from the on-disk cache), analytic.
3. The corpus, side by side, each a fresh ``tilefit check --no-cache`` process:
   ``--estimator analytic``; ``--estimator exact`` with a warm compile cache; ``--estimator exact``
   with a cold cache on the first ``--cold-files`` files (a full cold run compiles thousands of
   specialisations one after the other); and ``--estimator auto``.
   The full corpus's cache is primed with a parallel precompile (``ExactEstimator.many``), timed.

Prints a Markdown section (also written to ``--out``) for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def corpus_specs(corpus: str) -> list[tuple]:
    """The (spec, arch) pairs an exact check of ``corpus`` asks for."""
    from tilefit.api import CheckOptions, build_engine, run_check
    from tilefit.config import Settings

    seen: dict[tuple, None] = {}

    def record(spec, arch):
        seen[(spec, arch)] = None
        return 0  # the value does not matter here

    from tilefit.kernels import launch_plan

    opts = CheckOptions(estimator="exact", use_cache=False)
    settings = Settings()
    engine = build_engine(settings, opts)
    engine.estimator._exact = record
    engine.estimator._exact_tried = True
    run_check([corpus], opts, settings, engine=engine)
    out = []
    for spec, arch in seen:
        try:
            launch_plan(spec)  # a dtype path our kernels do not run is never compiled
        except ValueError:
            continue
        out.append((spec, arch))
    return out


def best_of(n: int, paths: list[str], estimator: str, cache_dir: str) -> tuple[float, float]:
    """(best, median) wall time of ``n`` runs."""
    times = sorted(timed_check(paths, estimator, cache_dir)[0] for _ in range(n))
    return times[0], times[len(times) // 2]


def timed_check(paths: list[str], estimator: str, cache_dir: str, extra: list[str] = ()) -> tuple[float, str]:
    env = dict(os.environ, TILEFIT_CACHE_DIR=cache_dir)
    cmd = [sys.executable, "-m", "tilefit", "check", *paths, "--no-cache", "--isolated", "--exit-zero",
           "--statistics", "--estimator", estimator, *extra]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    dt = time.perf_counter() - t0
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr[-2000:]}")
    return dt, out.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--cold-files", type=int, default=60, help="files of the cold exact check (a subset)")
    ap.add_argument("--sample", type=int, default=40, help="specialisations timed one by one")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from tilefit.smem.analytic import load_model
    from tilefit.smem.cache import ExactEstimator
    from tilefit import versions
    from tilefit.smem.exact import compile_spec

    work = Path(tempfile.mkdtemp(prefix="tilefit-bench-exact-"))
    lines: list[str] = []
    try:
        t0 = time.perf_counter()
        items = corpus_specs(args.corpus)
        t_enum = time.perf_counter() - t0
        archs = sorted({a for _, a in items})
        print(f"{len(items)} distinct (spec, arch) in the corpus ({', '.join(archs)}); enumerated in {t_enum:.1f} s",
              file=sys.stderr)

        # -- per unique specialisation
        sample = random.Random(0).sample(items, min(args.sample, len(items)))
        compile_spec(*sample[0])  # import and initialise Triton outside the timing
        cold = []
        for spec, arch in sample:
            t = time.perf_counter()
            compile_spec(spec, arch, raise_on_error=False)
            cold.append(time.perf_counter() - t)
        sample_cache = work / "sample-cache"
        ExactEstimator(sample_cache).many(sample, jobs=1)
        warm = []
        fresh = ExactEstimator(sample_cache)
        for spec, arch in sample:
            t = time.perf_counter()
            fresh.result(spec, arch)
            warm.append(time.perf_counter() - t)
        model = load_model()
        analytic = []
        for spec, arch in sample:
            model._memo.clear()
            t = time.perf_counter()
            try:
                model.estimate(spec, arch)
            except Exception:  # noqa: BLE001 - an arch without a form: still timed
                pass
            analytic.append(time.perf_counter() - t)

        # -- corpus
        full_cache = str(work / "full-cache")
        t = time.perf_counter()
        primed = ExactEstimator(full_cache).many(items, jobs=args.jobs)
        t_prime = time.perf_counter() - t
        failed = sum(1 for r in primed.values() if r.error)
        timed_check([args.corpus], "analytic", str(work / "analytic-cache"))  # warm the OS file cache
        t_analytic, m_analytic = best_of(3, [args.corpus], "analytic", str(work / "analytic-cache"))
        t_warm, m_warm = best_of(3, [args.corpus], "exact", full_cache)
        t_auto, m_auto = best_of(3, [args.corpus], "auto", full_cache)
        files = sorted(str(p) for p in Path(args.corpus).rglob("*.json"))
        subset = random.Random(1).sample(files, min(args.cold_files, len(files)))
        t_sub_cold, _ = timed_check(subset, "exact", str(work / "cold-cache"))
        t_sub_warm, _ = best_of(3, subset, "exact", str(work / "cold-cache"))
        t_sub_analytic, _ = best_of(3, subset, "analytic", str(work / "analytic-cache"))
        sub_specs = len(list((work / "cold-cache").rglob("*.json")))

        def ms(xs):
            return f"{statistics.mean(xs) * 1e3:.2f} ms (median {statistics.median(xs) * 1e3:.2f})"

        date = datetime.date.today().isoformat()
        lines += [
            f"## Exact vs analytic shared-memory estimation ({date})",
            "",
            f"Machine: {platform.node() or '?'}, {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
            f"Python {platform.python_version()}, Triton {versions.installed_triton()}; `python bench/bench_exact.py "
            f"--cold-files {args.cold_files} --jobs {args.jobs}`.",
            "",
            f"The corpus ({len(files)} files) asks for {len(items)} distinct (kernel specialisation, arch) pairs "
            f"when every table is checked against the device its name names ({', '.join(archs)}).",
            "",
            f"Per unique specialisation ({len(sample)} sampled):",
            "",
            "| estimator | time per specialisation |",
            "|---|---|",
            f"| exact, cold (compile stopped at the allocation) | {ms(cold)} |",
            f"| exact, warm (on-disk cache, fresh process memory) | {ms(warm)} |",
            f"| analytic | {ms(analytic)} |",
            "",
            "`tilefit check` over the corpus (fresh process each, `--no-cache --statistics`; best and median of 3):",
            "",
            "| run | wall time |",
            "|---|---|",
            f"| `--estimator analytic`, full corpus | {t_analytic:.2f} s (median {m_analytic:.2f}) |",
            f"| `--estimator exact`, warm compile cache, full corpus | {t_warm:.2f} s (median {m_warm:.2f}) |",
            f"| `--estimator auto`, warm compile cache, full corpus | {t_auto:.2f} s (median {m_auto:.2f}) |",
            f"| parallel precompile of the full corpus (`ExactEstimator.many`, {args.jobs} jobs, cold) | "
            f"{t_prime:.1f} s ({len(items)} specs, {failed} compile failures) |",
            f"| `--estimator exact`, cold cache, {len(subset)} random files ({sub_specs} compiles) | {t_sub_cold:.2f} s |",
            f"| same {len(subset)} files, warm (best of 3) | {t_sub_warm:.2f} s |",
            f"| same {len(subset)} files, analytic (best of 3) | {t_sub_analytic:.2f} s |",
            "",
            f"Warm exact / analytic over the full corpus: {t_warm / t_analytic:.2f}x best, "
            f"{m_warm / m_analytic:.2f}x median (target: within 1.5x). "
            f"A cold exact check compiles serially in the checking process (about {statistics.mean(cold):.2f} s per "
            f"specialisation here), so the full corpus was measured cold through the parallel precompile, and the "
            f"`check` itself cold on a random subset.",
            "",
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
