"""Check 6's plan (issue 13, sixth pass): ``moe_offline.py --loso ... --finals``'s plan (the
sweep's 4 fastest fitting configs, the fixer as bundled and per leave-one-shape-out fold, vLLM's
default, the naive fix, the third pass's picks) plus

* ``fixer_c02``: the fixer at the all-four-shapes centre of the near-ties (DEFAULT_TRUST 0.02,
  ANCHOR_MARGIN 0.02; rows from ``moe_offline.py --trust 0.02 --margin 0.02 --json``), so the
  GPU sees every pick the candidate constants would change;
* at DeepSeek-V3 M=4096 (the held-out miss) the tiles of vLLM's default (64x128x128 w4) and of
  the held-out pick (64x256x128 w8) at every fitting num_stages (roles ``stages_<BN>_<s>``), for
  the num_stages question of item 4.

    python bench/moe_check6_plan.py finals6.json rows_0.02_0.02.json   # rewrites finals6.json

The second call's plan (``--second``, on check 6's plan): the sweep timed burst alone, so the
steady-state best may lie outside its 4 fastest; at every power-capped point (``--points``) the
GROUP_SIZE_M and num_warps neighbours of the held-out pick, the bundled pick, vLLM's default and
the sweep's fastest that fit sm_89 (roles ``nb_<i>``, at most ``--per-point``), and DeepSeek-V3
first (the held-out miss: it ran last, where a deadline cuts).

    python bench/moe_check6_plan.py --second plan6.json plan7.json --points a:M,b:M

The next check's plan (``--next``, on an earlier check's plan; check 8 of the seventh pass): the
points and the sweep's 4 fastest of ``base``, roles whose name starts with a ``--drop`` prefix
removed (earlier passes' picks and experiments), the named roles replaced from fixer rows
(``--roles fixer=rows.json,fixer_loso=loso.json``: a ``moe_offline.py --json`` file, or a
``--loso-json`` file whose folds' rows are taken), every distinct pick of a ``moe_offline.py
--settings-json`` grid (roles ``grid_<i>``, so the offline choice of the constants is scored on
interleaved timings of one card, not on the sweep's screening), and at every point the
``--robust`` configs best in the *worst* run that timed them (roles ``robust_<i>``; the pooled
scorer's data, ``moe_offline.Scorer``).

    python bench/moe_check6_plan.py --next plan7.json plan8.json --drop fixer_pass3,tune_pass3,nb_,stages_,fixer_c02 \
        --roles fixer=rows.json,fixer_loso=loso.json --settings settings.json --robust 2
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from moe_cases import KEYS, combos, fits  # noqa: E402

STAGE_POINT = ("deepseek-v3/fp8_w8a8-block", 4096)


def cfg(k: str) -> dict:
    return dict(zip(KEYS, map(int, k.split("/"))))


def extend(plan: dict, rows: list[dict]) -> int:
    by_name = {c.name: c for c in combos()}
    alt = {(r["combo"], r["M"]): r["fixer"] for r in rows}
    added = 0
    for pt in plan["points"]:
        key = (pt["combo"], pt["M"])
        pt["roles"]["fixer_c02"] = cfg(alt[key])
        added += 1
        if key != STAGE_POINT:
            continue
        for base in (pt["roles"]["vllm_default"], pt["roles"]["fixer_loso"]):
            for s in (2, 3, 4, 5):
                c = dict(base, num_stages=s)
                if fits(by_name[pt["combo"]], c):
                    pt["roles"][f"stages_{c['BLOCK_SIZE_N']}_{s}"] = c
                    added += 1
    return added


def add_neighbours(plan: dict, points: set, per_point: int = 6) -> int:
    by_name = {c.name: c for c in combos()}
    added = 0
    for pt in plan["points"]:
        if (pt["combo"], pt["M"]) not in points:
            continue
        have = {json.dumps(c, sort_keys=True) for c in pt["roles"].values()}
        new = []
        # GROUP_SIZE_M neighbours first (same warps), then the other num_warps
        for other_warps in (False, True):
            for role in ("fixer_loso", "fixer", "vllm_default", "sweep_0"):
                base = pt["roles"].get(role)
                if base is None:
                    continue
                for g in ((base["GROUP_SIZE_M"],) if other_warps else (1, 16, 32, 64)):
                    w = 12 - base["num_warps"] if other_warps else base["num_warps"]
                    c = dict(base, GROUP_SIZE_M=g, num_warps=w)
                    k = json.dumps(c, sort_keys=True)
                    if k not in have and fits(by_name[pt["combo"]], c):
                        have.add(k)
                        new.append(c)
        for i, c in enumerate(new[:per_point]):
            pt["roles"][f"nb_{i}"] = c
            added += 1
    plan["points"].sort(key=lambda p: not p["combo"].startswith("deepseek"))
    return added


def _rows(path: str) -> list[dict]:
    data = json.loads(Path(path).read_text())
    if isinstance(data, dict) and "folds" in data:
        return [r for f in data["folds"].values() for r in f["rows"]]
    return data


def robust_configs(n: int) -> dict:
    """(combo, M) -> the ``n`` configs with the best speed in the worst run that timed them
    (runs that timed the point's fastest config), from the pooled GPU checks."""
    import math
    import statistics

    import moe_offline as mo

    scorer = mo.Scorer()
    out = {}
    for key in {k for _, rounds in scorer.rounds for k in rounds}:
        per: dict = {}
        for src, rounds in scorer.rounds:
            fin = rounds.get(key)
            if not fin:
                continue
            best = min(fin.values())
            for k, v in fin.items():
                per.setdefault(k, {}).setdefault(src, []).append(math.log(best / v))
        runs = {src for d in per.values() for src in d}
        # only configs every run of the point timed (a config one run timed is not tested across cards)
        full = [(min(statistics.mean(v) for v in d.values()), k) for k, d in per.items() if set(d) == runs]
        out[key] = [k for _, k in sorted(full, reverse=True)[:n]]
    return out


def next_plan(plan: dict, drop=(), roles=None, settings=None, robust: int = 0) -> dict:
    by_key = {}
    for role, path in (roles or {}).items():
        for r in _rows(path):
            by_key.setdefault((r["combo"], r["M"]), {})[role] = cfg(r["fixer"])
    grid: dict = {}
    if settings:
        for rows in json.loads(Path(settings).read_text()).values():
            for r in rows:
                grid.setdefault((r["combo"], r["M"]), []).append(r["fixer"])
    best = robust_configs(robust) if robust else {}
    stats = {"points": 0, "configs": 0, "grid": 0, "robust": 0}
    for pt in plan["points"]:
        key = (pt["combo"], pt["M"])
        pt["roles"] = {r: c for r, c in pt["roles"].items() if not any(r.startswith(d) for d in drop if d)}
        pt["roles"].update(by_key.get(key, {}))
        have = {json.dumps(c, sort_keys=True) for c in pt["roles"].values()}
        for tag, keys in (("grid", grid.get(key, [])), ("robust", best.get(key, []))):
            i = 0
            for k in dict.fromkeys(keys):
                c = cfg(k)
                j = json.dumps(c, sort_keys=True)
                if j not in have:
                    have.add(j)
                    pt["roles"][f"{tag}_{i}"] = c
                    i += 1
                    stats[tag] += 1
        stats["points"] += 1
        stats["configs"] += len(have)
    plan.pop("tune", None)
    return stats


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--next":
        import argparse
        import gzip

        ap = argparse.ArgumentParser()
        ap.add_argument("--next", nargs=2, metavar=("BASE", "OUT"))
        ap.add_argument("--drop", default="")
        ap.add_argument("--roles", default="")
        ap.add_argument("--settings")
        ap.add_argument("--robust", type=int, default=0)
        a = ap.parse_args(argv)
        base = Path(a.next[0])
        plan = json.loads(gzip.open(base, "rt").read() if base.suffix == ".gz" else base.read_text())
        roles = dict(x.split("=", 1) for x in a.roles.split(",") if x)
        stats = next_plan(plan, a.drop.split(","), roles, a.settings, a.robust)
        Path(a.next[1]).write_text(json.dumps(plan, indent=1))
        print(json.dumps(stats))
        return 0
    if argv and argv[0] == "--second":
        plan = json.loads(Path(argv[1]).read_text())
        pts = {(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in argv[4].split(",")}
        per = int(argv[6]) if len(argv) > 6 and argv[5] == "--per-point" else 6
        n = add_neighbours(plan, pts, per)
        Path(argv[2]).write_text(json.dumps(plan, indent=1))
        distinct = sum(len({json.dumps(c, sort_keys=True) for c in p["roles"].values()}) for p in plan["points"])
        print(f"{n} neighbours added; {len(plan['points'])} points, {distinct} distinct configs")
        return 0
    path = Path(argv[0])
    plan = json.loads(path.read_text())
    n = extend(plan, json.loads(Path(argv[1]).read_text()))
    path.write_text(json.dumps(plan, indent=1))
    distinct = sum(len({json.dumps(c, sort_keys=True) for c in p["roles"].values()}) for p in plan["points"])
    print(f"{n} roles added; {len(plan['points'])} points, {distinct} distinct configs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
