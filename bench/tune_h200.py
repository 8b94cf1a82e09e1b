"""Re-tuning offending entries vs an exhaustive sweep, on a GPU, emulating an RTX 4090's limit.

Case (issue 6): Qwen3-30B-A3B gate/up GEMM, E=128, N=1536 (2 x 768), K=2048, top_k=8, fp8_w8a8
(per-tensor) and bf16, batch sizes 1, 16, 64, 256, 1024, 4096. The starting table is an H200
table as a user would copy it: every entry is a config that needs more than the RTX 4090's
101376 bytes per block (fp8: SGLang's old default 128x256x128/G32/w8/s4 = 147456 B on sm_89;
bf16: 128x256x64/G1/w8/s4 = 147456 B).

Phases (each writes its results under --out as it finishes, so a cut-off run keeps them):

1. calibrate: a designed sample of fitting configs is measured at every M; the performance
   model's coefficients are fitted to it (tilefit.perf.calibrate) -> perf_fit.json.
2. tune: tilefit's tuner path for the offending entries: candidates = the engines' tuning grid
   restricted to configs that fit sm_89 (exact Triton shared-memory figures for sm_89, from
   bench/data/qwen3_gateup_grid_smem_triton-3.6.json), ranked by the calibrated model, top-k
   compiled (own Triton cache) and measured; the best by measurement wins -> tune.jsonl.
3. sweep: every fitting config measured at every M, same method -> sweep.jsonl.
4. final: interleaved rounds of (warmup=25 ms, rep=100 ms) timings on the tuner's pick, the
   sweep's top configs, the naive fix and the fixer's GPU-free pick (computed now by
   ``tilefit.app.compare_fixes`` for the RTX 4090) -> final.json, summary.json.

Timings are ``tilefit.tune.measure``'s: CUDA-graph replays after an L2 flush, median.

GPU time counts only the time the GPU spends in measurements (compiles run on the host's other
cores in parallel and are reported separately).

    python bench/tune_h200.py --out $OUT --phases calibrate,tune,sweep,final
    python bench/tune_h200.py --dry-run --out /tmp/x   # control flow on the CPU, fake times
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GRID_FILE = HERE / "data" / "qwen3_gateup_grid_smem_triton-3.6.json"
MS = (1, 16, 64, 256, 1024, 4096)
E, N_GEMM, K_HIDDEN, TOP_K = 128, 1536, 2048, 8
LIMIT_4090 = 101376
OFFENDING = {
    "fp8_w8a8": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32,
                 "num_warps": 8, "num_stages": 4},
    "bf16": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
             "num_warps": 8, "num_stages": 4},
}
QUANT = {"fp8_w8a8": "per_tensor", "bf16": "none"}
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, file=sys.stderr, flush=True)


def ckey(cfg) -> str:
    return "/".join(str(cfg[k]) for k in KEYS)


def smem_table() -> dict:
    doc = json.loads(GRID_FILE.read_text())
    table = {}
    for p in doc["points"]:
        if p["arch"] == "sm_89" and p["shared"] is not None:
            table[(p["dtype"], p["BLOCK_SIZE_M"], p["BLOCK_SIZE_N"], p["BLOCK_SIZE_K"], p["num_warps"],
                   p["num_stages"])] = p["shared"]
    return table


def sm89_need(table, dtype):
    def need(cfg):
        return table.get((dtype, cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"], cfg["num_warps"],
                          cfg["num_stages"]))
    return need


def naive_fix(cfg, need):
    """What users do today: drop num_stages until it fits, then halve the largest block."""
    cfg = dict(cfg)
    while True:
        n = need(cfg)
        if n is not None and n <= LIMIT_4090:
            return cfg
        if cfg["num_stages"] > 2:
            cfg["num_stages"] -= 1
            continue
        big = max(("BLOCK_SIZE_N", "BLOCK_SIZE_M", "BLOCK_SIZE_K"), key=lambda k: cfg[k])
        cfg[big] //= 2


def gemm_shape(dtype, M):
    from tilefit.perf.shapes import GemmShape

    return GemmShape("fused_moe", dtype, M, n=N_GEMM, k=K_HIDDEN, experts=E, top_k=TOP_K, a_rows_unique=M,
                     model="Qwen3-30B-A3B")


class Bench:
    """Measurements on the GPU, or fake ones (--dry-run) from a perturbed model."""

    def __init__(self, dry: bool, out: Path):
        self.dry = dry
        self.out = out
        self.workloads = {}
        self.gpu_seconds = {}
        if not dry:
            import torch

            self.device_name = torch.cuda.get_device_name(0)
        else:
            self.device_name = "dry-run"

    def workload(self, dtype, M):
        key = (dtype, M)
        if key not in self.workloads:
            from tilefit.tune.workload import MoEShape, MoEWorkload

            shape = MoEShape(E, N_GEMM, K_HIDDEN, TOP_K, dtype, QUANT[dtype])
            self.workloads[key] = MoEWorkload(shape, M, "cuda")
        return self.workloads[key]

    def precompile(self, dtype, configs, Ms, cache_dir: str):
        if self.dry or not configs:
            return 0.0
        from tilefit.tune.precompile import precompile
        from tilefit.tune.workload import MoEShape

        os.environ["TRITON_CACHE_DIR"] = cache_dir
        classes = sorted({1 if m == 1 else 16 for m in Ms})  # M=1 specialises differently
        items = [(c, m) for c in configs for m in classes]
        t = time.perf_counter()
        precompile(MoEShape(E, N_GEMM, K_HIDDEN, TOP_K, dtype, QUANT[dtype]), items,
                   workers=max(1, (os.cpu_count() or 2) - 2))
        return time.perf_counter() - t

    def measure(self, dtype, M, cfg, phase, warmup_ms=2, rep_ms=10):
        if self.dry:
            from tilefit.device_db import load_database
            from tilefit.perf.model import predict

            dev = load_database().get("h200")
            rnd = random.Random(ckey(cfg) + str(M))
            t = predict(cfg, gemm_shape(dtype, M), dev).time_us * math.exp(rnd.gauss(0, 0.25))
            rec = {"config": cfg, "M": M, "status": "ok", "time_us": t, "gpu_seconds": 0.001}
        else:
            from tilefit.tune.measure import measure

            rec = measure(self.workload(dtype, M), cfg, warmup_ms=warmup_ms, rep_ms=rep_ms).to_json()
        self.gpu_seconds[phase] = self.gpu_seconds.get(phase, 0.0) + rec["gpu_seconds"]
        rec["dtype"] = dtype
        rec["phase"] = phase
        return rec


def write_jsonl(path: Path, rows):
    with open(path, "a") as fh:
        for r in rows:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")


def design_sample(fit_configs, n, seed=7):
    """A stratified sample over BM x num_stages x num_warps (each cell at least once)."""
    rnd = random.Random(seed)
    cells = {}
    for c in fit_configs:
        cells.setdefault((c["BLOCK_SIZE_M"], c["num_stages"], c["num_warps"]), []).append(c)
    picked = [rnd.choice(v) for v in cells.values()]
    rest = [c for c in fit_configs if c not in picked]
    rnd.shuffle(rest)
    return (picked + rest)[:max(n, len(picked))]


def fixer_picks(state: Path, dtypes) -> dict:
    """The GPU-free fixer's choice for each offending entry when the table is fixed for the RTX
    4090 (``tilefit check --fix --target rtx4090``), computed now on the host."""
    from tilefit.app import compare_fixes

    names = {"fp8_w8a8": "E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
             "bf16": "E=128,N=768,device_name=NVIDIA_H200.json"}
    picks = {}
    for d in dtypes:
        path = state / names[d]
        path.write_text(json.dumps({str(M): OFFENDING[d] for M in MS}, indent=4))
        for row in compare_fixes(str(path), ["rtx4090"]):
            picks[f"{d}/{row.M}"] = {k: row.chosen[k] for k in KEYS}
    return picks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--phases", default="calibrate,tune,sweep,final")
    ap.add_argument("--dtypes", default="fp8_w8a8,bf16")
    ap.add_argument("--seed", type=int, default=8, help="model favourites measured first")
    ap.add_argument("--budget", type=int, default=24, help="measurements per entry")
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--tuner-model", choices=("default", "calibrated"), default="default",
                    help="coefficients the tuner's search is guided by")
    ap.add_argument("--sweep-top", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--state", default=os.environ.get("TILEFIT_BENCH_STATE", "/tmp/tilefit_bench_state"))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    phases = args.phases.split(",")
    dtypes = args.dtypes.split(",")
    t_start = time.perf_counter()
    bench = Bench(args.dry_run, out)
    table = smem_table()

    from tilefit.device_db import load_database
    from tilefit.perf.calibrate import Sample, fit
    from tilefit.perf.coefficients import load_coefficients
    from tilefit.tune.space import tuning_space

    db = load_database()
    h200 = db.get("h200")
    space = tuning_space(groups=(1, 16))
    fitting = {d: [c for c in space if (sm89_need(table, d)(c) or 10**9) <= LIMIT_4090] for d in dtypes}
    for d in dtypes:
        log(f"{d}: {len(fitting[d])} of {len(space)} grid configs fit sm_89 (Triton 3.6 exact figures)")
    summary_path = state / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    summary.update({"device": bench.device_name, "shape": {"E": E, "N": N_GEMM, "K": K_HIDDEN, "top_k": TOP_K},
                    "Ms": MS, "fitting": {d: len(fitting[d]) for d in dtypes}})

    def smem_oracle(dtype):
        need = sm89_need(table, dtype)
        return lambda cfg, dev: need(cfg)

    # -- 1. calibrate ---------------------------------------------------------------------------
    coeffs = load_coefficients(h200)
    fit_file = state / "perf_fit.json"
    if "calibrate" in phases:
        rows = []
        t_cal = time.perf_counter()
        for d in dtypes:
            sample = design_sample(fitting[d], args.sample)
            summary.setdefault("compile_s", {})[f"calibrate/{d}"] = bench.precompile(d, sample, MS, "/tmp/tc_cal")
            for M in MS:
                for cfg in sample:
                    rows.append(bench.measure(d, M, cfg, "calibrate"))
        write_jsonl(out / "calibrate.jsonl", rows)
        samples = [Sample(r["config"], gemm_shape(r["dtype"], r["M"]), r["time_us"],
                          sm89_need(table, r["dtype"])(r["config"]), f"{r['dtype']}/M={r['M']}")
                   for r in rows if r["status"] == "ok"]
        report = fit(samples, h200)
        fit_file.write_text(json.dumps(report.as_dict(), indent=1))
        (out / "perf_fit.json").write_text(json.dumps(report.as_dict(), indent=1))
        summary["calibrate"] = {"measurements": len(rows), "wall_s": time.perf_counter() - t_cal,
                                **{k: v for k, v in report.as_dict().items() if k != "values"}}
        log("calibration:", summary["calibrate"])
    if fit_file.exists():
        coeffs = coeffs.with_(**json.loads(fit_file.read_text())["values"])

    # -- 2. tune ------------------------------------------------------------------------------
    if "tune" in phases:
        from tilefit.perf.model import predict
        from tilefit.tune.search import guided_search

        tuner_coeffs = load_coefficients(h200) if args.tuner_model == "default" else coeffs
        t_tune = time.perf_counter()
        picks = {}
        rows = []
        for d in dtypes:
            # Candidates and compiles: everything the search may touch is compiled up front in
            # parallel (the search's order is only known while measuring).
            need = sm89_need(table, d)
            prev: list = []

            def model_at(M):
                shape = gemm_shape(d, M)
                return lambda cfg: predict(cfg, shape, h200, tuner_coeffs, smem_bytes=need(cfg)).time_us

            # One compile pool per dtype, as `tilefit tune` does: every batch size's
            # best-predicted 3 x budget configs (a neighbour outside them compiles on first use).
            likely = {ckey(c): c for M in MS for c in sorted(fitting[d], key=model_at(M))[:args.budget * 3]}
            summary.setdefault("compile_s", {})[f"tune/{d}"] = bench.precompile(d, list(likely.values()), MS,
                                                                                 "/tmp/tc_tune")
            for M in MS:
                model = model_at(M)

                def run(cfg, M=M):
                    r = bench.measure(d, M, cfg, "tune")
                    rows.append(r)
                    return r["time_us"] if r["status"] == "ok" else None

                best, times = guided_search(fitting[d], model, run, seed=args.seed, budget=args.budget,
                                            seeds=prev)
                prev = [c for c in sorted((c for c in fitting[d] if times.get(ckey(c)) is not None),
                                          key=lambda c: times[ckey(c)])[:2]]
                picks[f"{d}/{M}"] = best
        write_jsonl(out / "tune.jsonl", rows)
        (state / "tune_picks.json").write_text(json.dumps(picks))
        summary["tune"] = {"measurements": len(rows), "wall_s": time.perf_counter() - t_tune,
                           "gpu_s": bench.gpu_seconds.get("tune", 0.0), "picks": picks,
                           "model": args.tuner_model, "seed": args.seed, "budget": args.budget}
        log("tune:", {k: v for k, v in summary["tune"].items() if k != "picks"})
        summary_path.write_text(json.dumps(summary, indent=1))

    # -- 3. sweep -----------------------------------------------------------------------------
    if "sweep" in phases:
        t_sweep = time.perf_counter()
        best = {}
        for d in dtypes:
            # same Triton cache as the tuner's: the sweep compiles only what the tuner did not
            summary.setdefault("compile_s", {})[f"sweep/{d}"] = bench.precompile(d, fitting[d], MS, "/tmp/tc_tune")
            for M in MS:
                rows = [bench.measure(d, M, c, "sweep") for c in fitting[d]]
                write_jsonl(out / "sweep.jsonl", rows)
                ok = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r["time_us"])
                best[f"{d}/{M}"] = [r["config"] for r in ok[:args.sweep_top]]
                log(f"sweep {d} M={M}: {len(ok)} ok, best {ok[0]['time_us']:.1f} us {ckey(ok[0]['config'])}")
        (state / "sweep_best.json").write_text(json.dumps(best))
        summary["sweep"] = {"wall_s": time.perf_counter() - t_sweep, "gpu_s": bench.gpu_seconds.get("sweep", 0.0)}
        summary_path.write_text(json.dumps(summary, indent=1))

    # -- 4. final -----------------------------------------------------------------------------
    if "final" in phases:
        picks = json.loads((state / "tune_picks.json").read_text())
        best = json.loads((state / "sweep_best.json").read_text())
        fixer = fixer_picks(state, dtypes)
        (out / "fixer_picks.json").write_text(json.dumps(fixer, indent=1))
        rows = []
        result = {}
        for d in dtypes:
            need = sm89_need(table, d)
            all_roles = {}
            for M in MS:
                roles = {"tune": picks.get(f"{d}/{M}"), "naive_fix": naive_fix(OFFENDING[d], need)}
                if fixer.get(f"{d}/{M}"):
                    roles["fixer"] = fixer[f"{d}/{M}"]
                for i, c in enumerate(best.get(f"{d}/{M}", [])):
                    roles[f"sweep_{i}"] = c
                all_roles[M] = roles
            final_configs = list({ckey(c): c for roles in all_roles.values() for c in roles.values() if c}.values())
            summary.setdefault("compile_s", {})[f"final/{d}"] = bench.precompile(d, final_configs, MS, "/tmp/tc_tune")
            for M in MS:
                roles = all_roles[M]
                configs = {ckey(c): c for c in roles.values() if c}
                times = {k: [] for k in configs}
                for rnd in range(args.rounds):
                    order = list(configs)
                    random.Random(rnd).shuffle(order)
                    for k in order:
                        r = bench.measure(d, M, configs[k], "final", warmup_ms=25, rep_ms=100)
                        rows.append(r)
                        if r["status"] == "ok":
                            times[k].append(r["time_us"])
                med = {k: sorted(v)[len(v) // 2] for k, v in times.items() if v}
                sweep_keys = [ckey(c) for c in best.get(f"{d}/{M}", []) if ckey(c) in med]
                best_us = min(med[k] for k in sweep_keys) if sweep_keys else None
                entry = {"best_sweep_us": best_us}
                for role, c in roles.items():
                    if c and not role.startswith("sweep_") and ckey(c) in med:
                        entry[f"{role}_us"] = med[ckey(c)]
                        entry[f"{role}_config"] = ckey(c)
                        entry[f"{role}_speed_vs_best"] = best_us / med[ckey(c)] if best_us else None
                result[f"{d}/{M}"] = entry
                log(f"final {d} M={M}: {entry}")
        write_jsonl(out / "final.jsonl", rows)
        summary["final"] = result
    summary["total_wall_s"] = time.perf_counter() - t_start
    summary["gpu_seconds"] = bench.gpu_seconds
    summary_path.write_text(json.dumps(summary, indent=1))
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    log("done in", round(summary["total_wall_s"], 1), "s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
