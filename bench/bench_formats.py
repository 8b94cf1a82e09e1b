"""The output formats CI uses against `concise`, cold and warm result cache (issue 19's target:
json and sarif within 1.5x of concise, both ways).

    python bench/bench_formats.py [CORPUS] [--rounds 3] [--target consumer]

CORPUS defaults to $TILEFIT_CORPUS, else ../shared/corpus, else the copy packed in
tests/data/corpus.tar.xz (as the tests find it).
Each round runs `tilefit check CORPUS --target ... --output-format F -o FILE` as a command (the
interpreter start included, as CI pays it) for every format, interleaved; "cold" runs with an
empty result cache (`TILEFIT_CACHE_DIR` a new folder), "warm" right after a run of the same
format filled it. Prints the medians and each format's ratio to concise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import cpu_name, load  # noqa: E402

FORMATS = ("concise", "json", "sarif")


REPO = Path(__file__).resolve().parents[1]


def corpus_root(tmp: Path) -> Path:
    env = os.environ.get("TILEFIT_CORPUS")
    if env:
        return Path(env)
    shared = REPO.parent / "shared" / "corpus"
    if (shared / "README.md").is_file():
        return shared
    with tarfile.open(REPO / "tests" / "data" / "corpus.tar.xz") as tar:
        tar.extractall(tmp / "extracted", filter="data")
    return tmp / "extracted" / "corpus"


def run(corpus: str, fmt: str, targets, cache: str, out: str) -> float:
    args = [sys.executable, "-m", "tilefit", "check", corpus, "--isolated", "--estimator", "analytic",
            "--output-format", fmt, "-o", out] + [a for t in targets for a in ("--target", t)]
    env = dict(os.environ, TILEFIT_CACHE_DIR=cache)
    t = time.perf_counter()
    proc = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    elapsed = time.perf_counter() - t
    if proc.returncode not in (0, 1):  # 2: the run failed, its time means nothing
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", nargs="?", default=None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--target", action="append", default=None)
    args = ap.parse_args()
    targets = args.target or ["consumer"]
    cold = {f: [] for f in FORMATS}
    warm = {f: [] for f in FORMATS}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = args.corpus or str(corpus_root(Path(tmp)))
        n_files = sum(1 for _ in Path(corpus).rglob("*.json"))
        if not n_files:
            raise SystemExit(f"no tables under {corpus}")
        for r in range(args.rounds):
            for fmt in FORMATS:
                cache = os.path.join(tmp, f"cache-{r}-{fmt}")
                out = os.path.join(tmp, f"out.{fmt}")
                cold[fmt].append(run(corpus, fmt, targets, cache, out))
                warm[fmt].append(run(corpus, fmt, targets, cache, out))
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, {load()}; corpus {corpus} ({n_files} files); "
          f"targets {targets}; medians of {args.rounds} interleaved rounds")
    base_c, base_w = statistics.median(cold["concise"]), statistics.median(warm["concise"])
    print("| format | cold, s | ratio | warm, s | ratio |")
    print("|---|---:|---:|---:|---:|")
    for fmt in FORMATS:
        c, w = statistics.median(cold[fmt]), statistics.median(warm[fmt])
        print(f"| {fmt} | {c:.2f} | {c / base_c:.2f}x | {w:.2f} | {w / base_w:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
