"""Sweep and final rounds of the engine's own fused-MoE kernel on a lent GPU (issue 13).

Runs vLLM 0.33's ``fused_moe_kernel`` (taken from the engine's source by AST, carried as a scratch
module: ``--kernel``), launched as vLLM launches it (:mod:`engine_moe`), on the cases of
:mod:`moe_cases`.

``--phase sweep`` (input: ``python bench/moe_cases.py --plan plan.json``): every fitting grid tile
at GROUP_SIZE_M 1 at every batch size, plus each point's starting entry, naive fix, vLLM default
and fixer pick; then GROUP_SIZE_M 16/32/64 on the ``--g-top`` fastest configs of every point with
M >= 16. Timer: :func:`tilefit.tune.measure.measure` (CUDA-graph replays after an L2 flush,
median), each result checked against an fp32 reference first. Compiles run ahead in a pool of
``--workers`` processes (``JITFunction.warmup``: compile only, no launch, so the GPU is not
shared with the timing), deduplicated by the launch's specialisation.

``--phase final`` (input: ``--finals finals.json`` from ``bench/moe_fit.py``): per point the
finalists (sweep's best few, the fixer's pick, vLLM's default, the naive fix, the tuner's pick
read from ``tune_tables``) in ``--rounds`` shuffled, interleaved rounds with the same timer.

Everything is written to ``--out`` as it finishes (JSON lines, gzip), so a run cut off at its
``--deadline`` keeps what it measured.

    python bench/moe_h200.py --phase sweep --plan plan.json --kernel .devrun/_tilefit_scratch_x.py --out $OUT
    python bench/moe_h200.py --phase sweep --plan plan.json --dry-run --out /tmp/x   # CPU, fake times
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

T0 = time.perf_counter()
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def log(*a):
    print(f"[{time.perf_counter() - T0:7.1f}s]", *a, file=sys.stderr, flush=True)


def ckey(cfg) -> str:
    return "/".join(str(cfg.get(k)) for k in KEYS)


def moe_shape(d: dict):
    from tilefit.tune.workload import MoEShape

    return MoEShape(d["E"], d["N"], d["K"], d["top_k"], d["dtype"], d["quant"],
                    tuple(d["block_shape"]) if d.get("block_shape") else None)


# -- compile pool ----------------------------------------------------------------------------------
_KERNEL = None


def _init_worker(kernel_path: str) -> None:
    global _KERNEL
    import torch

    torch.cuda.set_device(0)
    from engine_moe import load_kernel

    _KERNEL = load_kernel(kernel_path)


def _compile(shape_json: str, M: int, cfg: dict) -> tuple[str, str]:
    from engine_moe import EngineLaunch, tiny_pointers

    shape = moe_shape(json.loads(shape_json))
    try:
        EngineLaunch(_KERNEL, shape, M, cfg).warmup(tiny_pointers(shape, M))
        return ckey(cfg), "ok"
    except Exception as exc:  # noqa: BLE001 - reported, the timing run reports it again
        return ckey(cfg), f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


class Compiler:
    def __init__(self, kernel_path: str | None, workers: int, dry: bool):
        self.dry = dry
        self.pool = None if dry else ProcessPoolExecutor(
            max_workers=workers, mp_context=__import__("multiprocessing").get_context("spawn"),
            initializer=_init_worker, initargs=(kernel_path,))
        self.seen: dict = {}
        self.failed = 0
        self.submitted = 0

    def submit(self, shape_json: str, shape, M: int, cfg: dict):
        """A future for the compile of (cfg, M)'s specialisation (shared with equal ones)."""
        from engine_moe import specialization

        key = (shape_json, ckey(cfg), specialization(shape, M, cfg))
        fut = self.seen.get(key)
        if fut is None and not self.dry:
            fut = self.seen[key] = self.pool.submit(_compile, shape_json, M, dict(cfg))
            self.submitted += 1
        return fut

    def wait(self, futures) -> None:
        for f in futures:
            if f is not None and f.result()[1] != "ok":
                self.failed += 1

    def close(self):
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)


# -- timing ----------------------------------------------------------------------------------------
class Timer:
    def __init__(self, kernel_path: str | None, dry: bool):
        self.dry = dry
        self.kernel = None
        self.workloads: dict = {}
        self.gpu_seconds: dict = {}
        if not dry:
            from engine_moe import check_parameters, load_kernel

            self.kernel = load_kernel(kernel_path)
            check_parameters(self.kernel)

    def workload(self, combo: dict, M: int, replica: int = 0):
        key = (combo["name"], M, replica)
        wl = self.workloads.get(key)
        if wl is None:
            from engine_moe import EngineWorkload

            base = self.workload(combo, M) if replica else None
            wl = self.workloads[key] = EngineWorkload(moe_shape(combo["shape"]), M, self.kernel, replica=replica,
                                                      base=base)
        return wl

    def drop(self, combo: dict) -> None:
        if self.dry:
            return
        for key in [k for k in self.workloads if k[0] == combo["name"]]:
            del self.workloads[key]
        from tilefit.tune import workload as w

        w._WEIGHTS.clear()
        import torch

        torch.cuda.empty_cache()

    def measure(self, combo: dict, M: int, cfg: dict, phase: str, warmup_ms: float, rep_ms: float,
                replica: int = 0, min_runs: tuple | None = None, steady: tuple | None = None) -> dict:
        w0 = time.time()
        if self.dry:
            from moe_cases import Combo, combos

            by_name = {c.name: c for c in combos()}
            from tilefit.device_db import load_database
            from tilefit.perf.model import predict

            dev = load_database().get("h200")
            rnd = random.Random(ckey(cfg) + str(M) + combo["name"])
            t = predict(cfg, by_name[combo["name"]].gemm_shape(M), dev).time_us * math.exp(rnd.gauss(0, 0.2))
            rec = {"config": dict(cfg), "M": M, "status": "ok", "time_us": t, "gpu_seconds": 0.0, "timer": "dry"}
            _ = Combo
        else:
            from tilefit.tune.measure import measure

            rec = measure(self.workload(combo, M, replica), cfg, warmup_ms=warmup_ms, rep_ms=rep_ms,
                          **({"min_runs": tuple(min_runs)} if min_runs else {}),
                          **({"steady": tuple(steady)} if steady else {})).to_json()
        self.gpu_seconds[combo["name"]] = self.gpu_seconds.get(combo["name"], 0.0) + rec["gpu_seconds"]
        # wall clock (time.time) of the call: the timing window is its last rep_ms, for the telemetry
        rec.update(combo=combo["name"], phase=phase, t=round(time.perf_counter() - T0, 2), replica=replica,
                   w0=round(w0, 4), w1=round(time.time(), 4))
        return rec


class Telemetry:
    """The GPU's SM and memory clocks, power, temperature and clock-event reasons, sampled every
    ``period_s`` in a thread (NVML through pynvml; else ``nvidia-smi -lms`` in a child process),
    written to ``telemetry.jsonl.gz``. Read-only: nothing here changes the device's settings."""

    def __init__(self, out: Path, period_s: float = 0.01, dry: bool = False):
        self.out, self.period, self.rows, self.stop_flag = out, period_s, [], False
        self.thread = self.proc = None
        self.source = "none"
        if dry:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv, self.h = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
            reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
            self.reasons = reasons
            import threading

            self.thread = threading.Thread(target=self._loop, daemon=True)
            self.thread.start()
            self.source = "nvml"
        except Exception as exc:  # noqa: BLE001 - fall back to nvidia-smi
            import shutil
            import subprocess

            log(f"telemetry: no NVML ({type(exc).__name__}: {exc}); nvidia-smi")
            if shutil.which("nvidia-smi"):
                self.csv = open(out / "telemetry_smi.csv", "w")
                self.proc = subprocess.Popen(
                    ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                     "clocks_event_reasons.active", "--format=csv,noheader,nounits", f"-lms={int(period_s * 1000) or 20}"],
                    stdout=self.csv, stderr=subprocess.STDOUT)
                self.source = "nvidia-smi"

    def _loop(self):
        nv, h = self.nv, self.h
        while not self.stop_flag:
            try:
                self.rows.append((round(time.time(), 4), nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                                  nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM), nv.nvmlDeviceGetPowerUsage(h),
                                  nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU), int(self.reasons(h))))
            except Exception as exc:  # noqa: BLE001 - keep what was sampled
                log(f"telemetry stopped: {exc}")
                return
            time.sleep(self.period)

    def close(self) -> dict:
        self.stop_flag = True
        if self.thread is not None:
            self.thread.join(timeout=2)
        if self.proc is not None:
            self.proc.terminate()
            self.csv.close()
        with gzip.open(self.out / "telemetry.jsonl.gz", "wt") as fh:
            for r in self.rows:
                fh.write(json.dumps(dict(zip(("w", "sm_mhz", "mem_mhz", "power_mw", "temp_c", "reasons"), r))) + "\n")
        return {"telemetry": self.source, "samples": len(self.rows)}


class Sink:
    """JSON lines, gzip, flushed per record batch (a cut-off run keeps what it wrote)."""

    def __init__(self, path: Path):
        self.fh = gzip.open(path, "at")

    def write(self, rows):
        for r in rows:
            self.fh.write(json.dumps(r, separators=(",", ":")) + "\n")
        self.fh.flush()

    def close(self):
        self.fh.close()


def _distinct(configs):
    out = {}
    for c in configs:
        out.setdefault(ckey(c), dict(c))
    return out


# -- phases ----------------------------------------------------------------------------------------
def phase_sweep(args, out: Path) -> dict:
    plan = json.loads(Path(args.plan).read_text())
    combos = [c for c in plan["combos"] if not args.combos or c["name"] in args.combos.split(",")]
    Ms = [int(m) for m in (args.ms.split(",") if args.ms else plan["Ms"])]
    compiler = Compiler(args.kernel, args.workers, args.dry_run)
    timer = Timer(args.kernel, args.dry_run)
    sink = Sink(out / "sweep.jsonl.gz")
    deadline = T0 + args.deadline
    jobs = {}  # combo -> M -> {ckey: cfg}
    futures = {}
    for combo in combos:
        shape = moe_shape(combo["shape"])
        sj = json.dumps(combo["shape"], sort_keys=True)
        per_m = {}
        futs = []
        for M in Ms:
            extras = combo["extras"].get(str(M), {}).get("roles", {})
            per_m[M] = _distinct(list(combo["tiles"]) + list(extras.values()))
            futs += [compiler.submit(sj, shape, M, c) for c in per_m[M].values()]
        jobs[combo["name"]] = per_m
        futures[combo["name"]] = futs
    log(f"sweep: {len(combos)} combos, {sum(len(v) for j in jobs.values() for v in j.values())} timings, "
        f"{compiler.submitted} compiles queued")
    summary = {"combos": {}, "Ms": Ms}
    best: dict = {}
    stopped = False
    for combo in combos:
        name = combo["name"]
        t_wait = time.perf_counter()
        compiler.wait(futures[name])
        t_start = time.perf_counter()
        n = 0
        for M in Ms:
            rows = []
            for cfg in jobs[name][M].values():
                if time.perf_counter() > deadline:
                    stopped = True
                    break
                rows.append(timer.measure(combo, M, cfg, "sweep", args.warmup_ms, args.rep_ms))
            sink.write(rows)
            n += len(rows)
            ok = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r["time_us"])
            best[(name, M)] = ok
            bad = [r["status"] for r in rows if r["status"] != "ok"]
            if ok:
                log(f"{name} M={M}: {len(ok)} ok {len(bad)} failed ({sorted(set(bad))}); best "
                    f"{ok[0]['time_us']:.1f} us {ckey(ok[0]['config'])}")
            if stopped:
                break
        summary["combos"][name] = {"timings": n, "compile_wait_s": round(t_start - t_wait, 1),
                                   "wall_s": round(time.perf_counter() - t_start, 1),
                                   "gpu_s": round(timer.gpu_seconds.get(name, 0.0), 2)}
        if stopped:
            break
    # GROUP_SIZE_M on the fastest few of every point with M >= 16
    if not stopped and args.g_top:
        variants = []
        for combo in combos:
            name = combo["name"]
            shape = moe_shape(combo["shape"])
            sj = json.dumps(combo["shape"], sort_keys=True)
            for M in Ms:
                if M < 16:
                    continue
                have = set(jobs[name][M])
                for r in best.get((name, M), [])[:args.g_top]:
                    for g in (16, 32, 64):
                        cfg = dict(r["config"], GROUP_SIZE_M=g)
                        if ckey(cfg) not in have:
                            have.add(ckey(cfg))
                            variants.append((combo, M, cfg, compiler.submit(sj, shape, M, cfg)))
        log(f"group variants: {len(variants)}")
        for combo in combos:
            rows = []
            for c, M, cfg, fut in variants:
                if c is not combo:
                    continue
                if time.perf_counter() > deadline:
                    stopped = True
                    break
                compiler.wait([fut])
                rows.append(timer.measure(combo, M, cfg, "sweep_group", args.warmup_ms, args.rep_ms))
            sink.write(rows)
            summary["combos"].setdefault(combo["name"], {})["group_timings"] = len(rows)
            summary["combos"][combo["name"]]["gpu_s"] = round(timer.gpu_seconds.get(combo["name"], 0.0), 2)
            if stopped:
                break
    sink.close()
    compiler.close()
    summary.update(stopped_at_deadline=stopped, compiles=compiler.submitted, compile_failures=compiler.failed)
    return summary


def phase_final(args, out: Path) -> dict:
    finals = json.loads(Path(args.finals).read_text())
    compiler = Compiler(args.kernel, args.workers, args.dry_run)
    timer = Timer(args.kernel, args.dry_run)
    sink = Sink(out / "final.jsonl.gz")
    deadline = T0 + args.deadline
    combos = {c["name"]: c for c in finals["combos"]}
    # the tuner's picks (phase tune, same run)
    for picks_file in sorted(out.glob("tune_picks*.json")):
        role = "tune" + picks_file.stem[len("tune_picks"):]  # tune_picks_classic.json -> tune_classic
        for name, r in json.loads(picks_file.read_text()).items():
            for pt in finals["points"]:
                e = r["picks"].get(str(pt["M"]))
                if pt["combo"] == name and e:
                    pt["roles"][role] = e
    futs = []
    for pt in finals["points"]:
        combo = combos[pt["combo"]]
        shape = moe_shape(combo["shape"])
        sj = json.dumps(combo["shape"], sort_keys=True)
        for cfg in pt["roles"].values():
            futs.append(compiler.submit(sj, shape, pt["M"], cfg))
    log(f"final: {len(finals['points'])} points, {compiler.submitted} compiles")
    compiler.wait(futs)
    compiler.close()
    results = []
    current = None
    for pt in finals["points"]:
        combo = combos[pt["combo"]]
        if current is not None and current != combo["name"]:
            timer.drop(combos[current])
        current = combo["name"]
        M = pt["M"]
        configs = _distinct(pt["roles"].values())
        times = {k: [] for k in configs}
        by_replica = {k: [[] for _ in range(args.replicas)] for k in configs}
        rows = []
        # interleaved: each round times every config on every replica, a new shuffle each time
        for rnd in range(args.rounds):
            for rep in range(args.replicas):
                order = list(configs)
                random.Random((rnd * 7919 + M) * 31 + rep).shuffle(order)
                for k in order:
                    if time.perf_counter() > deadline:
                        break
                    r = timer.measure(combo, M, configs[k], "final", args.final_warmup_ms, args.final_rep_ms, rep)
                    r["round"] = rnd
                    rows.append(r)
                    if r["status"] == "ok":
                        times[k].append(r["time_us"])
                        by_replica[k][rep].append(r["time_us"])
        point = {"combo": combo["name"], "M": M}
        key = f"{combo['name']}:{M}"
        if key in args.long_warmup_points.split(",") and time.perf_counter() < deadline:
            # the same configs with a long warm-up each (its own steady clock and power state)
            long_times = {k: [] for k in configs}
            for rnd in range(args.long_warmup_rounds):
                order = list(configs)
                random.Random(rnd * 104729 + M).shuffle(order)
                for k in order:
                    if time.perf_counter() > deadline:
                        break
                    r = timer.measure(combo, M, configs[k], "final_longwarm", args.long_warmup_ms,
                                      args.final_rep_ms)
                    r["round"] = rnd
                    rows.append(r)
                    if r["status"] == "ok":
                        long_times[k].append(r["time_us"])
            point["longwarm_median_us"] = {k: sorted(v)[len(v) // 2] for k, v in long_times.items() if v}
            point["longwarm_times_us"] = long_times
        sink.write(rows)
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items() if v}
        point.update(median_us=med, times_us=times, roles={role: ckey(c) for role, c in pt["roles"].items()})
        if args.replicas > 1:
            point["replica_median_us"] = {k: [sorted(v)[len(v) // 2] if v else None for v in reps]
                                          for k, reps in by_replica.items()}
        results.append(point)
        best = min(med.values()) if med else None
        log(f"final {combo['name']} M={M}: " + ", ".join(
            f"{role}={best / med[ckey(c)]:.3f}" for role, c in pt["roles"].items() if ckey(c) in med and best))
        if time.perf_counter() > deadline:
            break
    sink.close()
    (out / "final_points.json").write_text(json.dumps(results, indent=1))
    return {"points": len(results), "gpu_s": {k: round(v, 2) for k, v in timer.gpu_seconds.items()}}


def phase_tune(args, out: Path) -> dict:
    """``tilefit tune --emulate rtx4090`` (its code path, :func:`tilefit.tune.runner.tune_files`)
    on the starting tables of ``finals["tune"]``, timing the engine's kernel: the runner's
    measurer is the engine's (same timer and timing window, same search), in this process; a
    kernel compiles at its first launch (compile time is not GPU time). ``--tune-variants``:
    ``new`` (the search as shipped: ``tune_picks.json``, role ``tune``) and/or a name of a
    ``TuneOptions`` flag that selects another search (``tune_picks_<name>.json``, role
    ``tune_<name>``; check 3 of issue 13 ran ``classic``, the search of commit dfdb235's
    ``classic_search``, beside an experiment that is not kept). ``plain_starts``: the search's
    start configs in plain model order (``tilefit.tune.search.DISTINCT_TILE_STARTS`` off: the
    search before issue 13's ninth pass), role ``tune_plain_starts``."""
    summary = {}
    for variant in args.tune_variants.split(","):
        summary[variant] = _tune_variant(args, out, variant)
    return {"tune": summary}


def _tune_variant(args, out: Path, variant: str) -> dict:
    finals = json.loads(Path(args.finals).read_text())
    combos = {c["name"]: c for c in finals["combos"]}
    from tilefit.tune import runner as R
    from tilefit.tune.measurer import TIMING_MS

    timer = Timer(args.kernel, args.dry_run)
    stats = {"timings": 0, "gpu_s": 0.0}
    current = {}

    def measure(shape: dict, config: dict, M: int):
        rec = timer.measure(current["combo"], M, dict(config), "tune", *TIMING_MS)  # the tuner's own settings
        stats["timings"] += 1
        stats["gpu_s"] += rec["gpu_seconds"]
        current["rows"].append(rec)
        return rec["time_us"] if rec["status"] == "ok" else None

    results = {}
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "tilefit_tune_tables"
    folder.mkdir(parents=True, exist_ok=True)
    for name, spec in (finals.get("tune") or {}).items():
        combo = combos[name]
        path = folder / combo["file_name"]
        path.write_text(json.dumps(spec["entries"], indent=4) + "\n")
        current.update(combo=combo, rows=[])
        before = dict(stats)
        t = time.perf_counter()
        local = None
        if args.dry_run:
            from tilefit.device_db import load_database

            local = load_database().get("h200")
        flags = {} if variant in ("new", "plain_starts") else {f"{variant}_search": True}
        import tilefit.tune.search as S

        saved = S.DISTINCT_TILE_STARTS
        S.DISTINCT_TILE_STARTS = saved if variant != "plain_starts" else False
        try:
            res = R.tune_files([str(path)], R.TuneOptions(emulate="rtx4090", budget=args.tune_budget,
                                                          estimator="analytic", **flags),
                               measure_fn=measure, local=local)
        finally:
            S.DISTINCT_TILE_STARTS = saved
        wall = time.perf_counter() - t
        picks = json.loads(path.read_text())
        for r in current["rows"]:
            r["variant"] = variant
        if current["rows"]:
            sink = Sink(out / f"tune{'' if variant == 'new' else '_' + variant}.jsonl.gz")
            sink.write(current["rows"])
            sink.close()
        results[name] = {"picks": {k: {x: v[x] for x in KEYS if x in v} for k, v in picks.items()},
                         "timings": stats["timings"] - before["timings"],
                         "gpu_s": round(stats["gpu_s"] - before["gpu_s"], 2), "wall_s": round(wall, 1),
                         "errors": res.errors, "written": len(res.written)}
        log(f"tune ({variant}) {name}: {results[name]['timings']} timings, {results[name]['gpu_s']} GPU s, {wall:.0f} s wall, "
            f"errors {res.errors}")
        timer.drop(combo)
    (out / f"tune_picks{'' if variant == 'new' else '_' + variant}.json").write_text(json.dumps(results, indent=1))
    return {k: {x: y for x, y in v.items() if x != "picks"} for k, v in results.items()}


def _tune_table(args, combo: dict, entries: dict, timer: "Timer", variant: str, rows: list) -> dict:
    """``tilefit tune --emulate rtx4090`` on one starting table (:func:`_tune_variant`'s body for one
    table): the runner's code path with the engine's kernel as its measurer, in this process."""
    from tilefit.tune import runner as R
    from tilefit.tune.measurer import TIMING_MS

    from tilefit.tune.measurer import CONFIRM_RUNS, CONFIRM_STEADY

    stats = {"timings": 0, "gpu_s": 0.0}

    def measure(shape: dict, config: dict, M: int, confirm: bool = False):
        # the tuner's own settings (GpuMeasurer's): its windows, the finalists' re-timings longer
        # (and warmed up to the steady clock where the kernel is long)
        rec = timer.measure(combo, M, dict(config), "tune", *TIMING_MS, min_runs=CONFIRM_RUNS if confirm else None,
                            steady=CONFIRM_STEADY if confirm else None)
        rec["confirm"] = confirm
        stats["timings"] += 1
        stats["gpu_s"] += rec["gpu_seconds"]
        rec["variant"] = variant
        rows.append(rec)
        return rec["time_us"] if rec["status"] == "ok" else None

    folder = Path(os.environ.get("TMPDIR", "/tmp")) / "tilefit_tune_tables"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / combo["file_name"]
    path.write_text(json.dumps(entries, indent=4) + "\n")
    local = None
    if args.dry_run:
        from tilefit.device_db import load_database

        local = load_database().get("h200")
    t = time.perf_counter()
    res = R.tune_files([str(path)], R.TuneOptions(emulate="rtx4090", budget=args.tune_budget, estimator="analytic"),
                       measure_fn=measure, local=local)
    picks = json.loads(path.read_text())
    return {"picks": {k: {x: v[x] for x in KEYS if x in v} for k, v in picks.items()},
            "timings": stats["timings"], "gpu_s": round(stats["gpu_s"], 4),
            "wall_s": round(time.perf_counter() - t, 2), "errors": res.errors, "written": len(res.written)}


def phase_ratio(args, out: Path) -> dict:
    """Check 11 (issue 13 item 5): the tuner's GPU time against the exhaustive sweep's, both timed
    in this process with the same timer, in ``--rounds`` rounds whose order alternates (even rounds
    tune first, odd rounds sweep first; the tables' order alternates too), so neither side always
    pays what comes first. Before the first round one measurement on a throwaway workload
    (``warmup`` in the rows, counted on neither side) takes the process's one-time costs (CUDA
    context, cuBLAS for the fp32 reference, the L2-flush buffer, the first graph capture). Each side
    starts with the table's inputs dropped (``Timer.drop``), so both pay their own references.

    Input (``--finals``): ``moe_check11_plan.py``'s plan: ``sweep`` (per table, the (M, config)
    list of the recorded sweep that fits the RTX 4090) and ``tune`` (the starting tables). Every
    sweep config is compiled in the pool before the first timing and the pool is closed (no
    compile shares the CPU with a timing); the tuner's own configs outside it compile at their first
    launch (compile time, not GPU time, on both sides: ``measure``'s ``compile_seconds``)."""
    plan = json.loads(Path(args.finals).read_text())
    combos = {c["name"]: c for c in plan["combos"]}
    names = [n for n in plan["tune"] if not args.combos or n in args.combos.split(",")]
    compiler = Compiler(args.kernel, args.workers, args.dry_run)
    futs = []
    for name in names:
        combo = combos[name]
        shape, sj = moe_shape(combo["shape"]), json.dumps(combo["shape"], sort_keys=True)
        futs += [compiler.submit(sj, shape, M, cfg) for M, cfg in plan["sweep"][name]]
    log(f"ratio: {len(futs)} sweep timings per round, {compiler.submitted} compiles")
    t = time.perf_counter()
    compiler.wait(futs)
    compiler.close()
    summary = {"compile_wall_s": round(time.perf_counter() - t, 1), "compiles": compiler.submitted,
               "compile_failures": compiler.failed, "rounds": []}
    timer = Timer(args.kernel, args.dry_run)
    sink = Sink(out / "ratio.jsonl.gz")
    deadline = T0 + args.deadline
    if not args.dry_run:
        warm = {"name": "warmup", "shape": {"E": 8, "N": 256, "K": 256, "top_k": 2, "dtype": "bf16", "quant": "none"}}
        cfg = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, "num_warps": 4,
               "num_stages": 3}
        rows = [timer.measure(warm, 16, cfg, "warmup", *(1.0, 6.0)) for _ in range(2)]
        sink.write(rows)
        timer.drop(warm)
        summary["warmup_gpu_s"] = [round(r["gpu_seconds"], 4) for r in rows]
        log(f"warm-up (neither side): {summary['warmup_gpu_s']} GPU s")
    stopped = False
    for rnd in range(args.rounds):
        order = names if rnd % 2 == 0 else names[::-1]
        sides = ("tune", "sweep") if rnd % 2 == 0 else ("sweep", "tune")
        sides = tuple(x for x in sides if x in args.ratio_sides.split(","))
        rec = {"round": rnd, "tables": list(order), "sides": list(sides), "results": {}}
        for name in order:
            combo = combos[name]
            res = rec["results"].setdefault(name, {})
            for side in sides:
                if time.perf_counter() > deadline:
                    stopped = True
                    break
                timer.drop(combo)
                rows: list = []
                t = time.perf_counter()
                if side == "tune":
                    r = _tune_table(args, combo, plan["tune"][name]["entries"], timer, f"r{rnd}", rows)
                    (out / f"tune_picks_r{rnd}.json").write_text(json.dumps(
                        {**json.loads((out / f"tune_picks_r{rnd}.json").read_text()), name: r}
                        if (out / f"tune_picks_r{rnd}.json").exists() else {name: r}, indent=1))
                    res["tune"] = {k: v for k, v in r.items() if k != "picks"}
                else:
                    for M, cfg in plan["sweep"][name]:
                        if time.perf_counter() > deadline:
                            stopped = True
                            break
                        rows.append(timer.measure(combo, M, cfg, "sweep", args.warmup_ms, args.rep_ms))
                    res["sweep"] = {"timings": len(rows), "gpu_s": round(sum(x["gpu_seconds"] for x in rows), 4),
                                    "wall_s": round(time.perf_counter() - t, 2), "complete": not stopped}
                for x in rows:
                    x.update(round=rnd, side=side)
                sink.write(rows)
                log(f"round {rnd} {name} {side}: {res[side]}")
                if stopped:
                    break
            if stopped:
                break
        for name, res in rec["results"].items():
            if "tune" in res and res.get("sweep", {}).get("complete") and res["tune"]["gpu_s"] > 0:
                res["ratio"] = round(res["sweep"]["gpu_s"] / res["tune"]["gpu_s"], 2)
        summary["rounds"].append(rec)
        (out / "ratio_summary.json").write_text(json.dumps(summary, indent=1))
        if stopped:
            break
        timer.drop(combos[order[-1]])
    sink.close()
    summary["stopped_at_deadline"] = stopped
    (out / "ratio_summary.json").write_text(json.dumps(summary, indent=1))
    return {"ratio": summary}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", required=True, help="sweep, or tune and/or final (comma-separated); ratio: "
                    "check 11's alternating rounds of tune and sweep (phase_ratio)")
    ap.add_argument("--tune-budget", type=int, default=16)
    ap.add_argument("--ratio-sides", default="tune,sweep", help="ratio: the sides timed (tune: the tuner's "
                    "rounds alone, the sweep still compiled first, so the tuner's kernels load from the cache "
                    "as in a full run; its GPU time against an earlier run's sweep)")
    ap.add_argument("--tune-variants", default="new", help="new and/or classic (comma-separated)")
    ap.add_argument("--plan")
    ap.add_argument("--finals")
    ap.add_argument("--kernel", help="scratch module of the engine's fused_moe_kernel")
    ap.add_argument("--out", required=True)
    ap.add_argument("--combos", default="")
    ap.add_argument("--ms", default="")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 4) - 3))
    ap.add_argument("--warmup-ms", type=float, default=1.0)
    ap.add_argument("--rep-ms", type=float, default=6.0)
    ap.add_argument("--final-warmup-ms", type=float, default=10.0)
    ap.add_argument("--final-rep-ms", type=float, default=40.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=1, help="final: time every config on this many copies of "
                    "the point's inputs at other addresses (EngineWorkload replica), interleaved")
    ap.add_argument("--long-warmup-points", default="", help="final: comma-separated combo:M points timed again "
                    "with --long-warmup-ms of warm-up per timing")
    ap.add_argument("--long-warmup-ms", type=float, default=200.0)
    ap.add_argument("--long-warmup-rounds", type=int, default=3)
    ap.add_argument("--telemetry-ms", type=float, default=10.0, help="sampling period of the clock/power log "
                    "(0: off)")
    ap.add_argument("--g-top", type=int, default=6)
    ap.add_argument("--deadline", type=float, default=520.0, help="seconds after start: stop measuring")
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info = {"phase": args.phase, "argv": sys.argv[1:], "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    if not args.dry_run:
        import torch
        import triton

        info.update(device=torch.cuda.get_device_name(0), torch=torch.__version__, triton=triton.__version__,
                    sms=torch.cuda.get_device_properties(0).multi_processor_count, cpus=os.cpu_count())
    log(info)
    summary = {}
    telemetry = Telemetry(out, args.telemetry_ms / 1000.0, args.dry_run) if args.telemetry_ms > 0 else None
    try:
        for phase in args.phase.split(","):
            fn = {"sweep": phase_sweep, "tune": phase_tune, "final": phase_final, "ratio": phase_ratio}[phase]
            summary.update(fn(args, out))
    finally:
        if telemetry is not None:
            summary.update(telemetry.close())
    summary.update(info=info, wall_s=round(time.perf_counter() - T0, 1))
    (out / f"{args.phase.replace(',', '_')}_summary.json").write_text(json.dumps(summary, indent=1))
    log("done", json.dumps({k: v for k, v in summary.items() if k != "combos"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
