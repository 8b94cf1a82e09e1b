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


CHECK_ROLES = ("fixer_loso", "fixer", "fixer_before_bundled", "vllm_default", "naive", "tune", "tune_before")


def check() -> int:
    """The GPU check of the new picks (``h200_moe_check_*``): 5 interleaved rounds, every earlier
    finalist re-timed beside the new fixer (bundled, and per leave-one-shape-out fold) and tuner."""
    points = load("h200_moe_check_points.json")
    n = noise(points)
    print(f"noise (per config, (max-min)/median of its rounds, {n['configs']} configs): median {n['median']:.2%}, "
          f"p75 {n['p75']:.2%}, p90 {n['p90']:.2%}, max {n['max']:.1%}\n")
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
    print("| left-out shape | role | median | min | worst vs vLLM default | worst vs naive fix |")
    print("|---|---|---:|---:|---:|---:|")
    by_case: dict = {}
    for p in points:
        by_case.setdefault(p["combo"].split("/")[0], []).append(p)
    for case, pts in by_case.items():
        for role in CHECK_ROLES:
            v = [p["speed"][role] for p in pts if role in p["speed"]]
            if not v:
                continue
            dv = min(p["speed"][role] - p["speed"]["vllm_default"] for p in pts if role in p["speed"])
            dn = min(p["speed"][role] - p["speed"]["naive"] for p in pts if role in p["speed"])
            print(f"| {case} | {role} | {statistics.median(v):.3f} | {min(v):.3f} | {dv:+.3f} | {dn:+.3f} |")
    tune = json.loads((DATA / "h200_moe_check_tune_picks.json").read_text())
    sweep = json.loads((DATA / "h200_moe_sweep_summary.json").read_text())["combos"]
    print()
    print("| tuned table | timings | GPU s | sweep timings | sweep GPU s | GPU time ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in tune.items():
        sw = sweep[name]
        print(f"| {name} | {r['timings']} | {r['gpu_s']:.2f} | {sw['timings'] + sw.get('group_timings', 0)} | "
              f"{sw['gpu_s']:.1f} | 1/{sw['gpu_s'] / r['gpu_s']:.1f} |")
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
    n = noise(points)
    print(f"noise (per config, (max-min)/median of its rounds, {n['configs']} configs): median {n['median']:.2%}, "
          f"p75 {n['p75']:.2%}, p90 {n['p90']:.2%}, max {n['max']:.1%}\n")
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
    print("| left-out shape | role | median | min | worst vs vLLM default | worst vs naive fix |")
    print("|---|---|---:|---:|---:|---:|")
    by_case: dict = {}
    for p in points:
        by_case.setdefault(p["combo"].split("/")[0], []).append(p)
    for case, pts in by_case.items():
        for role in CHECK3_ROLES:
            v = [p["speed"][role] for p in pts if role in p["speed"]]
            if not v:
                continue
            dv = min(p["speed"][role] - p["speed"]["vllm_default"] for p in pts if role in p["speed"])
            dn = min(p["speed"][role] - p["speed"]["naive"] for p in pts if role in p["speed"])
            print(f"| {case} | {role} | {statistics.median(v):.3f} | {min(v):.3f} | {dv:+.3f} | {dn:+.3f} |")
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
    tune = json.loads((DATA / "h200_moe_check4_tune_picks.json").read_text())
    sweep = json.loads((DATA / "h200_moe_sweep_summary.json").read_text())["combos"]
    print()
    print("| tuned table | timings | GPU s | sweep timings | sweep GPU s | GPU time ratio | median | min |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for table, t in tune.items():
        sw = sweep[table]
        v = [replica_speeds(p)[p["roles"]["tune"]] for p in points if p["combo"] == table and "tune" in p["roles"]
             and p["roles"]["tune"] in replica_speeds(p)]
        print(f"| {table} | {t['timings']} | {t['gpu_s']:.2f} | {sw['timings'] + sw.get('group_timings', 0)} | "
              f"{sw['gpu_s']:.1f} | 1/{sw['gpu_s'] / t['gpu_s']:.1f} | {statistics.median(v):.3f} | {min(v):.3f} |")
    return 0


def main() -> int:
    if "--check4" in sys.argv[1:]:
        return check4()
    if "--check3" in sys.argv[1:]:
        return check3()
    if "--check" in sys.argv[1:]:
        return check()
    points = load()
    n = noise(points)
    print(f"noise (per config, (max-min)/median of 3 rounds, {n['configs']} configs): median {n['median']:.2%}, "
          f"p75 {n['p75']:.2%}, p90 {n['p90']:.2%}, max {n['max']:.1%}\n")
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
    print("| left-out shape | role | median | min | worst vs vLLM default | worst vs naive fix |")
    print("|---|---|---:|---:|---:|---:|")
    by_case: dict = {}
    for p in points:
        by_case.setdefault(p["combo"].split("/")[0], []).append(p)
    for case, pts in by_case.items():
        for role in ROLES:
            v = [p["speed"][role] for p in pts if role in p["speed"]]
            if not v:
                continue
            dv = min(p["speed"][role] - p["speed"]["vllm_default"] for p in pts if role in p["speed"])
            dn = min(p["speed"][role] - p["speed"]["naive"] for p in pts if role in p["speed"])
            print(f"| {case} | {role} | {statistics.median(v):.3f} | {min(v):.3f} | {dv:+.3f} | {dn:+.3f} |")
    tune = json.loads((DATA / "h200_moe_tune_picks.json").read_text())
    sweep = json.loads((DATA / "h200_moe_sweep_summary.json").read_text())["combos"]
    print()
    print("| tuned table | timings | GPU s | sweep timings | sweep GPU s | GPU time ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in tune.items():
        sw = sweep[name]
        n_sweep = sw["timings"] + sw.get("group_timings", 0)
        print(f"| {name} | {r['timings']} | {r['gpu_s']:.1f} | {n_sweep} | {sw['gpu_s']:.1f} | "
              f"1/{sw['gpu_s'] / r['gpu_s']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
