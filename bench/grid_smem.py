"""Exact shared memory of the fused-MoE tuner grid for the Qwen3-30B-A3B gate/up GEMM.

The grid is the engines' CUDA tuning space trimmed as in ../shared/docs/perf_reference.md:
BM {16..256} x BN {32..256} x BK {64,128,256} x GROUP {1,16} x warps {4,8} x stages {2..5},
for fp8_w8a8 (per-tensor) and bf16, E=128, N=1536, K=2048, top_k=8. Each (config, arch) is
compiled ahead of time with the installed Triton (no GPU), via tilefit's exact estimator.
GROUP_SIZE_M does not change the allocation, so each tile is compiled once.

    python bench/grid_smem.py --arch sm_89 --arch sm_90 --out bench/data/qwen3_gateup_grid_smem.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time

from tilefit.smem.cache import ExactEstimator
from tilefit import versions
from tilefit.kernels.spec import make_spec

SHAPE = {"E": 128, "N": 1536, "K": 2048, "top_k": 8, "M": 256}
BM, BN, BK = (16, 32, 64, 128, 256), (32, 64, 128, 256), (64, 128, 256)
WARPS, STAGES = (4, 8), (2, 3, 4, 5)
DTYPES = {"fp8_w8a8": ("per_tensor", 1), "bf16": ("none", 2)}


def grid():
    for dtype, bm, bn, bk, w, s in itertools.product(DTYPES, BM, BN, BK, WARPS, STAGES):
        yield dtype, {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "num_warps": w, "num_stages": s}


def spec_of(dtype: str, cfg: dict):
    tile = {k: cfg[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")} | {"GROUP_SIZE_M": 1}
    return make_spec("fused_moe", dtype, tile, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                     quant=DTYPES[dtype][0], problem=SHAPE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", action="append", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--skip-over", type=int, default=None,
                    help="skip points whose ring-buffer lower bound (S-1)(BM+BN)BK*e exceeds this")
    args = ap.parse_args(argv)
    items = []
    for dtype, cfg in grid():
        e = DTYPES[dtype][1]
        lower = (cfg["num_stages"] - 1) * (cfg["BLOCK_SIZE_M"] + cfg["BLOCK_SIZE_N"]) * cfg["BLOCK_SIZE_K"] * e
        for arch in args.arch:
            if args.skip_over is None or lower <= args.skip_over:
                items.append((spec_of(dtype, cfg), arch))
    t0 = time.time()
    est = ExactEstimator()
    done = [0]

    def progress(d, t):
        if d % 100 == 0 or d == t:
            print(f"{d}/{t} {time.time() - t0:.0f}s", file=sys.stderr, flush=True)

    results = est.many(items, jobs=args.jobs, progress=progress)
    rows = []
    for (spec, arch), r in results.items():
        t = spec.tile_dict
        rows.append({"dtype": spec.dtype, "arch": arch, "BLOCK_SIZE_M": t["BLOCK_SIZE_M"],
                     "BLOCK_SIZE_N": t["BLOCK_SIZE_N"], "BLOCK_SIZE_K": t["BLOCK_SIZE_K"],
                     "num_warps": spec.num_warps, "num_stages": spec.num_stages,
                     "shared": r.shared_bytes, "error": (r.error or None) and str(r.error)[:200]})
    doc = {"triton_version": versions.installed_triton(), "shape": SHAPE, "skip_over": args.skip_over,
           "seconds": round(time.time() - t0, 1), "points": rows}
    with open(args.out, "w") as fh:
        json.dump(doc, fh, indent=0, separators=(",", ":"))
        fh.write("\n")
    print(f"{len(rows)} points in {time.time() - t0:.0f}s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
