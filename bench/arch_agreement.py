"""How often two archs give the same call-site compile result (issue 18 item 5: what merging archs would save).

Reads the scratch compile records of a cache folder (``<cache>/exact/v1/triton-*/<arch>/scratch-*/``,
the records a cold ``tilefit check`` wrote) and, per pair of archs, counts the (kernel, launch key)
compiled on both and how many of them agree (the same shared bytes, or both failed). Nothing is
compiled; agreement on these records is evidence, not a proof that the archs lower alike.

    python bench/arch_agreement.py /tmp/cache
"""

from __future__ import annotations

import collections
import itertools
import json
import sys
from pathlib import Path


def main() -> None:
    root = Path(sys.argv[1])
    results: dict = collections.defaultdict(dict)  # (scratch, key) -> arch -> shared or "failed"
    for path in root.glob("exact/v1/triton-*/*/scratch-*/*.json"):
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        r = rec.get("result") or {}
        value = r.get("shared_bytes") if r.get("error") is None else "failed"
        results[(path.parent.name, rec.get("key"))][rec.get("arch")] = value
    archs = sorted({a for per in results.values() for a in per})
    print(f"{sum(len(p) for p in results.values())} records, {len(results)} (kernel, launch key) pairs, archs {archs}")
    for a, b in itertools.combinations(archs, 2):
        both = [(p[a], p[b]) for p in results.values() if a in p and b in p]
        same = sum(1 for x, y in both if x == y)
        print(f"  {a} = {b}: {same} of {len(both)}" + (f" ({100 * same / len(both):.1f}%)" if both else ""))
    full = [p for p in results.values() if len(p) == len(archs)]
    one = sum(1 for p in full if len(set(p.values())) == 1)
    print(f"  all {len(archs)} archs alike: {one} of {len(full)} pairs compiled on every arch")


if __name__ == "__main__":
    main()
