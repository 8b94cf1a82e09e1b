"""Score the GPU-free fixer's picks and replay the tuner on the H200 sweep, on the CPU (issue 13).

The sweep (``bench/data/h200_moe_sweep.jsonl.gz``) timed every RTX 4090-fitting config of the
engines' grid at GROUP_SIZE_M 1 at every point (plus GROUP_SIZE_M 16/32/64 on the 6 fastest), so
any fixer pick among them can be scored without a GPU. Speed = best / pick (1.0 = best):

* ``check`` / ``final``: the pick and every config it is compared with were timed in the
  interleaved rounds of a GPU check (``h200_moe_check_points.json``, newest, tried first;
  ``h200_moe_final_points.json``): fastest config's median there / the pick's median;
* ``sweep``: otherwise the sweep's screening timings (1 ms warm-up, 6 ms timing, one each):
  the sweep's fastest / the pick's (noisier: a screening minimum is biased low).

``--tune`` replays :func:`tilefit.tune.search.guided_search` (the tuner's own search, the
model's predictions) with the sweep as the measurer: each timing returns the sweep's time and
costs the sweep's GPU seconds for that config (the sweep's timer settings); a config the sweep did
not time (GROUP_SIZE_M > 1 off the top 6) is counted as missing.

    python bench/moe_offline.py                       # fixer picks, per point and per shape
    python bench/moe_offline.py --tune                # + tuner replay on the two tune tables
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from moe_cases import MS, ckey, combos, naive, start_entries, vllm_default  # noqa: E402

DATA = HERE / "data"


def load_sweep(path=DATA / "h200_moe_sweep.jsonl.gz"):
    times: dict = {}
    gpu: dict = {}
    for line in gzip.open(path, "rt"):
        r = json.loads(line)
        if r["status"] != "ok":
            continue
        k = ckey(r["config"])
        times.setdefault((r["combo"], r["M"]), {})[k] = r["time_us"]
        gpu.setdefault((r["combo"], r["M"]), {})[k] = r["gpu_seconds"]
    return times, gpu


def load_finals(path=DATA / "h200_moe_final_points.json"):
    return {(p["combo"], p["M"]): p["median_us"] for p in json.loads(Path(path).read_text())}


def load_placements(path) -> list[dict]:
    """A GPU check's medians as placement samples: one per replica where the check timed
    replicas (``replica_median_us``), else the check's medians as one."""
    points = json.loads(Path(path).read_text())
    n = max((len(v) for p in points for v in p.get("replica_median_us", {}).values()), default=0)
    if not n:
        return [{(p["combo"], p["M"]): p["median_us"] for p in points}]
    out = [{(p["combo"], p["M"]): {k: v[i] for k, v in p["replica_median_us"].items() if v[i] is not None}
            for p in points} for i in range(n)]
    # the steady-state rounds (a long warm-up per timing, power-capped points only) as one more sample
    steady = {(p["combo"], p["M"]): p["longwarm_median_us"] for p in points if p.get("longwarm_median_us")}
    if steady and STEADY:
        out.append(steady)
    return out


# the GPU checks' interleaved rounds (the first final rounds, checks 2, 3 and 4): a pick is scored
# over every placement sample (a run, or a replica of one) that timed it beside every config it is
# compared with, as the geometric mean of its speeds there. One run's figures move by up to 7.5 %
# between runs (its placement of the operands in DRAM, bench/moe_noise.py), so a pick scored by
# the newest run alone ranks that run's placement; the sweep's screening timings are the fallback
# Sixth pass: checks 6 and 7 (two more cards, 3 placements each) and the steady-state rounds of
# checks 4, 6 and 7 join them; ``--pass5`` scores as the fifth pass did (checks 2-4, burst only).
CHECKS = ("h200_moe_check7_points.json", "h200_moe_check6_points.json", "h200_moe_check4_points.json",
          "h200_moe_check3_points.json", "h200_moe_check_points.json", "h200_moe_final_points.json")
CHECKS_PASS5 = CHECKS[2:]
STEADY = True
# Seventh pass: check 8 (a third card in the pool). ``--robust``: a pick's speed at a point is its
# speed in the worst run that timed it (each run's geometric mean over its placement samples), not
# the pooled mean: the cards differ by up to 7 % at memory-bound points (sixth pass), so a setting
# whose picks stay inside the band on every card measured scores above one that wins on the pool.
CHECKS = ("h200_moe_check8_points.json",) + CHECKS
ROBUST = False
# Tenth pass: the item-5 checks of the tuner (10: a fifth card, 11: a sixth), the two tune tables
# only; pooled on request (``--with-tune-checks``), so the fixer's figures stay those of checks 2-9
TUNE_CHECKS = ("h200_moe_check11_points.json", "h200_moe_check10_points.json")
# Eighth pass: ``--regime steady`` scores every shape in the regime a serving engine under load
# runs in: at the power-capped points (those any check timed in steady state: a 250 ms warm-up per
# timing, where the 700 W cap throttles the SM clock) on the steady-state rounds only, elsewhere
# (never throttled: burst and steady state are the same clock) on the burst placements; a pick the
# steady rounds never timed beside its comparisons falls back to the burst samples (its source
# says so). ``pooled`` (default, the seventh pass) pools both regimes as samples.
REGIME = "pooled"
# Eighth pass: check 9 (a fourth card) timed the picks the fill term and the regime change moved,
# beside the sweep's 4 fastest, vLLM's default and the naive fix, at those 11 points
CHECKS = ("h200_moe_check9_points.json",) + CHECKS


class Scorer:
    def __init__(self):
        from moe_fit import fitting_times, load_sweep as load_configs

        times, configs = load_configs()
        self.fit = fitting_times(times, configs)
        self.rounds = []
        self.steady_rounds = []  # (run, sample) of the steady-state rounds only
        for name in (CHECKS if STEADY else CHECKS_PASS5):
            if not (DATA / name).exists():
                continue
            points = json.loads((DATA / name).read_text())
            has_steady = STEADY and any(p.get("longwarm_median_us") for p in points)
            samples = load_placements(DATA / name)
            run = name.split("_")[2]
            if has_steady and len(samples) > 1:
                self.steady_rounds.append((run, samples[-1]))
                if REGIME == "steady":
                    samples = samples[:-1]
            self.rounds += [(run, sample) for sample in samples]
        self.capped = {key for _, sample in self.steady_rounds for key in sample}
        self.finals = load_finals()
        self.gpu = load_sweep()[1]

    def score(self, name: str, M: int, cfg, together=()) -> tuple[float | None, str]:
        """Speed of ``cfg`` at the point; from the final rounds only when ``cfg`` and every
        config of ``together`` (the ones it is compared with) were finalists there, so a
        comparison never mixes the two timings."""
        if cfg is None:
            return None, "none"
        k = cfg if isinstance(cfg, str) else ckey(cfg)
        others = [c if isinstance(c, str) else ckey(c) for c in together if c is not None]
        logs, srcs = [], []
        pools = [self.rounds]
        if REGIME == "steady" and (name, M) in self.capped:
            pools.insert(0, [(src + " steady", sample) for src, sample in self.steady_rounds])
        for pool in pools:
            for src, rounds in pool:
                fin = rounds.get((name, M), {})
                if k in fin and all(o in fin for o in others):
                    logs.append(math.log(min(fin.values()) / fin[k]))
                    srcs.append(src)
            if logs:
                break
        if logs and ROBUST:
            # the worst run (card) that timed it: each run's geometric mean over its samples
            by_src: dict = {}
            for lg, src in zip(logs, srcs):
                by_src.setdefault(src, []).append(lg)
            worst = min(statistics.mean(v) for v in by_src.values())
            return math.exp(worst), "min of " + "+".join(sorted(by_src)) + f" ({len(logs)})"
        if logs:
            return math.exp(statistics.mean(logs)), "+".join(sorted(set(srcs))) + f" ({len(logs)})"
        tm = self.fit[(name, M)]
        if k in tm:
            return min(tm.values()) / tm[k], "sweep"
        return None, "untimed"


def fixer_rows(scorer: Scorer, unsafe: bool = True, names=None) -> list[dict]:
    from moe_cases import fixer_picks

    folder = Path(tempfile.mkdtemp())
    rows = []
    for combo in combos():
        if names and combo.case.name not in names:
            continue
        picks = fixer_picks(combo, folder / combo.case.name, unsafe)
        starts = start_entries(combo)
        for M in MS:
            row = {"combo": combo.name, "case": combo.case.name, "M": M, "fixer": ckey(picks[M])}
            roles = (("fixer", picks.get(M)), ("vllm_default", vllm_default(combo, M)),
                     ("naive", naive(combo, starts[M][0])))
            for role, cfg in roles:
                row[role] = ckey(cfg) if cfg else None
                row[role + "_speed"], row[role + "_src"] = scorer.score(combo.name, M, cfg, [c for _, c in roles])
            rows.append(row)
    return rows


def summary(rows, noise: float = 0.01) -> dict:
    out = {}
    for case in sorted({r["case"] for r in rows}):
        pts = [r for r in rows if r["case"] == case]
        v = [r["fixer_speed"] for r in pts if r["fixer_speed"] is not None]
        dv = [r["fixer_speed"] - r["vllm_default_speed"] for r in pts
              if r["fixer_speed"] is not None and r["vllm_default_speed"] is not None]
        dn = [r["fixer_speed"] - r["naive_speed"] for r in pts
              if r["fixer_speed"] is not None and r["naive_speed"] is not None]
        out[case] = {"median": statistics.median(v) if v else None, "min": min(v) if v else None,
                     "vs_default": min(dv) if dv else None, "vs_naive": min(dn) if dn else None,
                     "untimed": sum(r["fixer_speed"] is None for r in pts),
                     "below_default": [f"{r['combo']} M={r['M']}" for r in pts if r["fixer_speed"] is not None
                                       and r["vllm_default_speed"] is not None
                                       and r["fixer_speed"] < r["vllm_default_speed"] - noise]}
    return out


def objective(rows, cases, noise: float = 0.01) -> float:
    """What a leave-one-shape-out fold maximises on its training shapes: the mean log speed of
    the fixer's picks, less the log shortfall below vLLM's default (beyond the noise band) and
    below 0.95 of the best (an untimed pick counts 0.8)."""
    out = []
    for r in rows:
        if r["case"] not in cases:
            continue
        s = r["fixer_speed"] or 0.8
        d = r["vllm_default_speed"] or s
        out.append(math.log(s) + min(0.0, math.log(s / d) + noise) + min(0.0, math.log(s / 0.95)))
    return statistics.mean(out)


def picks_with(scorer: Scorer, coefficients: dict | None, trust: float, unsafe: bool = True,
               margin: float | None = None) -> list[dict]:
    """The fixer's rows with H200 coefficient overrides (a temporary device file, as a user's
    calibration would be), ``planner.DEFAULT_TRUST`` set to ``trust`` and ``planner.ANCHOR_MARGIN``
    to ``margin`` (None: as bundled)."""
    import os

    import tilefit.fix.planner as planner
    from tilefit.perf import coefficients as co

    saved, saved_margin, old_env = planner.DEFAULT_TRUST, planner.ANCHOR_MARGIN, os.environ.get(co.ENV_VAR)
    try:
        planner.DEFAULT_TRUST = trust
        if margin is not None:
            planner.ANCHOR_MARGIN = margin
        if coefficients:
            path = Path(tempfile.mkdtemp()) / "fold.json"
            co.write_coefficients(path, coefficients, {"method": "leave-one-shape-out candidate"}, device="h200")
            os.environ[co.ENV_VAR] = str(path)
        co._files.cache_clear()
        return fixer_rows(scorer, unsafe)
    finally:
        planner.DEFAULT_TRUST = saved
        planner.ANCHOR_MARGIN = saved_margin
        if old_env is None:
            os.environ.pop(co.ENV_VAR, None)
        else:
            os.environ[co.ENV_VAR] = old_env
        co._files.cache_clear()


def rescore(scorer: Scorer, rows: list[dict]) -> list[dict]:
    """``rows`` (a setting's picks, as ``--settings-json`` wrote them) scored again with ``scorer``
    (the picks do not depend on the scorer: another regime or pool needs no new picks)."""
    out = []
    for r in rows:
        r = dict(r)
        roles = [r.get(role) for role in ("fixer", "vllm_default", "naive")]
        for role in ("fixer", "vllm_default", "naive"):
            r[role + "_speed"], r[role + "_src"] = scorer.score(r["combo"], r["M"], r.get(role), roles)
        out.append(r)
    return out


# what a setting of an older --settings-json file had for a coefficient it does not name: the
# value the model had then (pipeline_fill_share: the eighth pass's term, absent before it, i.e. 0)
SAVED_DEFAULTS = {"pipeline_fill_share": 0.0}


def load_settings(paths) -> tuple[list, list]:
    """Settings and their rows from ``--settings-json`` files (gzip or plain), in file order."""
    settings, by_setting = [], []
    for path in paths:
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt") as fh:
            for key, rows in json.load(fh).items():
                settings.append(json.loads(key))
                by_setting.append(rows)
    return settings, by_setting


def loso(scorer: Scorer, trusts, coefficient_grid: dict | None = None, unsafe: bool = True,
         margins=(None,), tol: float | None = None, saved: tuple[list, list] | None = None) -> dict:
    """Leave one shape out over ``DEFAULT_TRUST``, ``ANCHOR_MARGIN`` (``margins``) and a grid of
    coefficient values: the fixer's picks at every setting, then per held-out shape the setting
    the other three choose (:func:`objective`, :func:`select`: the centre of the near-ties within
    ``tol``; 0: the plain argmax, ties the first setting), and its picks on the held-out shape."""
    import itertools

    tol = PLATEAU_TOL if tol is None else tol
    grid = coefficient_grid or {}
    names = sorted(grid)
    if saved is not None:  # every setting's picks from --settings-json files, scored again
        names = sorted({n for st in saved[0] for n in st["coefficients"]})
        # a coefficient a file's settings lack had its value of then (a term added later: off)
        settings = [({n: st["coefficients"].get(n, SAVED_DEFAULTS.get(n)) for n in names}, st["trust"], st["margin"])
                    for st in saved[0]]
        by_setting = [rescore(scorer, rows) for rows in saved[1]]
        trusts = [st[1] for st in settings]
        margins = [st[2] for st in settings]
        grid = {n: sorted({st[0][n] for st in settings}) for n in names}
    else:
        settings = [(dict(zip(names, vals)), t, m) for vals in itertools.product(*(grid[n] for n in names))
                    for t in trusts for m in margins]
        by_setting = [picks_with(scorer, coeffs, t, unsafe, m) for coeffs, t, m in settings]
    cases = sorted({r["case"] for r in by_setting[0]})

    def setting(i):
        return {"coefficients": settings[i][0], "trust": settings[i][1], "margin": settings[i][2]}

    axes = [sorted({s[0][n] for s in settings}) for n in names] + [sorted(set(trusts)),
                                                                    sorted(set(margins), key=lambda m: (m is not None, m or 0))]

    def position(j):
        coeffs, t, m = settings[j]
        return tuple(ax.index(v) for ax, v in zip(axes, [coeffs[n] for n in names] + [t, m]))

    def choose(train):
        scores = [objective(by_setting[j], train) for j in range(len(settings))]
        return select(scores, [position(j) for j in range(len(settings))], tol)

    folds = {}
    for held in cases:
        train = [c for c in cases if c != held]
        i, near = choose(train)
        i_max = max(range(len(settings)), key=lambda j: (objective(by_setting[j], train), -j))
        folds[held] = {**setting(i), "plateau": len(near), "argmax": setting(i_max),
                       "rows": [r for r in by_setting[i] if r["case"] == held],
                       "rows_argmax": [r for r in by_setting[i_max] if r["case"] == held]}
    i, near = choose(cases)
    return {"settings": [setting(j) for j in range(len(settings))], "folds": folds, "by_setting": by_setting,
            "all_shapes": {**setting(i), "plateau": len(near)}, "tol": tol,
            "all_rows": by_setting[i],
            "objective": {str(j): {c: objective(by_setting[j], [c]) for c in cases} for j in range(len(settings))}}


# How close to the best training objective a setting must come to be a near-tie (mean log speed
# over the training points). The objective of one setting over 3 shapes x 12 points moves by
# about 0.1-0.2 % between the pooled placement samples (per-point p90 2 %, most points 0.3 %,
# over 36 points), so settings within 0.2 % are not told apart by the data (pass 4: the 50
# settings span 1.5 %, the folds' choices won by 0.01-0.07 %).
PLATEAU_TOL = 0.002


def select(scores, positions, tol: float = PLATEAU_TOL) -> tuple[int, list[int]]:
    """The setting a fold takes: among the near-ties (training objective within ``tol`` of the
    best), the one nearest the plateau's centre, i.e. the per-axis median of the near-ties' grid
    positions (L1 distance in grid steps; ties: the better objective, then the first). A plain
    argmax on a flat objective lands on whichever extreme the noise favours (pass 4: trust 0.01
    and 0.05, the grid's two ends, in two of four folds); the centre of the flat region is the
    value the data support, not the one its noise picks."""
    best = max(scores)
    near = [j for j, s in enumerate(scores) if s >= best - tol]
    centre = [statistics.median(positions[j][a] for j in near) for a in range(len(positions[0]))]
    i = min(near, key=lambda j: (sum(abs(p - c) for p, c in zip(positions[j], centre)), -scores[j], j))
    return i, near


TUNE_COMBOS = ("mixtral-8x7b/bf16", "qwen3-next-80b-a3b/fp8_w8a8")


def sweep_gpu_seconds(name: str) -> float:
    sw = json.loads((DATA / "h200_moe_sweep_summary.json").read_text())["combos"][name]
    return sw["gpu_s"]


def _g1(k: str) -> str:
    parts = k.split("/")
    parts[3] = "1"
    return "/".join(parts)


def tune_replay(scorer: Scorer, names=TUNE_COMBOS, impute_groups: bool = False, distinct: bool = True,
                **search) -> dict:
    """Replay the tuner's search (``guided_search`` on ``model_order``, as ``tilefit tune`` runs
    it) with the sweep as the GPU: a timing returns the sweep's time of the config and costs the
    sweep's GPU seconds for it. Candidates: the tuning grid's configs that fit the RTX 4090 and
    that the sweep timed (GROUP_SIZE_M > 1 only on the sweep's 6 fastest per point).

    ``impute_groups``: every GROUP_SIZE_M of the grid is a candidate, as in ``tilefit tune``; one
    the sweep did not time returns (and costs) the time of the same config at GROUP_SIZE_M 1, and
    a pick of that kind is scored as that config (an approximation: where GROUP_SIZE_M matters,
    the sweep timed it on the point's fastest configs). Without it the replay never spends a
    timing on a GROUP_SIZE_M neighbour outside the sweep's top 6, which the tuner on a GPU does."""
    from moe_cases import _context

    from tilefit.device_db import load_database
    import tilefit.tune.search as search_module
    from tilefit.tune.equivalent import distinct_launches, representative
    from tilefit.tune.runner import Job, engine_default_config, model_order
    from tilefit.tune.search import config_key
    from tilefit.tune.space import tuning_space

    h200 = load_database().get("h200")
    by_name = {c.name: c for c in combos()}
    out = {}
    for name in names:
        combo = by_name[name]
        meta = _context(combo).meta
        shape = {"K": combo.case.K, "top_k": combo.case.top_k, "dtype": combo.dtype,
                 "block_shape": list(combo.case.block_shape) if combo.case.block_shape else None}
        grid = {config_key(c) for c in tuning_space(combo.case.block_shape)}
        rows, gpu, timings = [], 0.0, 0
        for M in MS:
            tm = scorer.fit[(name, M)]
            cost = scorer.gpu[(name, M)]
            keys = [k for k in tm if k in grid]
            if impute_groups:
                keys = [k for k in sorted(grid) if k in tm or _g1(k) in tm]
            cands = [dict(zip(("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps",
                               "num_stages"), map(int, k.split("/")))) for k in keys]
            default = engine_default_config(meta, shape, M)
            default_key = config_key(default) if default is not None else None
            if distinct:  # as plan_jobs: one config per launch (tilefit.tune.equivalent)
                cands = distinct_launches(cands, M, combo.case.top_k, combo.case.E)
                if default is not None:
                    default_key = config_key(representative(default, M, combo.case.top_k, combo.case.E))
            order = dict(zip((config_key(c) for c in cands), model_order(cands, combo.gemm_shape(M), h200, default)))
            spent = {"s": 0.0, "n": 0}

            def measure(c, spent=spent, tm=tm, cost=cost):
                k = config_key(c)
                k = k if k in tm else _g1(k)
                spent["s"] += cost[k]
                spent["n"] += 1
                return tm[k]

            seeds = [c for c in cands if default is not None and config_key(c) == default_key]
            settings = {"seed": Job.seed, "budget": Job.budget, "confirm": Job.confirm,
                        "confirm_rounds": Job.confirm_rounds, "patience": Job.patience,
                        "tile": search_module.start_tile(M, combo.case.top_k, combo.case.E), **search}
            found = search_module.guided_search(cands, lambda c: order[config_key(c)], measure, seeds=seeds, **settings)
            speed, src = scorer.score(name, M, config_key(found.best))
            if speed is None:
                speed, src = scorer.score(name, M, _g1(config_key(found.best)))
                src += ", G1 imputed"
            rows.append({"M": M, "pick": config_key(found.best), "speed": speed, "src": src,
                         "timings": spent["n"], "gpu_s": spent["s"]})
            gpu += spent["s"]
            timings += spent["n"]
        sweep = sweep_gpu_seconds(name)
        v = [r["speed"] for r in rows]
        out[name] = {"rows": rows, "gpu_s": gpu, "timings": timings, "sweep_gpu_s": sweep, "ratio": sweep / gpu,
                     "median": statistics.median(v), "min": min(v)}
    return out


def finals_plan(rows_bundled: list[dict], rows_loso: list[dict], tune=TUNE_COMBOS) -> dict:
    """The plan of ``moe_h200.py --phase tune,final`` for the GPU check of the new picks: per
    point every config of the newest GPU check again (the sweep's 4 fastest, the picks of the
    fixer and tuner of every earlier pass, vLLM's default, the naive fix), the fixer's picks as bundled and
    per leave-one-shape-out fold, and (added on the device) the new tuner's picks; ``tune``: the
    starting tables the tuner re-tunes."""
    from moe_cases import KEYS

    def cfg(k):
        return dict(zip(KEYS, map(int, k.split("/"))))

    before = {(p["combo"], p["M"]): p["roles"] for p in json.loads((DATA / "h200_moe_check3_points.json").read_text())}
    # the third check's roles that are still compared: the sweep's 4 fastest, its fixer picks (the
    # third pass, bundled and held out) and the tuner as shipped (its "classic" search; its "tune"
    # was the GROUP_SIZE_M-last experiment, not kept); earlier passes are not re-timed
    rename = {"sweep_0": "sweep_0", "sweep_1": "sweep_1", "sweep_2": "sweep_2", "sweep_3": "sweep_3",
              "fixer": "fixer_pass3", "fixer_loso": "fixer_pass3_loso", "tune_classic": "tune_pass3"}
    loso = {(r["combo"], r["M"]): r for r in rows_loso}
    by_name = {c.name: c for c in combos()}
    points = []
    for r in rows_bundled:
        key = (r["combo"], r["M"])
        roles = {rename[role]: cfg(k) for role, k in before.get(key, {}).items() if role in rename}
        roles["fixer"] = cfg(r["fixer"])
        roles["fixer_loso"] = cfg(loso[key]["fixer"])
        for role in ("vllm_default", "naive"):
            if r.get(role):
                roles[role] = cfg(r[role])
        points.append({"combo": r["combo"], "M": r["M"], "roles": roles})
    return {"combos": [c.as_json() for c in combos()], "points": points,
            "tune": {name: {"entries": {str(M): e for M, (e, _) in start_entries(by_name[name]).items()}}
                     for name in tune}}


def print_rows(rows):
    for r in rows:
        fs = r["fixer_speed"]
        print(f"{r['combo']:30s} M={r['M']:5d} fixer {r['fixer']:20s} "
              f"{'n/a' if fs is None else f'{fs:.3f}'} ({r['fixer_src']}) default "
              f"{r['vllm_default_speed'] or 0:.3f} naive {r['naive_speed'] or 0:.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--safe", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--loso", default="", help="comma-separated DEFAULT_TRUST values to choose from, "
                    "leave one shape out")
    ap.add_argument("--margins", default="", help="comma-separated ANCHOR_MARGIN values to choose from as well")
    ap.add_argument("--grid", default="", help='coefficient values to choose from as well (JSON, e.g. '
                    '\'{"accumulator_reg_factor": [1.0, 1.3]}\')')
    ap.add_argument("--tune", default="", help="replay the tuner with these guided_search settings (JSON, "
                    "e.g. '{\"budget\": 14}')")
    ap.add_argument("--tol", type=float, default=None, help="--loso: near-tie tolerance of the training "
                    f"objective (default {PLATEAU_TOL}; 0: plain argmax)")
    ap.add_argument("--loso-json", help="write the folds (settings, choices, rows) here")
    ap.add_argument("--no-distinct", action="store_true", help="--tune: time every GROUP_SIZE_M even where "
                    "several launch the same tile order (the search before check 11; tilefit.tune.equivalent)")
    ap.add_argument("--with-tune-checks", action="store_true", help="pool checks 10 and 11 (the item-5 tuner "
                    "checks: two more cards, the two tune tables only) as well")
    ap.add_argument("--impute-groups", action="store_true", help="--tune: every GROUP_SIZE_M of the grid is a "
                    "candidate; untimed ones take their GROUP_SIZE_M 1 sibling's time")
    ap.add_argument("--all-tables", action="store_true", help="--tune: replay on every table of the sweep, "
                    "not only the two tune tables")
    ap.add_argument("--search-flag", action="append", default=[], metavar="NAME=0|1",
                    help="--tune: set a switch of tilefit.tune.search (e.g. SMALL_BATCH_SPANS_N=0: the search "
                         "before the twelfth pass)")
    ap.add_argument("--tune-json", help="--tune: write the replay's rows here (gzip'd if it ends in .gz)")
    ap.add_argument("--finals", help="write the GPU check's plan here (needs --loso for the fold picks)")
    ap.add_argument("--trust", type=float, help="DEFAULT_TRUST for the fixer rows and the tuner replay "
                    "(default: as bundled, tilefit/data/perf_model/fixer.json)")
    ap.add_argument("--margin", type=float, help="ANCHOR_MARGIN for the fixer rows (default: as bundled)")
    ap.add_argument("--pass5", action="store_true", help="score as the fifth pass did: checks 2-4, burst "
                    "timings only (without checks 6-7 and the steady-state rounds)")
    ap.add_argument("--robust", action="store_true", help="score a pick by its worst run (card), not the pooled "
                    "placement samples (folds choose on that too)")
    ap.add_argument("--no-check8", action="store_true", help="leave checks 8 and 9 out of the pool (the sixth pass's data)")
    ap.add_argument("--no-check9", action="store_true", help="leave check 9 out of the pool (the seventh pass's data)")
    ap.add_argument("--settings-json", help="--loso: write every setting's picks here ({setting: rows})")
    ap.add_argument("--regime", choices=("pooled", "steady"), default="pooled", help="pooled: burst and "
                    "steady-state samples pooled (the seventh pass); steady: the power-capped points on "
                    "their steady-state rounds only, the rest on burst (eighth pass)")
    ap.add_argument("--rescore", action="append", default=[], metavar="SETTINGS_JSON",
                    help="leave one shape out over the settings (and picks) of these --settings-json files, "
                         "scored again (no new picks); several files: their settings together")
    args = ap.parse_args(argv)
    global STEADY, ROBUST, CHECKS, REGIME
    STEADY = not args.pass5
    ROBUST = args.robust
    REGIME = args.regime
    if args.no_check8 or args.no_check9:
        CHECKS = tuple(c for c in CHECKS if "check9" not in c and (args.no_check9 or "check8" not in c))
    import tilefit.fix.planner as planner

    if args.trust is not None:
        planner.DEFAULT_TRUST = args.trust
    if args.margin is not None:
        planner.ANCHOR_MARGIN = args.margin
    print(f"DEFAULT_TRUST {planner.DEFAULT_TRUST} ANCHOR_MARGIN {planner.ANCHOR_MARGIN}")
    if args.with_tune_checks:
        CHECKS = TUNE_CHECKS + CHECKS
    scorer = Scorer()
    if args.tune:
        import tilefit.tune.search as search_module

        for flag in args.search_flag:
            name, _, value = flag.partition("=")
            if not hasattr(search_module, name):
                ap.error(f"--search-flag: tilefit.tune.search has no {name}")
            setattr(search_module, name, value not in ("0", "false", "False"))
        names = tuple(c.name for c in combos()) if args.all_tables else TUNE_COMBOS
        res = tune_replay(scorer, names=names, impute_groups=args.impute_groups, distinct=not args.no_distinct,
                          **json.loads(args.tune))
        if args.tune_json:
            text = json.dumps({"flags": args.search_flag, "settings": args.tune, "tables": res}, indent=1)
            if args.tune_json.endswith(".gz"):
                with gzip.open(args.tune_json, "wt") as fh:
                    fh.write(text)
            else:
                Path(args.tune_json).write_text(text)
        for name, r in res.items():
            print(f"{name:30s} median {r['median']:.3f} min {r['min']:.3f}  {r['timings']} timings "
                  f"{r['gpu_s']:.2f} GPU s, sweep {r['sweep_gpu_s']:.1f} s: 1/{r['ratio']:.1f}")
            for x in r["rows"]:
                print(f"    M={x['M']:5d} {x['pick']:20s} {x['speed']:.3f} ({x['src']}) {x['timings']} timings "
                      f"{x['gpu_s']:.2f} s")
        return 0
    if args.loso or args.rescore:
        margins = [float(v) for v in args.margins.split(",")] if args.margins else [None]
        res = loso(scorer, [float(v) for v in args.loso.split(",")] if args.loso else [],
                   json.loads(args.grid) if args.grid else None, unsafe=not args.safe, margins=margins,
                   tol=args.tol, saved=load_settings(args.rescore) if args.rescore else None)
        rows, rows_max = [], []
        for held, f in res["folds"].items():
            a = f["argmax"]
            print(f"fold {held}: chosen on the other three: DEFAULT_TRUST {f['trust']} ANCHOR_MARGIN {f['margin']} "
                  f"{f['coefficients']} (centre of {f['plateau']} near-ties; plain argmax: {a['trust']} "
                  f"{a['margin']} {a['coefficients']})")
            rows += f["rows"]
            rows_max += f["rows_argmax"]
        if args.settings_json:
            Path(args.settings_json).write_text(json.dumps(
                {json.dumps(st, sort_keys=True): r for st, r in zip(res["settings"], res["by_setting"])}, indent=1))
        if args.loso_json:
            Path(args.loso_json).write_text(json.dumps({k: v for k, v in res.items() if k != "by_setting"}, indent=1))
        print(f"all four shapes: {res['all_shapes']}")
        print("held out, plain argmax (the pass-4 rule):")
        for case, s in summary(rows_max).items():
            print(f"  {case:20s} median {s['median']:.3f} min {s['min']:.3f} vs default {s['vs_default']:+.3f}")
        print("all four shapes' choice, on all four (not held out):")
        for case, s in summary(res["all_rows"]).items():
            print(f"  {case:20s} median {s['median']:.3f} min {s['min']:.3f} vs default {s['vs_default']:+.3f}")
        print("held out, centre of the near-ties:")
        if args.finals:
            plan = finals_plan(fixer_rows(scorer, unsafe=not args.safe), rows)
            Path(args.finals).write_text(json.dumps(plan, indent=1))
    else:
        rows = fixer_rows(scorer, unsafe=not args.safe)
    if not args.quiet:
        print_rows(rows)
    for case, s in summary(rows).items():
        print(f"{case:20s} median {s['median']:.3f} min {s['min']:.3f} vs default {s['vs_default']:+.3f} "
              f"vs naive {s['vs_naive']:+.3f} untimed {s['untimed']} below default: {s['below_default']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
