"""The long fuzzing / fault-injection run (issue 12): tests/test_fuzz.py's harness, more cases,
fresh randomness.

    python bench/fuzz.py                    # 500 cases, random seed
    python bench/fuzz.py --cases 2000 --seed 7 --record   # and append the counts to RESULTS.md

Each case mutates one of the sample corpus tables (tests/fuzzing.py: byte flips, truncation,
huge and odd numbers, deep nesting, BOMs, NUL bytes, odd and duplicated keys, line endings,
whitespace, control characters, FIFOs, folders, /dev/zero, empty and oversized files), puts it
next to an unmodified table, and runs ``tilefit check`` in every format and ``--fix`` twice.
Prints per mutation kind: cases, cases whose bad file json.load refuses, cases with a diagnostic
on the bad file, cases where --fix changed a file, and the property violations (with the
mutation, to replay with ``python tests/fuzzing.py KIND AT SIZE CHOICE SAMPLE``).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import random
import sys
import tempfile
import time
from pathlib import Path

from machine import cpu_name, load

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import fuzzing  # noqa: E402
from corpus_root import corpus_root  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=500)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--record", action="store_true", help="append the counts to bench/RESULTS.md")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    import os

    work = Path(tempfile.mkdtemp(prefix="tilefit-fuzz-"))
    os.environ["TILEFIT_CACHE_DIR"] = str(work / "cache")
    corpus = corpus_root(work)
    baseline: dict = {}
    stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures = []
    t0 = time.perf_counter()
    for i in range(args.cases):
        kind = fuzzing.KINDS[i % len(fuzzing.KINDS)] if i < len(fuzzing.KINDS) else rng.choice(fuzzing.KINDS)
        m = fuzzing.Mutation(kind, rng.random(), rng.randrange(8), rng.randrange(41))
        idx = rng.randrange(len(fuzzing.SAMPLES))
        out = fuzzing.run_case(corpus, fuzzing.SAMPLES[idx], m, baseline, work)
        s = stats[kind]
        s["cases"] += 1
        s["refused"] += int(not out.readable)
        s["diagnosed"] += int(bool(out.bad_codes))
        s["fixed"] += int(out.fixed_files > 0)
        if out.problems:
            s["violations"] += 1
            failures.append((m, idx, out.problems))
        if (i + 1) % 50 == 0:
            print(f"{i + 1} cases, {len(failures)} with violations, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    elapsed = time.perf_counter() - t0
    total = collections.Counter()
    for s in stats.values():
        total.update(s)
    lines = ["| kind | cases | json.load refuses | bad file diagnosed | --fix wrote | violations |",
             "|---|---:|---:|---:|---:|---:|"]
    for kind in fuzzing.KINDS:
        s = stats.get(kind, collections.Counter())
        lines.append(f"| {kind} | {s['cases']} | {s['refused']} | {s['diagnosed']} | {s['fixed']} | {s['violations']} |")
    lines.append(f"| all | {total['cases']} | {total['refused']} | {total['diagnosed']} | {total['fixed']} | "
                 f"{total['violations']} |")
    table = "\n".join(lines)
    print(table)
    for m, idx, problems in failures[:20]:
        print(f"\n{m} on sample {idx} (replay: python tests/fuzzing.py {m.kind} {m.at!r} {m.size} {m.choice} {idx})")
        print("\n".join("  " + p.replace("\n", "\n  ") for p in problems))
    per_case = elapsed / max(1, args.cases)
    print(f"\n{args.cases} cases in {elapsed:.0f} s ({per_case:.2f} s per case: {len(fuzzing.FORMATS)} formats, --fix twice, a re-check); "
          f"seed {seed}")
    if args.record:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        import platform

        with open(REPO / "bench" / "RESULTS.md", "a", encoding="utf-8") as fh:
            fh.write(f"\n## Fuzzing and fault injection (`bench/fuzz.py`), {stamp}\n\n"
                     f"Machine: {platform.system()} {platform.release()}, {cpu_name()}, {os.cpu_count()} cores, "
                     f"Python {platform.python_version()}, {load()}.\n\n"
                     f"`python bench/fuzz.py --cases {args.cases} --seed {seed}`: {args.cases} cases in "
                     f"{elapsed:.0f} s ({per_case:.2f} s each). Each case: one sample table of "
                     f"{len(fuzzing.SAMPLES)} mutated (kinds below) beside an unmodified table, `tilefit check` in "
                     f"all {len(fuzzing.FORMATS)} formats, `--fix` twice, a re-check. A violation is a traceback or "
                     "internal error, an exit code other than 0/1, a refused file without a diagnostic, a changed "
                     "finding of the unmodified table or of a value-preserving mutation, a fix that breaks or "
                     "touches an unparsable file, a second fix that changes anything, a fixed entry still fixable, "
                     "a temporary file left.\n\n" + table + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
