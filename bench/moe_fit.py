"""Fit the perf model on the H200 sweep of several MoE shapes and score it shape by shape held out.

Input: the sweep of ``bench/moe_h200.py`` (``bench/data/h200_moe_sweep.jsonl.gz``: vLLM 0.33's own
kernel, every config that fits the RTX 4090 at 6 batch sizes, 7 (shape, dtype) cases).

* ``--fit``: coefficients fitted on every case (``tilefit.perf.calibrate.fit``, rank loss), written
  with provenance to ``--write`` (the bundled H200 file);
* ``--loso``: leave one shape out: for each of the 4 shapes, fit on the other 3, then pick with
  the GPU-free fixer (``tilefit.app.compare_fixes`` on the shape's starting table, the fold's
  coefficients) and score every pick against the sweep: best fitting config's time / the pick's
  time (1.0 = best). vLLM's ``get_default_config`` and the naive fix are scored the same way.
* ``--finals FILE``: the final-round plan for ``moe_h200.py --phase final`` (per point: the
  sweep's 4 best, the fixer's LOSO pick, vLLM's default, the naive fix, and the tuner's pick read
  on the device from ``--tune-tables``).

Scoring uses the sweep's screening times; a pick the sweep did not time is reported as such
(the final rounds time it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from moe_cases import MS, ckey, combos, fits, naive, norm, start_entries, table_path, vllm_default  # noqa: E402

SWEEP = HERE / "data" / "h200_moe_sweep.jsonl.gz"


def load_sweep(path=SWEEP):
    times: dict = {}
    configs: dict = {}
    for line in gzip.open(path, "rt"):
        r = json.loads(line)
        if r["status"] != "ok":
            continue
        times.setdefault((r["combo"], r["M"]), {})[ckey(r["config"])] = r["time_us"]
        configs[ckey(r["config"])] = norm(r["config"])
    return times, configs


def fitting_times(times, configs):
    """Per point: only configs that fit the RTX 4090 (the starting entry does not)."""
    by_name = {c.name: c for c in combos()}
    out = {}
    for (name, M), tm in times.items():
        c = by_name[name]
        out[(name, M)] = {k: v for k, v in tm.items() if fits(c, configs[k])}
    return out


def samples(fit_times, configs, names, keep: float = 1.6):
    """Samples of the given combos: per point every config within ``keep`` x of the fastest, and
    every fifth of the rest (the rank loss weighs the far ones little)."""
    from moe_cases import _planner

    from tilefit.perf.calibrate import Sample

    by_name = {c.name: c for c in combos()}
    out = []
    for (name, M), tm in sorted(fit_times.items()):
        if name not in names:
            continue
        c = by_name[name]
        meta = _ctx_meta(c)
        best = min(tm.values())
        for i, (k, t) in enumerate(sorted(tm.items())):
            if t > keep * best and i % 5:
                continue
            smem = _planner().need(meta, configs[k], "sm_90", "NVIDIA")
            out.append(Sample(configs[k], c.gemm_shape(M), t, smem, f"{name}/M={M}"))
    return out


def _ctx_meta(combo):
    from moe_cases import _context

    return _context(combo).meta


def fit(train, rounds: int = 6):
    """Rank-loss fit of every coefficient but the launch overhead (a constant per launch: the rank
    loss cannot see it, it would only flatten small kernels' differences)."""
    from tilefit.device_db import load_database
    from tilefit.perf.calibrate import FIT_BOUNDS
    from tilefit.perf.calibrate import fit as fit_

    dev = load_database().get("h200")
    params = [p for p in FIT_BOUNDS if p != "launch_overhead_us"]
    return fit_(train, dev, loss="rank", rounds=rounds, params=params)


def write_coefficients(path: str | Path, values: dict, provenance: dict) -> None:
    from tilefit.perf.coefficients import write_coefficients as write

    write(path, values, provenance, device="h200",
          sources={k: "fitted (rank loss) to bench/data/h200_moe_sweep.jsonl.gz" for k in values})


def fixer_picks(values: dict | None, combo, folder: Path, unsafe: bool = True) -> dict:
    """The fixer's picks for ``combo``'s starting table with coefficients ``values`` (None: the
    installed ones), computed in this process through a temporary coefficient file."""
    from tilefit.perf import coefficients as co

    from moe_cases import fixer_picks as picks

    old = os.environ.get(co.ENV_VAR)
    tmp = None
    try:
        if values is not None:
            tmp = Path(tempfile.mkdtemp()) / "fold.json"
            co.write_coefficients(tmp, values, {"method": "leave-one-shape-out fold"}, device="h200")
            os.environ[co.ENV_VAR] = str(tmp)
            os.environ["TILEFIT_ISOLATED_PERF"] = "1"
        co._files.cache_clear()
        return picks(combo, folder, unsafe)
    finally:
        if old is None:
            os.environ.pop(co.ENV_VAR, None)
        else:
            os.environ[co.ENV_VAR] = old
        co._files.cache_clear()


def score(fit_times, name, M, cfg):
    tm = fit_times[(name, M)]
    if cfg is None:
        return None
    t = tm.get(ckey(cfg))
    return min(tm.values()) / t if t else None


def summarize(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    if not vals:
        return "n/a"
    return f"median {statistics.median(vals):.3f} min {min(vals):.3f} (n={len(vals)})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sweep", default=str(SWEEP))
    ap.add_argument("--loso", action="store_true")
    ap.add_argument("--fit", action="store_true")
    ap.add_argument("--write", help="coefficient file to write (--fit)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--folds", default="", help="only these held-out cases (comma-separated)")
    ap.add_argument("--installed", action="store_true", help="score the installed coefficients (no fit)")
    ap.add_argument("--safe", action="store_true", help="fixer without --unsafe-fixes (BLOCK_SIZE_K kept)")
    ap.add_argument("--variants", action="store_true",
                    help="also the fixer without --unsafe-fixes and with the installed coefficients")
    ap.add_argument("--json", help="write the per-point scores here")
    ap.add_argument("--finals", help="write the final-round plan here")
    ap.add_argument("--tune", default="mixtral-8x7b/bf16,qwen3-next-80b-a3b/fp8_w8a8",
                    help="combos whose starting table `tilefit tune --emulate rtx4090` re-tunes on the device")
    args = ap.parse_args(argv)
    times, configs = load_sweep(args.sweep)
    ft = fitting_times(times, configs)
    all_combos = combos()
    cases = sorted({c.case.name for c in all_combos})
    folder = Path(tempfile.mkdtemp())
    report: dict = {"points": [], "folds": {}}
    if args.fit:
        t = time.perf_counter()
        train = samples(ft, configs, {c.name for c in all_combos})
        rep = fit(train, args.rounds)
        print(f"fit on all {len(train)} samples: rank loss {rep.loss_before:.4f} -> {rep.loss_after:.4f}, "
              f"spearman {rep.rank_before:.3f} -> {rep.rank_after:.3f} ({time.perf_counter() - t:.0f} s)")
        print(json.dumps(rep.values))
        report["fit"] = rep.as_dict()
        if args.write:
            write_coefficients(args.write, rep.values, {
                "method": "tilefit.perf.calibrate.fit, rank loss, on the sweep of vLLM 0.33's fused_moe_kernel "
                          "(bench/moe_h200.py --phase sweep): every config that fits the RTX 4090 of the engines' "
                          "tuning grid, 7 (shape, dtype) cases of 4 MoE shapes, M 1..4096",
                "date": time.strftime("%Y-%m-%d"), "tool": "bench/moe_fit.py --fit", "measurements": len(train),
                "device_name": "NVIDIA H200", "triton_version": "3.6.0", "kernel": "vllm 0.33.0 fused_moe_kernel",
                "data": "bench/data/h200_moe_sweep.jsonl.gz", "rank_loss_before": round(rep.loss_before, 5),
                "rank_loss_after": round(rep.loss_after, 5)})
    if args.loso or args.installed:
        folds = [f for f in cases if not args.folds or f in args.folds.split(",")]
        for held in folds:
            values = None
            if args.loso:
                t = time.perf_counter()
                train = samples(ft, configs, {c.name for c in all_combos if c.case.name != held})
                rep = fit(train, args.rounds)
                values = rep.values
                report["folds"][held] = rep.as_dict()
                print(f"fold {held}: {len(train)} samples, rank loss {rep.loss_before:.4f} -> {rep.loss_after:.4f} "
                      f"({time.perf_counter() - t:.0f} s)")
            for combo in (c for c in all_combos if c.case.name == held):
                variants = {"fixer": fixer_picks(values, combo, folder / held, unsafe=not args.safe)}
                if args.variants:
                    variants["fixer_safe"] = fixer_picks(values, combo, folder / held, unsafe=False)
                    variants["fixer_installed"] = fixer_picks(None, combo, folder / held, unsafe=not args.safe)
                starts = start_entries(combo)
                for M in MS:
                    start = starts[M][0]
                    tm = ft[(combo.name, M)]
                    row = {"combo": combo.name, "M": M, "held_out": held, "start": ckey(start),
                           "start_source": starts[M][1], "best": min(tm, key=tm.get),
                           "vllm_default": ckey(vllm_default(combo, M)), "naive": ckey(naive(combo, start) or {})}
                    for role, picks in variants.items():
                        row[role] = ckey(picks[M]) if M in picks else None
                        row[f"{role}_speed"] = score(ft, combo.name, M, picks.get(M))
                    row["vllm_default_speed"] = score(ft, combo.name, M, vllm_default(combo, M))
                    row["naive_speed"] = score(ft, combo.name, M, naive(combo, start))
                    report["points"].append(row)
                    fs = row["fixer_speed"]
                    print(f"  {combo.name:32s} M={M:5d} fixer {row['fixer']:22s} "
                          f"{'n/a' if fs is None else f'{fs:.3f}':6s} vllm {row['vllm_default_speed'] or 0:.3f} "
                          f"naive {row['naive_speed'] or 0:.3f}")
        for held in folds:
            rows = [r for r in report["points"] if r["held_out"] == held]
            print(f"{held:22s} fixer {summarize(rows, 'fixer_speed')}; vLLM default "
                  f"{summarize(rows, 'vllm_default_speed')}; naive {summarize(rows, 'naive_speed')}")
            for role in ("fixer_safe", "fixer_installed"):
                if any(role in r for r in rows):
                    print(f"{'':22s} {role} {summarize(rows, role + '_speed')}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    if args.finals:
        by_name = {c.name: c for c in all_combos}
        tune = {name: {"entries": {str(M): e for M, (e, _) in start_entries(by_name[name]).items()}}
                for name in args.tune.split(",") if name}
        finals = {"combos": [c.as_json() for c in all_combos], "points": [], "tune": tune}
        plan = json.loads((HERE / "data" / "h200_moe_plan.json").read_text())
        before = {(c["name"], int(M)): x["roles"].get("fixer_before") for c in plan["combos"]
                  for M, x in c["extras"].items()}
        for r in report["points"]:
            tm = ft[(r["combo"], r["M"])]
            roles = {f"sweep_{i}": configs[k] for i, k in enumerate(sorted(tm, key=tm.get)[:4])}
            for role in ("fixer", "fixer_safe", "fixer_installed", "vllm_default", "naive"):
                if r.get(role):
                    roles[role] = dict(zip(("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                                            "num_warps", "num_stages"), map(int, r[role].split("/"))))
            if before.get((r["combo"], r["M"])):
                roles["fixer_before"] = before[(r["combo"], r["M"])]
            finals["points"].append({"combo": r["combo"], "M": r["M"], "roles": roles})
        Path(args.finals).write_text(json.dumps(finals, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
