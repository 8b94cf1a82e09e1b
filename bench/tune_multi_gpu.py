"""``tilefit tune`` on two GPUs (issue 15): local workers vs ``--backend ray`` vs one GPU, and a
kill-and-resume, on a machine with at least two GPUs (the lent ``nvidia-h200-x2``).

Case: 7 H200 tables of vLLM 0.33.0 (from ``tests/data/corpus.tar.xz``; bf16 and fp8, 5 shapes)
tuned for an RTX 4090's limit (``--emulate rtx4090``): every entry that overflows 101376 B is
re-tuned, budget 24 timings, seed 8 -- about 20 entries, 480 timings.

Every run is a fresh process (``--child``) calling ``tilefit.tune.runner.tune_files`` as the CLI
does, with its own ``--results`` log; it reports wall time (whole process, and the scheduler's),
GPU time (the GPU workers' seconds in timings), timings per GPU, compiles on the CPU workers,
launches that still compiled on a GPU worker, and the picks.

Phases (``--phases``, each writes its reports under ``--out`` as it finishes):

* ``cold``: each mode with an empty Triton cache of its own (what a user's first run costs:
  compiles overlap the timings, on every core but one per GPU and one).
* ``warm``: ``--rounds`` rounds of every mode, order rotated each round, all on one Triton cache
  filled by a first run (the GPU-side scaling, compiles reduced to cache loads).
* ``kill``: (a) GPU worker 1 killed with SIGKILL after a third of the timings: the run must finish,
  with every timing in the log once; (b) the driver (the whole ``tilefit tune`` process) killed
  with SIGKILL at half the timings: its workers must exit, a rerun with the same ``--results``
  must replay every logged timing and time only the rest.
* ``agree``: for each entry whose pick differs between runs, the distinct picks re-timed on GPU 0
  in ``--agree-rounds`` interleaved rounds (warmup 25 ms, rep 100 ms, CUDA-graph timer): identical
  picks need identical timings, so on real GPUs a differing pick is judged by how far apart the
  two picks' times are, against the spread of re-timing one config.

Modes: ``one`` (local backend, GPU 0 only), ``local2`` (local backend, one worker per GPU),
``ray2`` (``--backend ray``, a local Ray cluster started by the command), ``rayaddr``
(``ray start --head`` first, then ``--backend ray --ray-address auto``). The Ray modes are
skipped, and the summary says so, when Ray is not installed: the GPU machine's image has none,
and its wheel is over a call's 64 MiB; ``bench/ray_wheel.sh`` makes a 44 MB one to carry.

    python bench/tune_multi_gpu.py --out $OUT/multi --phases cold,warm,kill,agree
    python bench/tune_multi_gpu.py --dry-run --out /tmp/multi --work /tmp/multi-work   # on the CPU: fake GPUs

Phases can run in separate calls while the machine stays the same (``reports.json`` in
``--work`` carries over; ``$OUT`` does not); the summary covers every phase run so far.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
ARCHIVE = REPO / "tests" / "data" / "corpus.tar.xz"
VLLM = "corpus/vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/"
TABLES = [  # entries over an RTX 4090's 101376 B (analytic count): 2+2+2+3+3+3+5
    "E=128,N=1024,device_name=NVIDIA_H200.json",
    "E=128,N=192,device_name=NVIDIA_H200.json",
    "E=128,N=1856,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
    "E=16,N=1024,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
    "E=16,N=1024,device_name=NVIDIA_H200.json",
    "E=16,N=2048,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
    "E=128,N=768,device_name=NVIDIA_H200.json",
]
MODES = ("one", "local2", "ray2", "rayaddr")
RAY = [sys.executable, "-m", "ray.scripts.scripts"]  # the `ray` CLI, also where pip --target left no script


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, file=sys.stderr, flush=True)


def extract_tables(dest: Path, dry_run: bool) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    names = TABLES[:3] if dry_run else TABLES
    with tarfile.open(ARCHIVE) as tar:
        for name in names:
            member = tar.getmember(VLLM + name)
            (dest / name).write_bytes(tar.extractfile(member).read())
    return dest


def have_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


# -- one run, in its own process ----------------------------------------------------------------------

def child(args) -> None:
    sys.path.insert(0, str(REPO))
    from tilefit.device_db import load_database
    from tilefit.tune.runner import TuneOptions, tune_files
    from tilefit.tune.search import config_key

    mode = args.child
    opts = TuneOptions(emulate="rtx4090", budget=args.budget, seed=8, results=args.results, write=False,
                       estimator="analytic" if args.dry_run else "auto")
    kw = {}
    if args.dry_run:  # fake GPUs: timings from tests/tune_fakes, two "GPUs" 0 and 1
        sys.path.insert(0, str(REPO / "tests"))
        import tune_fakes

        kw = {"measurer": tune_fakes.FakeMeasurer(measure_sleep=0.01, compile_sleep=0.02),
              "local": load_database().get("h200")}
        opts.compile_workers = 2
    if mode == "one":
        opts.gpu_ids = ["0"]
    elif mode == "local2":
        opts.gpu_ids = ["0", "1"]
    else:
        opts.backend = "ray"
        opts.ray_address = "auto" if mode == "rayaddr" else None
        if args.dry_run:
            from ray import cloudpickle

            cloudpickle.register_pickle_by_value(tune_fakes)
            if mode == "ray2":  # Ray on the CPU: declare the two fake GPUs
                import ray

                ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, log_to_driver=False)
            kw.pop("local")

    def started(cluster):
        if args.pids:
            Path(args.pids).write_text(json.dumps({w: i.pid for w, i in cluster.workers.items()}))

    killed = {}

    def kill_worker(sched, ev):  # phase kill (a): GPU worker 1 in the middle of a timing
        if args.kill_worker_after is None or killed:
            return
        gpu = next((w for w, i in sorted(sched.cluster.workers.items()) if i.kind == "gpu" and i.slot == "1"), None)
        task = sched.holding(gpu) if gpu else None
        if sched.stats.measured >= args.kill_worker_after and task is not None and task.kind == "measure":
            killed.update(worker=gpu, pid=sched.cluster.workers[gpu].pid, at=sched.stats.measured)
            os.kill(killed["pid"], signal.SIGKILL)

    start = time.perf_counter()
    result = tune_files([args.tables], opts, on_start=started, on_event=kill_worker, **kw)
    wall = time.perf_counter() - start
    st = result.stats
    report = {
        "mode": mode, "wall_s": wall, "scheduler_wall_s": st.wall_s if st else None,
        "gpu_s": st.gpu_total_s if st else None, "gpu_s_per_worker": st.gpu_seconds if st else {},
        "timings": st.measured if st else 0, "timings_per_worker": st.timings if st else {},
        "replayed": st.replayed if st else 0, "compiles": st.compiles if st else 0,
        "compile_cpu_s": st.cpu_seconds if st else 0, "compiled_on_gpu": st.compiled_on_gpu if st else 0,
        "lost": st.lost if st else [], "restarted": st.restarted if st else 0, "killed": killed,
        "workers": [(w.id, w.kind, w.slot, (w.device or {}).get("name")) for w in result.workers],
        "errors": result.errors, "device": result.device,
        "picks": {f"{Path(r.job.path).name}:{r.job.key}": config_key(r.best) if r.best else None
                  for r in result.results},
        "pick_us": {f"{Path(r.job.path).name}:{r.job.key}": r.times.get(config_key(r.best)) if r.best else None
                    for r in result.results},
        "shapes": {f"{Path(r.job.path).name}:{r.job.key}": [dict(r.job.shape), r.job.M] for r in result.results},
    }
    Path(args.report).write_text(json.dumps(report, indent=1))


# -- the driver ------------------------------------------------------------------------------------

def run_child(args, mode: str, name: str, cache: Path, extra=(), wait: bool = True):
    out = Path(args.work)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
    report = out / f"{name}.json"
    (out / f"{name}.jsonl").unlink(missing_ok=True)  # a fresh run: nothing to replay
    cmd = [sys.executable, __file__, "--child", mode, "--tables", str(out / "tables"), "--budget", str(args.budget),
           "--results", str(out / f"{name}.jsonl"), "--report", str(report), *extra]
    if args.dry_run:
        cmd.append("--dry-run")
    log("run", name, "(", mode, ")")
    proc = subprocess.Popen(cmd, env=env)
    if not wait:
        return proc, report
    rc = proc.wait()
    if rc != 0:
        log(f"{name}: exit code {rc}")
        return None
    return json.loads(report.read_text())


def ray_start(args) -> bool:
    cmd = RAY + ["start", "--head", "--disable-usage-stats", "--include-dashboard=false"]
    if args.dry_run:
        cmd += ["--num-gpus", "2", "--num-cpus", "4"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        log("ray start failed:", r.stderr[-500:])
    return r.returncode == 0


def ray_stop() -> None:
    subprocess.run(RAY + ["stop", "--force"], capture_output=True, text=True)


def run_mode(args, mode, name, cache):
    if mode == "rayaddr":
        if not ray_start(args):
            return None
        try:
            return run_child(args, mode, name, cache)
        finally:
            ray_stop()
    return run_child(args, mode, name, cache)


def modes(args) -> list[str]:
    wanted = [m for m in args.modes.split(",") if m]
    if not have_ray():
        skipped = [m for m in wanted if m.startswith("ray")]
        if skipped:
            log("ray is not installed: skipping", ", ".join(skipped))
            NOTES.append(f"ray not installed: {', '.join(skipped)} not run")
        wanted = [m for m in wanted if not m.startswith("ray")]
    return wanted


NOTES: list[str] = []


def phase_cold(args, reports):
    for mode in modes(args):
        cache = Path(args.work) / f"cache-cold-{mode}"
        shutil.rmtree(cache, ignore_errors=True)
        reports[f"cold-{mode}"] = run_mode(args, mode, f"cold-{mode}", cache)
        shutil.rmtree(cache, ignore_errors=True)


def phase_warm(args, reports):
    cache = Path(args.work) / "cache-warm"
    reports["warm-fill"] = run_child(args, "local2", "warm-fill", cache)
    ms = modes(args)
    for r in range(args.rounds):
        order = ms[r % len(ms):] + ms[:r % len(ms)]
        for mode in order:
            reports[f"warm{r}-{mode}"] = run_mode(args, mode, f"warm{r}-{mode}", cache)


def _alive(pid) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _records(path: Path) -> list:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def phase_kill(args, reports):
    out = Path(args.work)
    cache = out / "cache-warm"
    base = reports.get("warm0-local2") or reports.get("cold-local2") or reports.get("warm-fill")
    expected = base["timings"] if base else 24 * 20
    # (a) a GPU worker killed mid-timing
    rep = run_child(args, "local2", "kill-worker", cache, extra=["--kill-worker-after", str(expected // 3)])
    if rep is not None:
        recs = _records(out / "kill-worker.jsonl")
        keys = [(r["table"], r["M"], r["config"], r["n"]) for r in recs]
        rep["log_records"] = len(recs)
        rep["log_unique"] = len(set(keys))
        rep["log_by_worker"] = {w: sum(r["worker"] == w for r in recs) for w in sorted({r["worker"] for r in recs})}
    reports["kill-worker"] = rep
    # (b) the driver killed at half the timings, then resumed with the same log
    results = out / "kill-driver.jsonl"
    results.unlink(missing_ok=True)
    pids_file = out / "kill-driver-pids.json"
    proc, _ = run_child(args, "local2", "kill-driver", cache, extra=["--pids", str(pids_file)], wait=False)
    deadline = time.monotonic() + 600
    while proc.poll() is None and time.monotonic() < deadline:
        if results.exists() and results.read_text().count("\n") >= expected // 2:
            break
        time.sleep(0.2)
    info = {"killed": proc.poll() is None}
    if info["killed"]:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    lines = results.read_text().count("\n") if results.exists() else 0
    pids = json.loads(pids_file.read_text()) if pids_file.exists() else {}
    t0 = time.monotonic()
    while any(_alive(p) for p in pids.values()) and time.monotonic() - t0 < 60:
        time.sleep(0.2)
    info.update(logged_at_kill=lines, workers=len(pids), workers_left=sum(_alive(p) for p in pids.values()),
                workers_exit_s=time.monotonic() - t0)
    resumed = _resume(args, cache, results)
    if resumed is not None:
        recs = _records(results)
        info.update(resumed_replayed=resumed["replayed"], resumed_timings=resumed["timings"],
                    log_records=len(recs), log_unique=len({(r["table"], r["M"], r["config"], r["n"]) for r in recs}),
                    picks=resumed["picks"])
    reports["kill-driver"] = info
    reports["kill-driver-resumed"] = resumed


def _resume(args, cache, results: Path):
    out = Path(args.work)
    env = dict(os.environ, TRITON_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
    report = out / "kill-driver-resumed.json"
    cmd = [sys.executable, __file__, "--child", "local2", "--tables", str(out / "tables"), "--budget",
           str(args.budget), "--results", str(results), "--report", str(report)]
    if args.dry_run:
        cmd.append("--dry-run")
    log("run kill-driver-resumed (local2, same --results)")
    if subprocess.run(cmd, env=env).returncode != 0:
        return None
    return json.loads(report.read_text())


def phase_agree(args, reports):
    """Re-time the distinct picks of every entry whose pick differs between runs."""
    runs = {k: r for k, r in reports.items() if isinstance(r, dict) and r.get("picks")}
    entries = sorted({e for r in runs.values() for e in r["picks"]})
    differing = {}
    for e in entries:
        picks = {r["picks"].get(e) for r in runs.values() if r["picks"].get(e)}
        if len(picks) > 1:
            differing[e] = sorted(picks)
    out = {"entries": len(entries), "differing": len(differing), "retimed": {}}
    if differing and not args.dry_run:
        out["retimed"] = retime(runs, differing, args.agree_rounds)
    reports["agree"] = out


def retime(runs, differing, rounds):
    from tilefit.tune.measure import measure
    from tilefit.tune.workload import MoEShape, MoEWorkload

    shapes = next(iter(runs.values()))["shapes"]
    result = {}
    for e, picks in differing.items():
        shape, M = shapes[e]
        wl = MoEWorkload(MoEShape(**{k: tuple(v) if isinstance(v, list) else v for k, v in shape.items()}), M, "cuda")
        times = {p: [] for p in picks}
        for _ in range(rounds):
            for p in picks:
                cfg = dict(zip(("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps",
                                "num_stages"), map(int, p.split("/"))))
                m = measure(wl, cfg, warmup_ms=25, rep_ms=100)
                times[p].append(m.time_us)
        med = {p: statistics.median(t for t in ts if t is not None) for p, ts in times.items()}
        best = min(med.values())
        spread = max((max(ts) - min(ts)) / statistics.median(ts) for ts in times.values())
        result[e] = {"median_us": med, "ratio_to_best": {p: v / best for p, v in med.items()},
                     "spread_within_config": spread,
                     "picked_by": {p: sorted(k for k, r in runs.items() if r["picks"].get(e) == p) for p in picks}}
        del wl
    return result


def summarize(args, reports) -> dict:
    def fig(name):
        r = reports.get(name)
        return (r["wall_s"], r["scheduler_wall_s"], r["gpu_s"]) if r else None

    s = {"machine": machine_line(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "dry_run": args.dry_run, "notes": NOTES, "runs": {}, "speedup": {}, "picks_identical": {}}
    for name, r in reports.items():
        if isinstance(r, dict) and "wall_s" in r:
            s["runs"][name] = {k: r[k] for k in ("mode", "wall_s", "scheduler_wall_s", "gpu_s", "timings",
                                                 "timings_per_worker", "compiles", "compiled_on_gpu", "replayed",
                                                 "lost", "errors")}
    for prefix in ["cold"] + [f"warm{i}" for i in range(args.rounds)]:
        one = fig(f"{prefix}-one")
        for mode in ("local2", "ray2", "rayaddr"):
            other = fig(f"{prefix}-{mode}")
            if one and other:
                s["speedup"][f"{prefix}-{mode}"] = {"wall": one[0] / other[0], "scheduler_wall": one[1] / other[1],
                                                    "gpu_time_ratio": other[2] / one[2]}
            a, b = reports.get(f"{prefix}-one"), reports.get(f"{prefix}-{mode}")
            if a and b:
                same = sum(a["picks"].get(e) == b["picks"].get(e) for e in a["picks"])
                s["picks_identical"][f"{prefix}-one vs {mode}"] = f"{same}/{len(a['picks'])}"
    base = next((reports[k] for k in ("warm0-local2", "cold-local2", "warm-fill") if reports.get(k)), None)

    def same_as_base(picks):
        if not base or not picks:
            return None
        return f"{sum(base['picks'].get(e) == p for e, p in picks.items())}/{len(picks)}"

    kw, kd = reports.get("kill-worker"), reports.get("kill-driver")
    s["kill"] = {}
    if kw:
        s["kill"]["worker"] = {k: kw.get(k) for k in ("killed", "lost", "restarted", "timings", "log_records",
                                                     "log_unique", "log_by_worker", "errors")}
        s["kill"]["worker"]["picks_as_base"] = same_as_base(kw["picks"])
    if kd:
        s["kill"]["driver"] = {k: kd.get(k) for k in ("killed", "logged_at_kill", "workers", "workers_left",
                                                     "workers_exit_s", "resumed_replayed", "resumed_timings",
                                                     "log_records", "log_unique")}
        s["kill"]["driver"]["picks_as_base"] = same_as_base(kd.get("picks"))
    s["agree"] = reports.get("agree")
    return s


def machine_line() -> str:
    sys.path.insert(0, str(HERE))
    from machine import cpu_name

    gpus = ""
    try:
        import torch

        gpus = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001 - no torch or no GPU: a dry run
        gpus = "no GPU"
    return f"{os.cpu_count()} cores ({cpu_name()}), GPUs: {gpus or 'none'}"


def markdown(s: dict) -> str:
    lines = [f"# tilefit tune on 2 GPUs ({s['date']}; {s['machine']}{'; DRY RUN, fake GPUs' if s['dry_run'] else ''})",
             "", "| run | wall s | scheduler s | GPU s | timings | per worker | compiles | compiled on GPU |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, r in s["runs"].items():
        per = ", ".join(f"{w} {n}" for w, n in sorted(r["timings_per_worker"].items()))
        lines.append(f"| {name} | {r['wall_s']:.1f} | {r['scheduler_wall_s'] or 0:.1f} | {r['gpu_s'] or 0:.1f} | "
                     f"{r['timings']} (+{r['replayed']} replayed) | {per} | {r['compiles']} | {r['compiled_on_gpu']} |")
    lines += ["", "Speed-up against one GPU (wall, scheduler wall; GPU time ratio):", ""]
    for k, v in s["speedup"].items():
        lines.append(f"* {k}: {v['wall']:.2f}x, {v['scheduler_wall']:.2f}x; GPU time x{v['gpu_time_ratio']:.2f}")
    lines += ["", "Identical picks: " + ", ".join(f"{k} {v}" for k, v in s["picks_identical"].items()), ""]
    for what, k in s["kill"].items():
        lines.append(f"Kill {what}: " + json.dumps(k, default=str))
    lines.append("")
    if s.get("agree"):
        lines += ["Differing picks re-timed: " + json.dumps(s["agree"], default=str)[:3000], ""]
    lines += [f"Notes: {'; '.join(s['notes']) or '-'}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench-out/multi", help="summary.md, summary.json, reports.json, logs.tar.xz")
    ap.add_argument("--work", default="/tmp/tilefit-multi", help="tables, Triton caches, the runs' logs")
    ap.add_argument("--phases", default="cold,warm,kill,agree")
    ap.add_argument("--modes", default="one,local2,ray2,rayaddr")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--agree-rounds", type=int, default=5)
    ap.add_argument("--dry-run", action="store_true")
    # one run, in a child process
    ap.add_argument("--child", choices=MODES)
    ap.add_argument("--tables")
    ap.add_argument("--results")
    ap.add_argument("--report")
    ap.add_argument("--pids")
    ap.add_argument("--kill-worker-after", type=int)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    extract_tables(work / "tables", args.dry_run)
    state = work / "reports.json"  # $OUT is emptied before each device call; /tmp lasts while the machine does
    reports = json.loads(state.read_text()) if state.exists() else {}
    phases = {"cold": phase_cold, "warm": phase_warm, "kill": phase_kill, "agree": phase_agree}
    for name in args.phases.split(","):
        log("phase", name)
        phases[name](args, reports)
        state.write_text(json.dumps(reports, indent=1, default=str))
    s = summarize(args, reports)
    (out / "summary.json").write_text(json.dumps(s, indent=1, default=str))
    shutil.copy(state, out / "reports.json")
    (out / "summary.md").write_text(markdown(s))
    with tarfile.open(out / "logs.tar.xz", "w:xz") as tar:  # every run's --results log and report
        for path in sorted(work.glob("*.json*")):
            tar.add(path, arcname=path.name)
    print(markdown(s))


if __name__ == "__main__":
    main()
