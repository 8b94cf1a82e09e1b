"""Check 4's plan (issue 13): ``moe_offline.py --finals``'s plan plus, at the points where the
held-out pick loses to a config of the same tile at other num_stages, the pick's tile at every
fitting num_stages (roles ``stages_<s>``): whether the H200's non-monotonic answer to num_stages
(DeepSeek-V3 M=64, 16x128x128: 0.873 / 0.994 / 0.945 / 0.974 of the best at 2 / 3 / 4 / 5
stages in the sweep) survives other placements of the operands.

    python bench/moe_check4_plan.py scratch/check4/finals4.json   # rewrites the plan in place
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from moe_cases import combos, fits  # noqa: E402

STAGE_POINTS = (("deepseek-v3/fp8_w8a8-block", 64), ("deepseek-v3/fp8_w8a8-block", 256),
                ("deepseek-v3/fp8_w8a8-block", 1024), ("deepseek-v3/fp8_w8a8-block", 4096),
                ("qwen3-next-80b-a3b/bf16", 16), ("qwen3-next-80b-a3b/bf16", 256),
                ("mixtral-8x7b/fp8_w8a8", 1))


def add_stage_siblings(plan: dict) -> int:
    by_name = {c.name: c for c in combos()}
    added = 0
    for pt in plan["points"]:
        if (pt["combo"], pt["M"]) not in STAGE_POINTS:
            continue
        pick = pt["roles"]["fixer_loso"]
        for s in (2, 3, 4, 5):
            cfg = dict(pick, num_stages=s)
            if fits(by_name[pt["combo"]], cfg):
                pt["roles"][f"stages_{s}"] = cfg
                added += 1
    return added


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0])
    plan = json.loads(path.read_text())
    n = add_stage_siblings(plan)
    path.write_text(json.dumps(plan, indent=1))
    distinct = sum(len({json.dumps(c, sort_keys=True) for c in p["roles"].values()}) for p in plan["points"])
    print(f"{n} stage siblings; {len(plan['points'])} points, {distinct} distinct configs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
