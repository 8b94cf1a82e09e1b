"""Issue 13 item 3 on a new card (twelfth pass): the GPU-free fixer's held-out picks, scored on the
final rounds of check 8's and check 9's plans re-run on this card (``h200_moe_check12c8_*``,
``h200_moe_check12c9_*``; ``moe_h200.py --phase final``, 4 interleaved rounds x 3 placements, 250 ms
warm-up rounds at the capped points).

The picks are the eighth pass's leave-one-shape-out folds in the steady regime with the fill term
(``h200_moe_offline_heldout9.json.gz``, ``steady_new``: the fixer as bundled since then); each
point is scored on the run that timed its pick beside the sweep's 4 fastest fitting configs
(check 9's plan where it has the point: it timed the picks the eighth pass moved; else check 8's),
against the fastest config there that fits sm_89: burst (geometric mean over the placements) and,
at the power-capped points, steady state. Targets per left-out shape: median >= 0.97, min >= 0.95,
never below vLLM's default by more than the band (2 % memory-bound, 5 % capped), >= the naive fix.

    python bench/moe_check12_fixer.py
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from moe_results import MEMORY_BAND, POWER_BAND, fitting_only, replica_speeds, steady_speeds  # noqa: E402

DATA = HERE / "data"
RUNS = ("h200_moe_check12c9", "h200_moe_check12c8")


def main() -> int:
    picks = json.loads(gzip.open(DATA / "h200_moe_offline_heldout9.json.gz", "rt").read())["steady_new"]
    runs = {r: {(p["combo"], p["M"]): p for p in json.loads((DATA / f"{r}_points.json").read_text())} for r in RUNS}
    burst, steady = fitting_only(replica_speeds), fitting_only(steady_speeds)
    rows = []
    for row in picks:
        key = (row["combo"], row["M"])
        for r in RUNS:
            p = runs[r].get(key)
            if p is None:
                continue
            b, st = burst(p), steady(p)
            speeds = st or b
            if all(row[x] in speeds for x in ("fixer", "vllm_default", "naive")):
                rows.append({"combo": row["combo"], "case": row["case"], "M": row["M"], "run": r.rsplit("check12", 1)[1],
                             "pick": row["fixer"], "regime": "steady" if st else "burst",
                             "band": POWER_BAND if st else MEMORY_BAND,
                             "fixer": speeds[row["fixer"]], "burst": b.get(row["fixer"]),
                             "vllm_default": speeds[row["vllm_default"]], "naive": speeds[row["naive"]]})
                break
        else:
            rows.append({"combo": row["combo"], "case": row["case"], "M": row["M"], "run": "-", "pick": row["fixer"],
                         "untimed": True})
    print("| table | M | run | held-out pick | regime | speed | burst | vLLM default | naive |")
    print("|---|---:|---|---|---|---:|---:|---:|---:|")
    for x in rows:
        if x.get("untimed"):
            print(f"| {x['combo']} | {x['M']} | – | {x['pick']} | untimed | | | | |")
            continue
        print(f"| {x['combo']} | {x['M']} | {x['run']} | {x['pick']} | {x['regime']} | {x['fixer']:.3f} | "
              f"{x['burst']:.3f} | {x['vllm_default']:.3f} | {x['naive']:.3f} |")
    print("\n| left-out shape | points | median >= 0.97 | min >= 0.95 | >= vLLM default - band | >= naive fix - band |")
    print("|---|---:|---|---|---|---|")
    yes = lambda c: "yes" if c else "**no**"  # noqa: E731
    for case in dict.fromkeys(x["case"] for x in rows):
        pts = [x for x in rows if x["case"] == case and not x.get("untimed")]
        v = [x["fixer"] for x in pts]
        med, lo = statistics.median(v), min(pts, key=lambda x: x["fixer"])
        d = min(pts, key=lambda x: x["fixer"] - x["vllm_default"] + x["band"])
        n = min(pts, key=lambda x: x["fixer"] - x["naive"] + x["band"])
        print(f"| {case} | {len(pts)} | {yes(med >= 0.97)} {med:.3f} | {yes(lo['fixer'] >= 0.95)} {lo['fixer']:.3f} "
              f"({lo['combo'].split('/')[1]} M={lo['M']}) | {yes(d['fixer'] - d['vllm_default'] + d['band'] >= 0)} "
              f"{d['fixer'] - d['vllm_default']:+.3f} ({d['combo'].split('/')[1]} M={d['M']}, band {d['band']:.0%}) | "
              f"{yes(n['fixer'] - n['naive'] + n['band'] >= 0)} {n['fixer'] - n['naive']:+.3f} "
              f"({n['combo'].split('/')[1]} M={n['M']}, band {n['band']:.0%}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
