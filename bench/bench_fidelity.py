"""Fidelity of the shipped engine calibrations (issue 17 items 2 and 5): per calibration, the
held-out compiled points (designs ``table``/``grid``) the engine launches, how many the model's
forms answer with the compile's bytes, and the misses by (arch, dtype path) -- the count that
tests/test_engine_proof.py holds to 99.5% (CUDA archs and proven AMD groups, outside the SGLang
TMA gap of archs other than sm_120/sm_121). No Triton, no compile: the points are the package's.

    python bench/bench_fidelity.py            # every calibration of its own
    python bench/bench_fidelity.py --kernel block_gemm
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from tilefit.kernels import registry
from tilefit.smem import engine_calibrate as ec
from tilefit.smem.engine_model import EngineModel


def calibrations():
    root = registry.get("fused_moe").folder.parent
    for forms in sorted(root.glob("*/smem/*-*/triton-*.json")):
        doc = json.loads(forms.read_text(encoding="utf-8"))
        if doc.get("reused") or not forms.with_name(f"points-{forms.name}").is_file():
            continue
        yield doc["kernel"], doc["engine"], doc["engine_version"], doc["triton_version"]


def count(kernel, engine, version, triton):
    model = EngineModel(triton)
    total = exact = 0
    misses = Counter()
    for d in ec.load_points(ec.points_path(kernel, engine, version, triton)):
        p = d.point
        if d.design not in ("table", "grid") or p.shared is None or not ec.in_launch_space(engine, p):
            continue
        if engine == "sglang" and kernel == "fused_moe" and p.path.tma and p.arch not in ("sm_120", "sm_121"):
            continue  # the TMA gap (test_engine_proof.GAPS)
        ans = model.answer(p.spec().with_(engine=engine, triton=triton), p.arch, forms_only=True)
        if ans is None or (p.arch.startswith("gfx") and not ans.proven):
            continue
        total += 1
        if ans.shared_bytes == p.shared:
            exact += 1
        else:
            misses[(p.arch, p.path.dtype)] += 1
    return exact, total, misses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", action="append")
    args = ap.parse_args()
    print("| calibration | held-out exact | misses (arch, dtype path) |\n|---|---|---|")
    for k, e, v, t in calibrations():
        if args.kernel and k not in args.kernel:
            continue
        exact, total, misses = count(k, e, v, t)
        shown = ", ".join(f"{a} {d} {n}" for (a, d), n in sorted(misses.items())) or "-"
        print(f"| {k} / {e} {v}, Triton {t} | {exact}/{total} ({exact / max(total, 1):.1%}) | {shown} |")


if __name__ == "__main__":
    main()
