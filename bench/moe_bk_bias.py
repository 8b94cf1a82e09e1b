"""Where the perf model's held-out errors at small batch sizes come from (issue 13, seventh pass):
BLOCK_SIZE_K 256 against its BLOCK_SIZE_K 128 sibling (same BM, BN, GROUP_SIZE_M, num_warps,
num_stages), measured (the H200 sweep's timings of every fitting config, ``moe_fit.fitting_times``)
and predicted (the bundled H200 coefficients, shared memory as the fixer's ranking estimates it), per batch size M <= 64, over the four shapes.

    python bench/moe_bk_bias.py
    python bench/moe_bk_bias.py --with load_latency_ns=500 --with iter_overhead_cycles=40   # sensitivity
    python bench/moe_bk_bias.py --fit pipeline_fill_share=0,1,2,3,4,5   # the eighth pass's fit

``--fit NAME=V1,V2,...``: the value of one coefficient (the rest held as bundled) with the smallest
mean |predicted - measured| of log(t_BK256 / t_BK128) over the pairs, pooled and leaving each
shape's pairs out in turn (the value a leave-one-shape-out fold of ``moe_offline.py`` takes).
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from moe_cases import KEYS, _context, _planner, combos  # noqa: E402


def pairs(max_m: int = 64, changes: dict | None = None) -> list[tuple]:
    """(combo, M, config, measured log(t256 / t128), predicted log(t256 / t128))."""
    from moe_fit import fitting_times, load_sweep

    from tilefit.device_db import load_database
    from tilefit.perf import load_coefficients, predict

    h200 = load_database().get("h200")
    coeffs = load_coefficients(h200)
    if changes:
        coeffs = coeffs.with_(**changes)
    by_name = {c.name: c for c in combos()}
    out = []
    for (name, M), tm in fitting_times(*load_sweep()).items():
        if M > max_m:
            continue
        for k, t in tm.items():
            c = dict(zip(KEYS, map(int, k.split("/"))))
            if c["BLOCK_SIZE_K"] != 256:
                continue
            c128 = dict(c, BLOCK_SIZE_K=128)
            k128 = "/".join(str(c128[x]) for x in KEYS)
            if k128 not in tm:
                continue
            shape = by_name[name].gemm_shape(M)
            meta = _context(by_name[name]).meta
            # shared memory as the fixer's ranking passes it (occupancy is limited by it)
            p = [predict(e, shape, h200, coeffs, smem_bytes=_planner().need(meta, e, h200.arch, h200.vendor) or 0).time_us
                 for e in (c, c128)]
            out.append((name, M, k, math.log(t / tm[k128]), math.log(p[0] / p[1])))
    return out


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--with", dest="changes", action="append", default=[], metavar="NAME=VALUE",
                    help="a coefficient override (sensitivity, not a fit)")
    ap.add_argument("--fit", metavar="NAME=V1,V2,...", help="fit one coefficient on the pairs (grid search)")
    args = ap.parse_args(argv)
    changes = {k: float(v) for k, v in (c.split("=", 1) for c in args.changes)}
    if args.fit:
        name, values = args.fit.split("=", 1)
        grid = [float(v) for v in values.split(",")]
        by_value = {v: pairs(changes={**changes, name: v}) for v in grid}
        shapes = sorted({r[0].split("/")[0] for r in by_value[grid[0]]})
        for held in [None] + shapes:
            err = {v: statistics.mean(abs(x[4] - x[3]) for x in rows if held is None or not x[0].startswith(held + "/"))
                   for v, rows in by_value.items()}
            bias = {v: statistics.median(x[4] - x[3] for x in rows if held is None or not x[0].startswith(held + "/"))
                    for v, rows in by_value.items()}
            best = min(grid, key=lambda v: (err[v], grid.index(v)))
            print(f"{'pooled' if held is None else 'without ' + held:30s} {name} = {best:g} (mean |error| "
                  + ", ".join(f"{v:g}: {err[v]:.4f} (median {bias[v]:+.3f})" for v in grid) + ")")
        return 0
    rows = pairs(changes=changes)
    for M in sorted({r[1] for r in rows}):
        r = [x for x in rows if x[1] == M]
        wrong = sum(1 for x in r if x[4] < 0 < x[3]) / len(r)
        print(f"M={M}: {len(r)} pairs; log(t_BK256 / t_BK128) measured median {statistics.median(x[3] for x in r):+.3f}, "
              f"predicted {statistics.median(x[4] for x in r):+.3f}, predicted - measured median "
              f"{statistics.median(x[4] - x[3] for x in r):+.3f}; predicted faster but measured slower: {wrong:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
