"""Which Triton releases answer with proven forms: a table from the shipped probe records.

    python bench/release_coverage.py            # markdown, for bench/RESULTS.md and docs/

Per (kernel family, engine, Triton release): the groups (arch family x dtype path) whose probe
proved 3.9's bytes, those identical on fewer than 2 points (not reused), the compared probe
points, the mismatches, the points the release does not compile, the groups that differ; per
arch, how many groups are proven by reuse there. Read from
``kernels/<family>/smem/<engine>-<version>/triton-X.Y.json``; nothing is compiled.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _records(root: Path):
    for forms in sorted(root.glob("*/smem/*-*/triton-*.json")):
        doc = json.loads(forms.read_text(encoding="utf-8"))
        rec = doc.get("reused")
        if rec and rec.get("min_points"):  # a probe record (the older vLLM fused MoE 3.6 one predates them)
            yield doc, rec


def rows(root: Path) -> list[tuple]:
    out = []
    for doc, rec in _records(root):
        groups, differing = rec.get("groups") or {}, rec.get("differing") or {}
        every = {**groups, **differing}
        compared = sum(g["points"] for g in every.values())
        identical = sum(g["identical"] for g in every.values())
        failing = sum(g.get("do_not_compile", 0) for g in every.values())
        few = sorted(k for k, g in differing.items() if g["identical"] == g["points"])
        diff = ", ".join(f"{k} {g['identical']}/{g['points']} (<= {g.get('max_difference', 0)} B)"
                         for k, g in sorted(differing.items()) if g["identical"] < g["points"])
        out.append((doc["kernel"], f"{doc['engine']} {doc['engine_version']}", doc["triton_version"], rec["from"],
                    len(groups), len(few), compared, compared - identical, failing, diff or "-"))
    return out


ARCHS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100", "sm_103", "sm_110", "sm_120", "sm_121",
         "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1151", "gfx1201", "gfx1250")


def per_arch(root: Path) -> dict[tuple[str, str], dict[str, list[int]]]:
    """``{(engine, X.Y): {arch: [groups reused with the arch probed, groups compared on the arch]}}``
    over every kernel family (a group whose points on an arch all failed to compile is not counted;
    an arch an extension kept apart from a reused group, ``not_reused_on``, is compared, not reused)."""
    out: dict[tuple[str, str], dict[str, list[int]]] = {}
    for doc, rec in _records(root):
        cell = out.setdefault((doc["engine"], doc["triton_version"]), {a: [0, 0] for a in ARCHS})
        for kind in ("groups", "differing"):
            for g in (rec.get(kind) or {}).values():
                for arch in g.get("archs", ()):
                    if arch in cell:
                        cell[arch][1] += 1
                        cell[arch][0] += kind == "groups"
                for arch, apart in (g.get("not_reused_on") or {}).items():
                    if arch in cell and apart.get("points"):
                        cell[arch][1] += 1
    return out


def main() -> int:
    root = Path(__file__).resolve().parents[1] / "linter" / "kernels"
    print("| family | engine | Triton | forms of | groups reused | groups identical on < 2 points | probe points "
          "compared | mismatches | do not compile | groups that differ (identical/compared, largest difference) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows(root):
        print("| " + " | ".join(str(x) for x in r) + " |")
    print()
    print("Groups (kernel family x dtype path) proven by reuse on each arch / groups compared on it "
          "(0/0: the arch was not probed, or the family has no point there):")
    print()
    print("| engine | Triton | " + " | ".join(ARCHS) + " |")
    print("|---|---|" + "---|" * len(ARCHS))
    for (engine, rel), cell in sorted(per_arch(root).items()):
        print(f"| {engine} | {rel} | " + " | ".join(f"{a}/{b}" for a, b in (cell[x] for x in ARCHS)) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
