"""The tables of bench/RESULTS.md from the H200 final rounds (``bench/moe_h200.py --phase tune,final``).

Speed = the fastest finalist's median / the config's median (1.0 = best; every finalist timed in
the same 3 shuffled, interleaved rounds with the same CUDA-graph timer). Finalists per point: the
sweep's 4 fastest configs, the fixer's picks (leave-one-shape-out fitted coefficients; the same
without ``--unsafe-fixes``; the bundled coefficients), vLLM's ``get_default_config``, the naive fix,
the fixer before issue 13, and the tuner's pick where it ran.

Noise: per config, (max - min) / median of its 3 rounds.

    python bench/moe_results.py              # markdown tables on stdout
    python bench/moe_results.py --check      # the GPU check of issue 13's second pass (h200_moe_check_*)
    python bench/moe_results.py --check3     # the third pass's (h200_moe_check3_*)
    python bench/moe_results.py --check4     # the fourth's: placement replicas, pooled over runs (h200_moe_check4_*)
    python bench/moe_results.py --check6     # the sixth's: burst (replicas) and steady state, the targets (h200_moe_check6_*)
    python bench/moe_results.py --check7     # the seventh's (a second lease; steady-state neighbours at the power-capped points)
    python bench/moe_results.py --pooled67   # the sixth and seventh pooled (6 placement samples, 2 steady-state runs)
    python bench/moe_results.py --check8     # the seventh pass's check (a third lease; every pick of the constants' grid)
    # checks 6-8 pooled, held out with check 8 in the fit: bench/moe_offline.py --loso ... (its scorer pools every run)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
ROLES = ("fixer_installed", "fixer", "fixer_safe", "fixer_before", "vllm_default", "naive", "tune")


def load(name: str = "h200_moe_final_points.json"):
    points = json.loads((DATA / name).read_text())
    out = []
    for p in points:
        med = p["median_us"]
        best = min(med.values())
        speed = {role: best / med[k] for role, k in p["roles"].items() if k in med}
        out.append({**p, "best_us": best, "speed": speed})
    return out


def noise(points):
    spreads = sorted((max(v) - min(v)) / statistics.median(v) for p in points for v in p["times_us"].values()
                     if len(v) >= 3)
    q = lambda f: spreads[min(len(spreads) - 1, int(f * len(spreads)))]  # noqa: E731
    return {"configs": len(spreads), "median": statistics.median(spreads), "p75": q(0.75), "p90": q(0.9),
            "max": spreads[-1]}


def print_noise(points, rounds: str = "its rounds") -> None:
    """The timing noise line a table of points starts with."""
    n = noise(points)
    print(f"noise (per config, (max-min)/median of {rounds}, {n['configs']} configs): median {n['median']:.2%}, "
          f"p75 {n['p75']:.2%}, p90 {n['p90']:.2%}, max {n['max']:.1%}\n")


def by_config(p: dict) -> dict:
    """A point's speeds by config (what :func:`shape_table` reads) from its speeds by role."""
    return {p["roles"][role]: s for role, s in p["speed"].items()}


def tune_table(picks: str, gpu_digits: int, extra: tuple[str, ...] = (), cells=None) -> None:
    """The tuner's picks (``picks``, a data file) beside the sweep's timings and GPU time; with
    ``extra`` column names, ``cells(table)`` gives their texts per tuned table."""
    tune = json.loads((DATA / picks).read_text())
    sweep = json.loads((DATA / "h200_moe_sweep_summary.json").read_text())["combos"]
    print()
    print("| tuned table | timings | GPU s | sweep timings | sweep GPU s | GPU time ratio |" + "".join(f" {c} |" for c in extra))
    print("|---|---:|---:|---:|---:|---:|" + "---:|" * len(extra))
    for name, r in tune.items():
        sw = sweep[name]
        more = "".join(f" {c} |" for c in cells(name)) if extra else ""
        print(f"| {name} | {r['timings']} | {r['gpu_s']:.{gpu_digits}f} | {sw['timings'] + sw.get('group_timings', 0)} | "
              f"{sw['gpu_s']:.1f} | 1/{sw['gpu_s'] / r['gpu_s']:.1f} |{more}")


CHECK_ROLES = ("fixer_loso", "fixer", "fixer_before_bundled", "vllm_default", "naive", "tune", "tune_before")


def check() -> int:
    """The GPU check of the new picks (``h200_moe_check_*``): 5 interleaved rounds, every earlier
    finalist re-timed beside the new fixer (bundled, and per leave-one-shape-out fold) and tuner."""
    points = load("h200_moe_check_points.json")
    print_noise(points)
    print("| shape / dtype | M | best µs | fixer, held out (LOSO) | fixer, bundled | fixer before | vLLM default | "
          "naive fix | tuner | tuner before |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|")
    for p in points:
        s = p["speed"]
        cell = lambda r: f"{s[r]:.3f}" if r in s else "–"  # noqa: E731
        print(f"| {p['combo']} | {p['M']} | {p['best_us']:.1f} | {p['roles']['fixer_loso']} {cell('fixer_loso')} | "
              f"{p['roles']['fixer']} {cell('fixer')} | {cell('fixer_before_bundled')} | {cell('vllm_default')} | "
              f"{cell('naive')} | {cell('tune')} | {cell('tune_before')} |")
    print()
    shape_table(points, CHECK_ROLES, by_config)
    tune_table("h200_moe_check_tune_picks.json", gpu_digits=2)
    return 0


CHECK3_ROLES = ("fixer_loso", "fixer", "fixer_pass2_loso", "fixer_pass2", "vllm_default", "naive", "tune",
                "tune_classic", "tune_pass2")


def pooled(points, earlier: str = "h200_moe_check_points.json",
           roles=("fixer_loso", "fixer", "fixer_pass2_loso", "fixer_pass2", "vllm_default", "naive")) -> None:
    """Check 3 and the earlier check, two runs on the lent H200 (each with interleaved rounds):
    the run-to-run difference of a config's speed (each run's speed against the fastest config
    both runs timed), and per left-out shape the roles' speeds pooled over both runs (geometric
    mean), for the configs both runs timed."""
    import math

    before = {(p["combo"], p["M"]): p["median_us"] for p in json.loads((DATA / earlier).read_text())}
    diffs, rows = [], {}
    for p in points:
        q = before.get((p["combo"], p["M"]), {})
        common = [k for k in p["median_us"] if k in q]
        if not common:
            continue
        b3 = min(p["median_us"][k] for k in common)
        b2 = min(q[k] for k in common)
        sp = {k: math.exp((math.log(b3 / p["median_us"][k]) + math.log(b2 / q[k])) / 2) for k in common}
        diffs += [abs(b3 / p["median_us"][k] - b2 / q[k]) for k in common]
        for role in roles:
            k = p["roles"].get(role)
            if k in sp:
                rows.setdefault(p["combo"].split("/")[0], {}).setdefault(role, []).append(
                    (sp[k], sp.get(p["roles"].get("vllm_default")), sp.get(p["roles"].get("naive"))))
    diffs.sort()
    q = lambda f: diffs[min(len(diffs) - 1, int(f * len(diffs)))]  # noqa: E731
    print(f"run to run (check 2 vs check 3, {len(diffs)} configs): a config's speed differs by median "
          f"{q(0.5):.2%}, p75 {q(0.75):.2%}, p90 {q(0.9):.2%}, max {diffs[-1]:.1%}\n")
    print("| left-out shape | role | median (pooled) | min (pooled) | worst vs vLLM default | worst vs naive fix |")
    print("|---|---|---:|---:|---:|---:|")
    for case, by_role in rows.items():
        for role, v in by_role.items():
            s = [x[0] for x in v]
            dv = min((x[0] - x[1] for x in v if x[1] is not None), default=float("nan"))
            dn = min((x[0] - x[2] for x in v if x[2] is not None), default=float("nan"))
            print(f"| {case} | {role} | {statistics.median(s):.3f} | {min(s):.3f} | {dv:+.3f} | {dn:+.3f} |")


def check3() -> int:
    """The third pass's GPU check (``h200_moe_check3_*``): 6 interleaved rounds, the anchored fixer
    (bundled and per leave-one-shape-out fold) and both searches of the tuner (GROUP_SIZE_M last,
    and main's before it) beside every config of the second check."""
    points = load("h200_moe_check3_points.json")
    print_noise(points)
    print("| shape / dtype | M | best µs | fixer, held out (LOSO) | fixer, bundled | pass 2 held out | pass 2 bundled | "
          "vLLM default | naive fix | tuner, G last (not kept) | tuner as shipped (main's search) | tuner pass 2 |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for p in points:
        s = p["speed"]
        cell = lambda r: f"{s[r]:.3f}" if r in s else "–"  # noqa: E731
        print(f"| {p['combo']} | {p['M']} | {p['best_us']:.1f} | {p['roles']['fixer_loso']} {cell('fixer_loso')} | "
              f"{p['roles']['fixer']} {cell('fixer')} | {cell('fixer_pass2_loso')} | {cell('fixer_pass2')} | "
              f"{cell('vllm_default')} | {cell('naive')} | {cell('tune')} | {cell('tune_classic')} | "
              f"{cell('tune_pass2')} |")
    print()
    shape_table(points, CHECK3_ROLES, by_config)
    print()
    pooled(points)
    sweep = json.loads((DATA / "h200_moe_sweep_summary.json").read_text())["combos"]
    print()
    print("| tuned table | search | timings | GPU s | sweep timings | sweep GPU s | GPU time ratio | median | min |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for search, name in (("GROUP_SIZE_M last (not kept)", "h200_moe_check3_tune_picks.json"),
                         ("as shipped (main's)", "h200_moe_check3_tune_picks_classic.json")):
        role = "tune" if "classic" not in name else "tune_classic"
        for table, r in json.loads((DATA / name).read_text()).items():
            sw = sweep[table]
            v = [p["speed"][role] for p in points if p["combo"] == table and role in p["speed"]]
            print(f"| {table} | {search} | {r['timings']} | {r['gpu_s']:.2f} | {sw['timings'] + sw.get('group_timings', 0)} | "
                  f"{sw['gpu_s']:.1f} | 1/{sw['gpu_s'] / r['gpu_s']:.1f} | {statistics.median(v):.3f} | {min(v):.3f} |")
    return 0


CHECK4_ROLES = ("fixer_loso", "fixer", "fixer_pass3_loso", "fixer_pass3", "vllm_default", "naive", "tune",
                "tune_pass3")


def replica_speeds(p: dict) -> dict:
    """config -> speed at the point, the geometric mean over the replicas of (the replica's
    fastest config / the config), over the configs every replica timed."""
    import math

    reps = p.get("replica_median_us")
    if not reps:
        best = min(p["median_us"].values())
        return {k: best / v for k, v in p["median_us"].items()}
    n = max(len(v) for v in reps.values())
    common = [k for k, v in reps.items() if len(v) == n and all(x is not None for x in v)]
    logs = {k: 0.0 for k in common}
    for i in range(n):
        best = min(reps[k][i] for k in common)
        for k in common:
            logs[k] += math.log(best / reps[k][i]) / n
    return {k: math.exp(v) for k, v in logs.items()}


def shape_table(points, roles, speed_of, title="median", band=None) -> dict:
    """Per left-out shape and role: median, min, worst against vLLM's default and the naive fix."""
    print(f"| left-out shape | role | {title} | min | worst vs vLLM default | worst vs naive fix |")
    print("|---|---|---:|---:|---:|---:|")
    by_case: dict = {}
    for p in points:
        by_case.setdefault(p["combo"].split("/")[0], []).append(p)
    out = {}
    for case, pts in by_case.items():
        for role in roles:
            rows = [(speed_of(p).get(p["roles"].get(role)), speed_of(p).get(p["roles"].get("vllm_default")),
                     speed_of(p).get(p["roles"].get("naive")), p) for p in pts if role in p["roles"]]
            rows = [r for r in rows if r[0] is not None]
            if not rows:
                continue
            v = [r[0] for r in rows]
            dv = min((r[0] - r[1] for r in rows if r[1] is not None), default=float("nan"))
            dn = min((r[0] - r[2] for r in rows if r[2] is not None), default=float("nan"))
            out[(case, role)] = {"median": statistics.median(v), "min": min(v), "vs_default": dv, "vs_naive": dn,
                                 "worst": min(rows, key=lambda r: r[0])[3]["combo"] + f" M={min(rows, key=lambda r: r[0])[3]['M']}"}
            print(f"| {case} | {role} | {statistics.median(v):.3f} | {min(v):.3f} | {dv:+.3f} | {dn:+.3f} |")
    return out


def check4() -> int:
    """The fourth check (``h200_moe_check4_*``): every config on 3 placements of the inputs
    (replicas) in 4 interleaved rounds each; speeds are the geometric mean over the replicas;
    then pooled with checks 2 and 3 (each run a placement sample) as ``bench/moe_offline.py``
    scores."""
    sys.path.insert(0, str(HERE))
    import moe_noise

    points = json.loads((DATA / "h200_moe_check4_points.json").read_text())
    r = moe_noise.report(str(DATA / "h200_moe_check4"))
    print(f"rounds (same inputs): {moe_noise._fmt(r['rounds'])}  \nplacement (replicas): "
          f"{moe_noise._fmt(r['placement'])}")
    for name, v in r["runs"].items():
        print(f"  \nruns (check 4 vs {name}): {moe_noise._fmt(v['spread'])}")
    print()
    print("| shape / dtype | M | best µs | fixer, held out (LOSO) | fixer, bundled | pass 3 held out | pass 3 bundled | "
          "vLLM default | naive fix | tuner | tuner pass 3 | placement spread of the held-out pick |")
    print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for p in points:
        s = replica_speeds(p)
        cell = lambda role: f"{s[p['roles'][role]]:.3f}" if p["roles"].get(role) in s else "–"  # noqa: E731
        k = p["roles"]["fixer_loso"]
        reps = p.get("replica_median_us", {}).get(k, [])
        best = [min(p["replica_median_us"][c][i] for c in p["replica_median_us"]) for i in range(len(reps))] if reps else []
        spread = max(b / t for b, t in zip(best, reps)) - min(b / t for b, t in zip(best, reps)) if reps else float("nan")
        print(f"| {p['combo']} | {p['M']} | {min(p['median_us'].values()):.1f} | {k} {cell('fixer_loso')} | "
              f"{p['roles']['fixer']} {cell('fixer')} | {cell('fixer_pass3_loso')} | {cell('fixer_pass3')} | "
              f"{cell('vllm_default')} | {cell('naive')} | {cell('tune')} | {cell('tune_pass3')} | {spread:.3f} |")
    print()
    shape_table(points, CHECK4_ROLES, replica_speeds)
    print()
    import moe_offline

    moe_offline.STEADY = False  # as the fourth pass pooled: checks 2-4, burst timings
    scorer = moe_offline.Scorer()

    def pooled(p):
        out = {}
        for k in set(p["roles"].values()):
            sp, src = scorer.score(p["combo"], p["M"], k)
            if sp is not None and src != "sweep":
                out[k] = sp
        return out
    print(f"pooled over the placement samples of checks 2, 3 and 4 ({len(scorer.rounds)} samples):\n")
    shape_table(points, CHECK4_ROLES, pooled, title="median (pooled)")

    def quality(table: str) -> tuple[str, str]:
        v = [replica_speeds(p)[p["roles"]["tune"]] for p in points if p["combo"] == table and "tune" in p["roles"]
             and p["roles"]["tune"] in replica_speeds(p)]
        return f"{statistics.median(v):.3f}", f"{min(v):.3f}"

    tune_table("h200_moe_check4_tune_picks.json", gpu_digits=2, extra=("median", "min"), cells=quality)
    return 0


CHECK6_ROLES = ("fixer_loso", "fixer", "fixer_c02", "vllm_default", "naive", "tune")
POWER_BAND, MEMORY_BAND = 0.05, 0.02


def fitting_only(speeds_of):
    """Speeds relative to the fastest config that fits the RTX 4090 (sm_89), the issue's "best
    fitting config": a config that does not fit (vLLM's default can be one) is scored against
    it but is not the best."""
    sys.path.insert(0, str(HERE))
    from moe_cases import KEYS, combos, fits

    by_name = {c.name: c for c in combos()}

    def f(p):
        sp = speeds_of(p)
        if not sp:
            return {}
        ok = [k for k in sp if fits(by_name[p["combo"]], dict(zip(KEYS, map(int, k.split("/")))))]
        top = max(sp[k] for k in ok)
        return {k: v / top for k, v in sp.items()}
    return f


def steady_speeds(p: dict) -> dict:
    """config -> speed in the long-warm-up rounds (each timing after its own 250 ms warm-up);
    a pooled point (:func:`pool`) is the geometric mean over its runs."""
    import math

    runs = p.get("longwarm_runs") or ([p["longwarm_median_us"]] if p.get("longwarm_median_us") else [])
    if not runs:
        return {}
    common = [k for k in runs[0] if all(k in r for r in runs)]
    return {k: math.exp(sum(math.log(min(r[c] for c in common) / r[k]) for r in runs) / len(runs)) for k in common}


def pool(runs: list[list[dict]]) -> list[dict]:
    """Points of several runs as one: every run's replicas are placement samples (burst), every
    run's long-warm-up medians one steady-state sample; configs timed in every run only; roles
    as the first run names them (later runs may add roles)."""
    out = []
    for p in runs[0]:
        same = [next(q for q in r if q["combo"] == p["combo"] and q["M"] == p["M"]) for r in runs]
        common = set.intersection(*(set(q["replica_median_us"]) for q in same))
        reps = {k: [x for q in same for x in q["replica_median_us"][k]] for k in common}
        roles = {}
        for q in same:
            roles.update({r: k for r, k in q["roles"].items() if k in common and r not in roles})
        lw = [q["longwarm_median_us"] for q in same if q.get("longwarm_median_us")]
        out.append({"combo": p["combo"], "M": p["M"], "roles": roles, "replica_median_us": reps,
                    "median_us": {k: statistics.median(v) for k, v in reps.items()},
                    "longwarm_runs": lw if len(lw) == len(same) else []})
    return out


def check6(names=("h200_moe_check6",), alt: str = "fixer_c02") -> int:
    """The sixth check (``h200_moe_check6_*``): every config on 3 placements in 3 interleaved
    rounds (burst timings, 10 ms warm-up), and at the power-capped points 3 more rounds with a
    250 ms warm-up per timing (steady state); speeds against the fastest config that fits sm_89.
    The targets per left-out shape: burst everywhere, and "steady where measured" (the
    power-capped points scored by their steady-state rounds, the band there 5 %, 2 % elsewhere)."""
    sys.path.insert(0, str(HERE))
    import moe_noise

    runs = [json.loads((DATA / f"{n}_points.json").read_text()) for n in names]
    points = pool(runs) if len(runs) > 1 else runs[0]
    print(f"runs: {', '.join(names)}\n")
    for n in names:
        r = moe_noise.report(str(DATA / n), earlier=("h200_moe_check4_points.json", "h200_moe_check6_points.json",
                                                     "h200_moe_check7_points.json"))
        print(f"{n}: rounds (same inputs): {moe_noise._fmt(r['rounds'])}  \nplacement (replicas): "
              f"{moe_noise._fmt(r['placement'])}  \n" + "".join(
                  f"runs (vs {e}): {moe_noise._fmt(v['spread'])}  \n" for e, v in r["runs"].items()
                  if not e.startswith(n)))
    burst, steady = fitting_only(replica_speeds), fitting_only(steady_speeds)

    def mixed(p):
        return steady(p) or burst(p)
    print("| shape / dtype | M | best µs (burst) | held-out pick (LOSO) | burst | steady | bundled pick | burst | steady | "
          f"{alt} pick | burst | steady | vLLM default burst / steady | naive burst / steady | tuner burst |")
    print("|---|---:|---:|---|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for p in points:
        b, st = burst(p), steady(p)
        cell = lambda d, role: f"{d[p['roles'][role]]:.3f}" if p["roles"].get(role) in d else "–"  # noqa: E731
        ro = p["roles"]
        print(f"| {p['combo']} | {p['M']} | {min(p['median_us'].values()):.1f} | {ro['fixer_loso']} | "
              f"{cell(b, 'fixer_loso')} | {cell(st, 'fixer_loso')} | {ro['fixer']} | {cell(b, 'fixer')} | "
              f"{cell(st, 'fixer')} | {ro.get(alt, '–')} | {cell(b, alt)} | {cell(st, alt)} | "
              f"{cell(b, 'vllm_default')} / {cell(st, 'vllm_default')} | {cell(b, 'naive')} / {cell(st, 'naive')} | "
              f"{cell(b, 'tune')} |")
    print("\nburst timings (geometric mean over the 3 placements):\n")
    shape_table(points, CHECK6_ROLES, burst)
    print("\nsteady state where measured (the power-capped points), burst elsewhere:\n")
    res = shape_table(points, CHECK6_ROLES, mixed, title="median (steady where measured)")
    print("\n| left-out shape | timings | median >= 0.97 | min >= 0.95 | >= vLLM default - band | >= naive fix |")
    print("|---|---|---|---|---|---|")
    by_case: dict = {}
    for p in points:
        by_case.setdefault(p["combo"].split("/")[0], []).append(p)
    for label, fn in (("burst", burst), ("steady where measured", mixed)):
        for case, pts in by_case.items():
            v, worst_d, worst_n = [], [], []
            for p in pts:
                sp = fn(p)
                band = POWER_BAND if steady(p) else MEMORY_BAND
                x = sp[p["roles"]["fixer_loso"]]
                v.append((x, p["combo"].split("/")[1], p["M"]))
                d = sp.get(p["roles"]["vllm_default"])
                if d is not None:
                    worst_d.append((x - d + band, x - d, band, p["combo"].split("/")[1], p["M"]))
                worst_n.append((x - sp[p["roles"]["naive"]], p["M"]))
            med = statistics.median(x for x, _, _ in v)
            mn = min(v)
            wd = min(worst_d)
            wn = min(worst_n)
            yes = lambda c: "yes" if c else "**no**"  # noqa: E731
            print(f"| {case} | {label} | {yes(med >= 0.97)} {med:.3f} | {yes(mn[0] >= 0.95)} {mn[0]:.3f} ({mn[1]} M={mn[2]}) | "
                  f"{yes(wd[0] >= 0)} {wd[1]:+.3f} ({wd[3]} M={wd[4]}, band {wd[2]:.0%}) | {yes(wn[0] >= 0)} {wn[0]:+.3f} |")
    sweep = json.loads((DATA / "h200_moe_sweep_summary.json").read_text())["combos"]
    print()
    print("| tuned table | timings | GPU s | sweep GPU s | GPU time ratio | median burst | min burst | "
          "min (steady where measured) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    if len(runs) > 1 or not (DATA / f"{names[0]}_tune_picks.json").exists():
        return 0  # the tuner's picks differ between runs: scored per run (check 8 ran no tuner)
    tune = json.loads((DATA / f"{names[0]}_tune_picks.json").read_text())
    for table, t in tune.items():
        sw = sweep[table]
        pts = [p for p in points if p["combo"] == table and "tune" in p["roles"]]
        v = [burst(p)[p["roles"]["tune"]] for p in pts]
        w = [mixed(p)[p["roles"]["tune"]] for p in pts]
        print(f"| {table} | {t['timings']} | {t['gpu_s']:.2f} | {sw['gpu_s']:.1f} | 1/{sw['gpu_s'] / t['gpu_s']:.1f} | "
              f"{statistics.median(v):.3f} | {min(v):.3f} | {min(w):.3f} |")
    return 0


CHECK10_TUNERS = ("tune", "tune_plain_starts", "tune_c6_fill0", "tune_c7_fill0")


def check10(name: str = "h200_moe_check10") -> int:
    """Check 10 (issue 13 item 5, ninth pass): ``tilefit tune --emulate rtx4090`` with the fill
    term bundled, its search as shipped (``tune``: distinct-tile starts) and in plain model order
    (``tune_plain_starts``), timed on the GPU in this run, beside the sweep's 4 fastest fitting
    configs, the power-capped points' neighbours (check 7's plan), vLLM's default and the tuner's
    picks of checks 6 and 7 (fill term off, re-timed here); speeds against the fastest config that
    fits sm_89, burst (3 placements) and steady state (the 250 ms warm-up rounds) at the capped points."""
    points = json.loads((DATA / f"{name}_points.json").read_text())
    burst, steady = fitting_only(replica_speeds), fitting_only(steady_speeds)
    print("| table | M | best µs (burst) | " + " | ".join(f"{r} pick | burst | steady" for r in CHECK10_TUNERS) + " |")
    print("|---|---:|---:|" + "---|---:|---:|" * len(CHECK10_TUNERS))
    for p in points:
        b, st = burst(p), steady(p)
        cells = []
        for role in CHECK10_TUNERS:
            k = p["roles"].get(role)
            cells += [k or "–", f"{b[k]:.3f}" if k in b else "–", f"{st[k]:.3f}" if k in st else "–"]
        print(f"| {p['combo']} | {p['M']} | {min(p['median_us'].values()):.1f} | " + " | ".join(cells) + " |")
    sweep = json.loads((DATA / "h200_moe_sweep_summary.json").read_text())["combos"]
    print("\n| tuned table | search | timings | GPU s | sweep GPU s | GPU time ratio | median (steady where measured) | "
          "min burst | min (steady where measured) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for role, suffix in (("tune", ""), ("tune_plain_starts", "_plain_starts")):
        f = DATA / f"{name}_tune_picks{suffix}.json"
        if not f.exists():
            continue
        for table, t in json.loads(f.read_text()).items():
            sw = sweep[table]
            pts = [p for p in points if p["combo"] == table and role in p["roles"]]
            v = [burst(p)[p["roles"][role]] for p in pts]
            w = [(steady(p) or burst(p))[p["roles"][role]] for p in pts]
            print(f"| {table} | {role} | {t['timings']} | {t['gpu_s']:.2f} | {sw['gpu_s']:.1f} | "
                  f"1/{sw['gpu_s'] / t['gpu_s']:.1f} | {statistics.median(w):.3f} | {min(v):.3f} | {min(w):.3f} |")
    return 0


CHECK11_TUNERS = ("tune_r0", "tune_r1", "tune_r2", "tune_c10")
CHECK11B_TUNERS = ("tune_r0", "tune_r1", "tune_r2", "tune_a_r0", "tune_a_r1", "tune_a_r2")


def _sweep_rounds(name: str) -> dict:
    """table -> the sweep's GPU seconds per round of the ratio run ``name``."""
    summary = json.loads((DATA / f"{name}_ratio_summary.json").read_text())
    out: dict = {}
    for rnd in summary.get("ratio", summary)["rounds"]:
        for table, r in rnd["results"].items():
            if "sweep" in r:
                out.setdefault(table, []).append(r["sweep"])
    return out


def check11(name: str = "h200_moe_check11", tuners=CHECK11_TUNERS, sweep_from: str | None = None) -> int:
    """Check 11 (issue 13 item 5, tenth pass): ``tilefit tune --emulate rtx4090`` (one config per
    launch, the best config's other num_stages first) against the exhaustive sweep of fitting
    configs, both timed in one process with the same timer, 3 rounds in alternating order
    (``moe_h200.py --phase ratio``), then every round's pick beside this run's sweep's 4 fastest,
    check 10's finalists and check 10's shipped pick in 4 interleaved final rounds on 3
    placements (burst) and, at the capped Mixtral points, 4 rounds after a 250 ms warm-up each
    (steady). Speeds against the fastest finalist that fits sm_89."""
    import math

    summary = json.loads((DATA / f"{name}_ratio_summary.json").read_text())
    summary = summary.get("ratio", summary)  # main() wrote the phase summary over it, the rounds under "ratio"
    print(f"process warm-up (a throwaway workload before round 0, on neither side): {summary['warmup_gpu_s']} GPU s; "
          f"compiles {summary['compiles']} ({summary['compile_failures']} failed) in {summary['compile_wall_s']} s, "
          "before the first timing\n")
    print("| round | order | table | tune timings | tune GPU s | sweep timings | sweep GPU s | ratio |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    per: dict = {}
    earlier = _sweep_rounds(sweep_from) if sweep_from else {}
    if sweep_from:
        print(f"(tune rounds only: the sweep's GPU time is {sweep_from}'s, round for round)\n")
    for rnd in summary["rounds"]:
        for table in rnd["tables"]:
            r = rnd["results"][table]
            t, w = r["tune"], r.get("sweep") or earlier[table][rnd["round"]]
            per.setdefault(table, []).append((t["gpu_s"], w["gpu_s"]))
            print(f"| {rnd['round']} | {' then '.join(rnd['sides'])} | {table} | {t['timings']} | {t['gpu_s']:.2f} | "
                  f"{w['timings']} | {w['gpu_s']:.1f} | 1/{w['gpu_s'] / t['gpu_s']:.1f} |")
    for table, v in per.items():
        tg, sg = sum(x for x, _ in v), sum(y for _, y in v)
        print(f"| all | | {table} | | {tg:.2f} | | {sg:.1f} | 1/{sg / tg:.1f} (worst round 1/{min(y / x for x, y in v):.1f}) |")
    points = json.loads((DATA / f"{name}_points.json").read_text())
    burst, steady = fitting_only(replica_speeds), fitting_only(steady_speeds)
    spreads = sorted((max(v) - min(v)) / statistics.median(v) for p in points for v in p["times_us"].values()
                     if len(v) >= 3)
    mem = sorted((max(v) - min(v)) / statistics.median(v) for p in points for v in p["times_us"].values()
                 if len(v) >= 3 and not p.get("longwarm_median_us"))
    q = lambda xs, f: xs[min(len(xs) - 1, int(f * len(xs)))]  # noqa: E731
    print(f"\nround-to-round spread per config ((max - min) / median over its final rounds x 3 placements): all points median "
          f"{statistics.median(spreads):.2%}, p90 {q(spreads, 0.9):.2%}; the 9 uncapped points median "
          f"{statistics.median(mem):.2%}, p90 {q(mem, 0.9):.2%}\n")
    print("| table | M | best fitting (burst) | " + " | ".join(f"{r} | burst | steady" for r in tuners) + " |")
    print("|---|---:|---|" + "---|---:|---:|" * len(tuners))
    for p in points:
        b, st = burst(p), steady(p)
        top = max((k for k in b if b[k] >= 0.99999), default="")
        cells = []
        for role in tuners:
            k = p["roles"].get(role)
            cells += [k or "–", f"{b[k]:.3f}" if k in b else "–", f"{st[k]:.3f}" if k in st else "–"]
        print(f"| {p['combo']} | {p['M']} | {top} | " + " | ".join(cells) + " |")
    print("\n| table | pick | median (steady at capped) | min burst | min (steady at capped) | worst point |")
    print("|---|---|---:|---:|---:|---|")
    for table in per:
        pts = [p for p in points if p["combo"] == table]
        for role in tuners:
            v = [(burst(p)[p["roles"][role]], p["M"]) for p in pts]
            w = [((steady(p) or burst(p))[p["roles"][role]], p["M"]) for p in pts]
            lo = min(w)
            print(f"| {table} | {role} | {statistics.median(x for x, _ in w):.3f} | {min(v)[0]:.3f} | {lo[0]:.3f} | "
                  f"M={lo[1]} |")
    _ = math
    return 0


def main() -> int:
    if "--check11" in sys.argv[1:]:
        return check11()
    if "--check11b" in sys.argv[1:]:  # the third and fourth calls: the tuner with the finalist rule
        return check11("h200_moe_check11b", CHECK11B_TUNERS)
    if "--check12" in sys.argv[1:]:  # twelfth pass: small-batch start tiles, steady re-timing of long finalists
        return check11("h200_moe_check12", CHECK11B_TUNERS)
    if "--check12b" in sys.argv[1:]:  # twelfth pass, call 3: the winner among the finalists (tune rounds only)
        return check11("h200_moe_check12b", CHECK11B_TUNERS, sweep_from="h200_moe_check12")
    if "--check12c" in sys.argv[1:]:  # call 4: call 3's script again on another card
        return check11("h200_moe_check12c", CHECK11B_TUNERS, sweep_from="h200_moe_check12")
    if "--check12c8" in sys.argv[1:]:  # twelfth pass, item 3: check 8's plan on this card
        return check6(("h200_moe_check12c8",), alt="fixer_loso_robust")
    if "--check10" in sys.argv[1:]:
        return check10()
    if "--check6" in sys.argv[1:]:
        return check6()
    if "--check7" in sys.argv[1:]:
        return check6(("h200_moe_check7",))
    if "--pooled67" in sys.argv[1:]:
        return check6(("h200_moe_check6", "h200_moe_check7"))
    # check 8 (seventh pass): the held-out picks of the 6+7 pool, bundled, and the robust folds' picks
    if "--check8" in sys.argv[1:]:
        return check6(("h200_moe_check8",), alt="fixer_loso_robust")
    if "--check4" in sys.argv[1:]:
        return check4()
    if "--check3" in sys.argv[1:]:
        return check3()
    if "--check" in sys.argv[1:]:
        return check()
    points = load()
    print_noise(points, "3 rounds")
    print("| shape / dtype | M | best µs | fixer (bundled) | fixer (LOSO fit) | fixer, safe only | before #13 | "
          "vLLM default | naive fix | tuner |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for p in points:
        s = p["speed"]
        cell = lambda r: f"{s[r]:.3f}" if r in s else "–"  # noqa: E731
        print(f"| {p['combo']} | {p['M']} | {p['best_us']:.1f} | {p['roles'].get('fixer_installed', '')} "
              f"{cell('fixer_installed')} | {cell('fixer')} | {cell('fixer_safe')} | {cell('fixer_before')} | "
              f"{cell('vllm_default')} | {cell('naive')} | {cell('tune')} |")
    print()
    shape_table(points, ROLES, by_config)
    tune_table("h200_moe_tune_picks.json", gpu_digits=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
