"""The output formats CI uses against `concise`, cold and warm result cache (issue 19's target:
every format within 1.5x of concise, both ways).

    python bench/bench_formats.py [CORPUS] [--rounds 3] [--target consumer] [--format json ...]

CORPUS defaults to $TILEFIT_CORPUS, else ../shared/corpus, else the copy packed in
tests/data/corpus.tar.xz (as the tests find it).
Each round runs `tilefit check CORPUS --target ... --output-format F -o FILE` as a command (the
interpreter start included, as CI pays it) for every format, interleaved; "cold" runs with an
empty result cache (`TILEFIT_CACHE_DIR` a new folder), "warm" right after a run of the same
format filled it. Prints the medians and each format's ratio to concise, of the wall time and of
the run's CPU time (user + system of the child and its forked workers: on a shared machine other
processes' load moves the wall time far more than the CPU time).

Every run reads tilefit's bytecode from a folder that a priming run of each format (before the
rounds) wrote, as an installed package has it: with ``PYTHONDONTWRITEBYTECODE`` set (as on the
shared machine) each run would compile the modules it imports from source, a cost no installed
run pays, and the formats import different modules (``--no-bytecode`` keeps the environment's
setting).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus_root import corpus_root  # noqa: E402
from machine import cpu_name, load  # noqa: E402

FORMATS = ("concise", "json", "sarif", "full", "html", "gitlab")  # the default; --format picks some (concise always)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(corpus, fmt: str, targets, cache: str, out: str, pycache: str | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run (``corpus``: a path, or a list of them)."""
    paths = [corpus] if isinstance(corpus, str) else list(corpus)
    args = [sys.executable, "-m", "tilefit", "check", *paths, "--isolated", "--estimator", "analytic",
            "--output-format", fmt, "-o", out] + [a for t in targets for a in ("--target", t)]
    env = dict(os.environ, TILEFIT_CACHE_DIR=cache)
    if pycache is not None:  # bytecode as an installed package has it
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    cpu = _children_cpu()
    t = time.perf_counter()
    proc = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    elapsed = time.perf_counter() - t
    cpu = _children_cpu() - cpu
    if proc.returncode not in (0, 1):  # 2: the run failed, its time means nothing
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return elapsed, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target", action="append", default=None)
    ap.add_argument("--format", action="append", default=None, dest="formats",
                    help="a format to compare with concise (repeatable; default: json, sarif, full, html, gitlab)")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="run as the environment says (with PYTHONDONTWRITEBYTECODE set, every run compiles "
                         "tilefit's modules from source)")
    args = ap.parse_args()
    formats = ("concise",) + tuple(f for f in (args.formats or FORMATS) if f != "concise")
    targets = args.target or ["consumer"]
    cold = {f: [] for f in formats}
    warm = {f: [] for f in formats}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.corpus or str(corpus_root(Path(tmp)))
        n_files = sum(1 for _ in Path(corpus).rglob("*.json"))
        if not n_files:
            raise SystemExit(f"no tables under {corpus}")
        pycache = None
        if not args.no_bytecode:  # one priming run per format writes the bytecode (outside the rounds),
            # on a few tables of the corpus (every module a format imports, in a fraction of a full run)
            pycache = os.path.join(tmp, "pycache")
            few = sorted(str(p) for p in Path(corpus).rglob("*.json"))[:: max(1, n_files // 40)]
            for fmt in formats:
                run(few, fmt, targets, os.path.join(tmp, f"cache-prime-{fmt}"), os.path.join(tmp, f"out.{fmt}"),
                    pycache)
        for r in range(args.rounds):
            for fmt in formats:
                cache = os.path.join(tmp, f"cache-{r}-{fmt}")
                out = os.path.join(tmp, f"out.{fmt}")
                cold[fmt].append(run(corpus, fmt, targets, cache, out, pycache))
                warm[fmt].append(run(corpus, fmt, targets, cache, out, pycache))
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, {load()}; corpus {corpus} ({n_files} files); "
          f"targets {targets}; medians of {args.rounds} interleaved rounds; bytecode "
          + ("as the environment says (--no-bytecode)" if pycache is None else "compiled once before the rounds"))
    print("| format | cold, s | ratio | warm, s | ratio | cold CPU, s | ratio | warm CPU, s | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    med = statistics.median
    base = [med(x[0] for x in cold["concise"]), med(x[0] for x in warm["concise"]),
            med(x[1] for x in cold["concise"]), med(x[1] for x in warm["concise"])]
    for fmt in formats:
        row = [med(x[0] for x in cold[fmt]), med(x[0] for x in warm[fmt]),
               med(x[1] for x in cold[fmt]), med(x[1] for x in warm[fmt])]
        print(f"| {fmt} | " + " | ".join(f"{v:.2f} | {v / b:.2f}x" for v, b in zip(row, base)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
