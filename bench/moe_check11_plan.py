"""Check 11's plans (issue 13 item 5): the tuner against the sweep, GPU time and quality.

``--ratio OUT``: the plan of ``moe_h200.py --phase ratio``: check 10's two tables (their combos and
starting tables) and, per table, the recorded sweep's (M, config) list
(``bench/data/h200_moe_sweep.jsonl.gz``: every grid tile at GROUP_SIZE_M 1 and the GROUP_SIZE_M
16/32/64 variants of each point's fastest, in the recorded order), only the configs that fit the
RTX 4090 (``moe_cases.fits``: the sweep of *fitting* configs the item compares with; the
starting entries it also timed do not fit).

``--finals RUN OUT``: the plan of ``moe_h200.py --phase final`` after the ratio run ``RUN`` (a
folder with its ``ratio.jsonl.gz`` and ``tune_picks_r*.json``): check 10's points and roles for
the two tables, plus this run's sweep's 4 fastest fitting configs per point (median over the
rounds; roles ``sweep11_<i>``), every round's tuner pick (``tune_r<i>``) and check 10's shipped
tuner pick (``tune_c10``).

    python bench/moe_check11_plan.py --ratio plan11.json
    python bench/moe_check11_plan.py --finals bench/data/check11_run plan11_final.json
    python bench/moe_check11_plan.py --finals RUN plan.json --earlier h200_moe_check11   # + tune_a_r<i>
"""

from __future__ import annotations

import gzip
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from moe_cases import KEYS, combos, fits  # noqa: E402

DATA = HERE / "data"


def ckey(cfg) -> str:
    return "/".join(str(cfg[k]) for k in KEYS)


def check10_plan() -> dict:
    return json.loads(gzip.open(DATA / "h200_moe_check10_plan.json.gz", "rt").read())


def ratio_plan() -> dict:
    plan = check10_plan()
    by_name = {c.name: c for c in combos()}
    sweep: dict = {name: [] for name in plan["tune"]}
    seen: dict = {name: set() for name in plan["tune"]}
    dropped = {name: 0 for name in plan["tune"]}
    with gzip.open(DATA / "h200_moe_sweep.jsonl.gz", "rt") as fh:
        for line in fh:
            r = json.loads(line)
            name = r["combo"]
            if name not in sweep:
                continue
            cfg = {k: r["config"][k] for k in KEYS}
            key = (r["M"], ckey(cfg))
            if key in seen[name]:
                continue
            seen[name].add(key)
            if not fits(by_name[name], cfg):
                dropped[name] += 1
                continue
            sweep[name].append([r["M"], cfg])
    plan["sweep"] = sweep
    plan["points"] = []
    print(json.dumps({n: {"timings": len(v), "not_fitting_left_out": dropped[n]} for n, v in sweep.items()}))
    return plan


def finals_plan(run: Path, earlier: str | None = None) -> dict:
    plan = check10_plan()
    times: dict = {}
    with gzip.open(run / "ratio.jsonl.gz", "rt") as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("side") == "sweep" and r["status"] == "ok":
                times.setdefault((r["combo"], r["M"]), {}).setdefault(ckey(r["config"]), []).append(r["time_us"])
    picks = {}
    for f in sorted(run.glob("tune_picks_r*.json")):
        rnd = f.stem.rsplit("_", 1)[1]
        for name, res in json.loads(f.read_text()).items():
            for M, cfg in res["picks"].items():
                picks.setdefault((name, int(M)), {})[f"tune_{rnd}"] = cfg
    if earlier:  # an earlier ratio run's picks (bench/data/<earlier>_tune_picks_r<i>.json): roles tune_a_r<i>
        for f in sorted(DATA.glob(f"{earlier}_tune_picks_r*.json")):
            rnd = f.stem.rsplit("_", 1)[1]
            for name, res in json.loads(f.read_text()).items():
                for M, cfg in res["picks"].items():
                    picks.setdefault((name, int(M)), {})[f"tune_a_{rnd}"] = cfg
    c10 = json.loads((DATA / "h200_moe_check10_tune_picks.json").read_text())
    added = 0
    for pt in plan["points"]:
        key = (pt["combo"], pt["M"])
        have = {ckey(c) for c in pt["roles"].values()}
        med = {k: statistics.median(v) for k, v in times.get(key, {}).items()}
        for i, k in enumerate(sorted(med, key=med.__getitem__)[:4]):
            pt["roles"][f"sweep11_{i}"] = dict(zip(KEYS, map(int, k.split("/"))))
            added += k not in have
        pt["roles"].update(picks.get(key, {}))
        pt["roles"]["tune_c10"] = c10[pt["combo"]]["picks"][str(pt["M"])]
    plan.pop("tune", None)
    distinct = sum(len({ckey(c) for c in p["roles"].values()}) for p in plan["points"])
    print(json.dumps({"points": len(plan["points"]), "distinct_configs": distinct, "new_sweep_finalists": added}))
    return plan


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[0] == "--ratio":
        Path(argv[1]).write_text(json.dumps(ratio_plan(), indent=1))
        return 0
    if argv[0] == "--finals":
        earlier = argv[4] if len(argv) > 4 and argv[3] == "--earlier" else None
        Path(argv[2]).write_text(json.dumps(finals_plan(Path(argv[1]), earlier), indent=1))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
