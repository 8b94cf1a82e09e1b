"""Where the H200 timings of issue 13 move, and by how much (``bench/moe_h200.py`` final rounds).

Four sources, each measured, not assumed:

* **rounds**: a config timed again in the same run on the same inputs (per replica,
  ``(max - min) / median`` of its rounds);
* **placement**: the same inputs copied to other addresses (``--replicas``, see
  :class:`engine_moe.EngineWorkload`): per config the spread of its speed (against the point's
  fastest on the same replica) over the replicas' medians. A fresh process or machine places its
  tensors anew, so this is the part of the run-to-run spread one run can see;
* **runs**: the same config in two runs (each run's speed against the fastest config both
  timed), e.g. this check against the third and the second;
* **clock**: the SM clock the NVML log (``telemetry.jsonl.gz``) saw during each timing window,
  and how a timing's deviation from its config's median goes with it.

``long warm-up``: points timed again with a long warm-up per timing (each config in its own
steady clock and power state) against the same configs' ordinary rounds.

    python bench/moe_noise.py bench/data/h200_moe_check4        # prefix of final.jsonl.gz, points, telemetry
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")


def ckey(cfg) -> str:
    return "/".join(str(cfg.get(k)) for k in KEYS)


def quantiles(values) -> dict:
    v = sorted(values)
    if not v:
        return {"n": 0}
    q = lambda f: v[min(len(v) - 1, int(f * len(v)))]  # noqa: E731
    return {"n": len(v), "median": statistics.median(v), "p75": q(0.75), "p90": q(0.9), "max": v[-1]}


def load_rows(prefix: str) -> list[dict]:
    return [json.loads(line) for line in gzip.open(f"{prefix}_final.jsonl.gz", "rt")]


def medians(rows, phase="final") -> dict:
    """(combo, M) -> replica -> config -> median µs (the device's rule, :func:`upper_median`)."""
    times: dict = {}
    for r in rows:
        if r["status"] == "ok" and r["phase"] == phase:
            times.setdefault((r["combo"], r["M"]), {}).setdefault(r.get("replica", 0), {}).setdefault(
                ckey(r["config"]), []).append(r["time_us"])
    return {pt: {rep: {k: upper_median(v) for k, v in cfgs.items()} for rep, cfgs in reps.items()}
            for pt, reps in times.items()}


def upper_median(values) -> float:
    """The median as ``moe_h200.py`` takes it on the device (the upper one of an even count)."""
    return sorted(values)[len(values) // 2]


def round_spread(rows, phase="final") -> dict:
    times: dict = {}
    for r in rows:
        if r["status"] == "ok" and r["phase"] == phase:
            times.setdefault((r["combo"], r["M"], r.get("replica", 0), ckey(r["config"])), []).append(r["time_us"])
    return quantiles([(max(v) - min(v)) / statistics.median(v) for v in times.values() if len(v) >= 3])


def placement_spread(med) -> tuple[dict, list]:
    """Per config, max - min over replicas of its speed against the replica's fastest config;
    the worst ten."""
    out, worst = [], []
    for pt, reps in med.items():
        if len(reps) < 2:
            continue
        common = set.intersection(*(set(c) for c in reps.values()))
        if not common:
            continue
        speeds = {k: [min(c[x] for x in common) / c[k] for c in reps.values()] for k in common}
        for k, s in speeds.items():
            out.append(max(s) - min(s))
            worst.append((max(s) - min(s), pt, k, [round(x, 3) for x in s]))
    worst.sort(reverse=True)
    return quantiles(out), worst[:10]


def run_spread(points_a: list[dict], points_b: list[dict]) -> tuple[dict, list]:
    """Two runs' ``median_us`` (final_points files): per config timed in both, the difference of
    its speed (each run's against the fastest config both timed)."""
    b = {(p["combo"], p["M"]): p["median_us"] for p in points_b}
    out, worst = [], []
    for p in points_a:
        q = b.get((p["combo"], p["M"]))
        if not q:
            continue
        common = [k for k in p["median_us"] if k in q]
        if len(common) < 2:
            continue
        ba, bb = min(p["median_us"][k] for k in common), min(q[k] for k in common)
        for k in common:
            d = ba / p["median_us"][k] - bb / q[k]
            out.append(abs(d))
            worst.append((abs(d), (p["combo"], p["M"]), k, round(ba / p["median_us"][k], 3), round(bb / q[k], 3)))
    worst.sort(reverse=True)
    return quantiles(out), worst[:10]


def load_telemetry(prefix: str) -> list[tuple]:
    path = Path(f"{prefix}_telemetry.jsonl.gz")
    if not path.exists():
        return []
    rows = [json.loads(line) for line in gzip.open(path, "rt")]
    return sorted((r["w"], r["sm_mhz"], r["mem_mhz"], r["power_mw"], r["temp_c"], r["reasons"]) for r in rows)


def window_clock(tel, w_end: float, window_s: float, ts=None):
    """Mean SM clock, max power and OR of the clock-event reasons over [w_end - window_s, w_end].
    ``ts``: the samples' times (``[t[0] for t in tel]``), made once by a caller that asks for many
    windows (making it per window made the report quadratic: 16 s for check 4's 3000 windows)."""
    ts = [t[0] for t in tel] if ts is None else ts
    i, j = bisect.bisect_left(ts, w_end - window_s), bisect.bisect_right(ts, w_end)
    sel = tel[i:j]
    if not sel:
        return None
    reasons = 0
    for t in sel:
        reasons |= t[5]
    return statistics.mean(t[1] for t in sel), max(t[3] for t in sel) / 1000.0, reasons


# NVML clock-event reason bits (nvml.h)
REASONS = {0x1: "gpu_idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal",
           0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}


def clock_report(rows, tel, rep_ms: float) -> dict:
    """SM clock seen during the timing windows, and whether a slow timing ran at a low clock."""
    if not tel:
        return {"samples": 0}
    by_cfg: dict = {}
    for r in rows:
        if r["status"] == "ok" and r["phase"] == "final" and "w1" in r:
            by_cfg.setdefault((r["combo"], r["M"], r.get("replica", 0), ckey(r["config"])), []).append(r)
    pairs, clocks, powers, reasons = [], [], [], {}
    ts = [t[0] for t in tel]
    for v in by_cfg.values():
        if len(v) < 3:
            continue
        med = statistics.median(x["time_us"] for x in v)
        for x in v:
            w = window_clock(tel, x["w1"], rep_ms / 1000.0 + 0.002, ts)
            if w is None:
                continue
            clocks.append(w[0])
            powers.append(w[1])
            for bit, name in REASONS.items():
                if w[2] & bit:
                    reasons[name] = reasons.get(name, 0) + 1
            pairs.append((x["time_us"] / med - 1.0, w[0]))
    out = {"samples": len(tel), "windows": len(clocks), "reasons_in_windows": reasons}
    if clocks:
        out.update(sm_mhz=quantiles(clocks), power_w=quantiles(powers),
                   sm_mhz_min=min(clocks), sm_mhz_max=max(clocks))
        slow = [c for d, c in pairs if d > 0.02]
        rest = [c for d, c in pairs if d <= 0.02]
        out["clock_of_slow_timings"] = statistics.mean(slow) if slow else None
        out["clock_of_other_timings"] = statistics.mean(rest) if rest else None
        out["slow_timings"] = len(slow)
        if len(pairs) > 2:
            xs, ys = [c for _, c in pairs], [d for d, _ in pairs]
            mx, my = statistics.mean(xs), statistics.mean(ys)
            sxy = sum((a - mx) * (b - my) for a, b in zip(xs, ys))
            sxx, syy = sum((a - mx) ** 2 for a in xs), sum((b - my) ** 2 for b in ys)
            out["corr_time_vs_clock"] = sxy / math.sqrt(sxx * syy) if sxx and syy else None
    return out


def long_warmup_report(rows) -> list[dict]:
    """Per point timed with the long warm-up: its configs' round spread there and in the ordinary
    rounds (replica 0), and how far the medians moved."""
    ordinary, long = {}, {}
    for r in rows:
        if r["status"] != "ok" or r.get("replica", 0) != 0:
            continue
        d = long if r["phase"] == "final_longwarm" else ordinary if r["phase"] == "final" else None
        if d is not None:
            d.setdefault((r["combo"], r["M"]), {}).setdefault(ckey(r["config"]), []).append(r["time_us"])
    out = []
    for pt, cfgs in long.items():
        sp_l, sp_o, moved = [], [], []
        for k, v in cfgs.items():
            o = ordinary.get(pt, {}).get(k)
            if not o or len(v) < 2 or len(o) < 2:
                continue
            sp_l.append((max(v) - min(v)) / statistics.median(v))
            sp_o.append((max(o) - min(o)) / statistics.median(o))
            moved.append(statistics.median(v) / statistics.median(o) - 1.0)
        if sp_l:
            out.append({"point": f"{pt[0]} M={pt[1]}", "configs": len(sp_l),
                        "spread_long_max": max(sp_l), "spread_ordinary_max": max(sp_o),
                        "spread_long_median": statistics.median(sp_l),
                        "spread_ordinary_median": statistics.median(sp_o),
                        "median_moved_min": min(moved), "median_moved_max": max(moved)})
    return out


def report(prefix: str, rep_ms: float = 25.0, earlier=("h200_moe_check3_points.json", "h200_moe_check_points.json")):
    rows = load_rows(prefix)
    med = medians(rows)
    out = {"rounds": round_spread(rows)}
    out["placement"], out["placement_worst"] = placement_spread(med)
    points = json.loads(Path(f"{prefix}_points.json").read_text())
    out["runs"] = {}
    for name in earlier:
        if (DATA / name).exists():
            q, worst = run_spread(points, json.loads((DATA / name).read_text()))
            out["runs"][name] = {"spread": q, "worst": worst}
    out["clock"] = clock_report(rows, load_telemetry(prefix), rep_ms)
    out["long_warmup"] = long_warmup_report(rows)
    return out


def _fmt(q: dict) -> str:
    if not q.get("n"):
        return "none"
    return (f"median {q['median']:.2%}, p75 {q['p75']:.2%}, p90 {q['p90']:.2%}, max {q['max']:.2%} "
            f"({q['n']} configs)")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    prefix = argv[0] if argv else str(DATA / "h200_moe_check4")
    earlier = tuple(argv[1:]) or ("h200_moe_check3_points.json", "h200_moe_check_points.json")
    r = report(prefix, earlier=earlier)
    print(f"rounds (same inputs, same run): {_fmt(r['rounds'])}")
    print(f"placement (replicas, same run): {_fmt(r['placement'])}")
    for d, pt, k, s in r["placement_worst"][:6]:
        print(f"    {d:.3f} {pt[0]} M={pt[1]} {k} per replica {s}")
    for name, v in r["runs"].items():
        print(f"runs (this vs {name}): {_fmt(v['spread'])}")
        for d, pt, k, a, b in v["worst"][:4]:
            print(f"    {d:.3f} {pt[0]} M={pt[1]} {k} {a} vs {b}")
    c = r["clock"]
    print("clock:", json.dumps({k: v for k, v in c.items()}, default=str))
    for x in r["long_warmup"]:
        print("long warm-up:", json.dumps(x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
