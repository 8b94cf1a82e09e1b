"""Which Triton releases answer with proven forms: a table from the shipped probe records.

    python bench/release_coverage.py            # markdown, for bench/RESULTS.md and docs/

Per (kernel family, engine, Triton release): the groups (arch family x dtype path) whose probe
proved 3.9's bytes, the groups that differ (or had too few points), the compared probe points,
the mismatches, the points the release does not compile, and the archs each reused group was
probed on. Read from ``kernels/<family>/smem/<engine>-<version>/triton-X.Y.json``; nothing is
compiled.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(root: Path) -> list[tuple]:
    out = []
    for forms in sorted(root.glob("*/smem/*-*/triton-*.json")):
        doc = json.loads(forms.read_text(encoding="utf-8"))
        rec = doc.get("reused")
        if not rec:
            continue
        groups, differing = rec.get("groups") or {}, rec.get("differing") or {}
        compared = sum(g["points"] for g in {**groups, **differing}.values())
        identical = sum(g["identical"] for g in {**groups, **differing}.values())
        failing = sum(g.get("do_not_compile", 0) for g in {**groups, **differing}.values())
        diff = ", ".join(f"{k} {g['identical']}/{g['points']}" + (f" (<= {g['max_difference']} B)"
                                                                   if g.get("max_difference") else "")
                         for k, g in sorted(differing.items()))
        fresh = sorted(f"{f}/{d}" for f, per in (doc.get("formulas") or {}).items() for d in per)
        out.append((doc["kernel"], f"{doc['engine']} {doc['engine_version']}", doc["triton_version"], rec["from"],
                    len(groups), len(differing), compared, compared - identical, failing, diff or "-",
                    ", ".join(fresh) or "-", bool(rec.get("min_points"))))
    return out


def main() -> int:
    root = Path(__file__).resolve().parents[1] / "linter" / "kernels"
    print("| family | engine | Triton | forms of | groups reused | groups without | probe points | mismatches "
          "| do not compile | groups that differ (identical/compared) | own forms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows(root):
        print("| " + " | ".join(str(x) for x in r[:11]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
