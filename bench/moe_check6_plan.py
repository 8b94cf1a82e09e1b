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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0])
    plan = json.loads(path.read_text())
    n = extend(plan, json.loads(Path(argv[1]).read_text()))
    path.write_text(json.dumps(plan, indent=1))
    distinct = sum(len({json.dumps(c, sort_keys=True) for c in p["roles"].values()}) for p in plan["points"])
    print(f"{n} roles added; {len(plan['points'])} points, {distinct} distinct configs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
