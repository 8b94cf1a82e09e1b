"""Fidelity of the shipped engine calibrations (issue 17 items 2 and 5): per calibration, the
held-out compiled points (designs ``table``/``grid``) the engine launches, how many the model's
forms answer with the compile's bytes, and the misses by (arch, path) -- the count that
tests/test_engine_proof.py holds to 99.5% (both read :mod:`tilefit.smem.engine_proof`: the same
held-out selection, gaps and count). No Triton, no compile: the points are the package's.

    python bench/bench_fidelity.py            # every calibration of its own
    python bench/bench_fidelity.py --kernel block_gemm
"""

from __future__ import annotations

import argparse

from tilefit.smem import engine_proof as proof


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", action="append")
    args = ap.parse_args()
    print("| calibration | held-out exact | target | misses (arch, path) |\n|---|---|---|---|")
    for k, e, v, t in proof.calibrations():
        if args.kernel and k not in args.kernel:
            continue
        got = proof.fidelity(k, e, v, t)
        shown = ", ".join(f"{a} {n.split('/', 1)[-1]} {c}" for (a, n), c in sorted(got.misses.items())) or "-"
        if got.wrong_verdicts:
            shown += f"; {len(got.wrong_verdicts)} wrong verdicts"
        print(f"| {k} / {e} {v}, Triton {t} | {got.exact}/{got.total} ({got.rate:.1%}) | "
              f"{'met' if got.met else 'not met'} | {shown} |")


if __name__ == "__main__":
    main()
