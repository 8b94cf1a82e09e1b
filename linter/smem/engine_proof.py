"""How well the shipped engine calibrations' forms do on their held-out compiles (issue 17 item 5).

One place for what the proof test (``tests/test_engine_proof.py``) and the fidelity table
(``bench/bench_fidelity.py``) count: which calibrations are checked (:func:`calibrations`),
which compiled points are held out (:func:`held_out`), the paths whose forms are not found yet
and so not held to the target (:data:`GAPS`), and the per-family count (:func:`fidelity`).
No Triton and no engine code: the points are the package's.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..kernels import registry
from . import engine_calibrate as ec

# Paths whose forms are not found yet, so not held to the target (their estimates say "not
# proven" and `auto` compiles them where the engine's source is at hand). Empty since 2026-12-03:
# SGLang's TMA launches (USE_TMA tables), proven on sm_120/sm_121 on 2026-12-02, are proven on
# sm_90/sm_100/sm_103/sm_110 too (written candidates, after the stored TMA figures were rechecked)
# and on the mma.sync archs without a TMA unit (sm_80/86/87/89: each arch's own forms).
GAPS: Mapping[tuple[str, str], Callable] = {}

TARGET = 0.995  # bytes exact on at least this share of a family's held-out points


def calibrations() -> list[tuple[str, str, str, str]]:
    """(kernel, engine, engine version, Triton X.Y) of every shipped calibration of its own (a
    release that reuses another's forms, ``--probe-from``, is not counted: its proofs are the
    base release's)."""
    root = registry.get("fused_moe").folder.parent
    out = []
    for forms in sorted(root.glob("*/smem/*-*/triton-*.json")):
        doc = json.loads(forms.read_text(encoding="utf-8"))
        if doc.get("reused") or not forms.with_name(f"points-{forms.name}").is_file():
            continue
        out.append((doc["kernel"], doc["engine"], doc["engine_version"], doc["triton_version"]))
    return out


def held_out(kernel: str, engine: str, version: str, triton: str) -> list:
    """The compiled held-out points (designs ``table``/``grid``: no choice of a form saw them)
    that the engine launches."""
    pts = ec.load_points(ec.points_path(kernel, engine, version, triton))
    return [d.point for d in pts if d.design in ("table", "grid") and d.point.shared is not None
            and ec.in_launch_space(engine, d.point)]


def in_gap(kernel: str, engine: str, p) -> bool:
    gap = GAPS.get((kernel, engine))
    return bool(gap and gap(p))


@dataclass
class Fidelity:
    exact: int = 0
    total: int = 0
    misses: Counter = field(default_factory=Counter)  # (arch, path name) -> count
    wrong_verdicts: list = field(default_factory=list)  # (point, form bytes, limit) of proven groups

    @property
    def rate(self) -> float:
        return self.exact / self.total if self.total else 0.0

    @property
    def met(self) -> bool:
        return self.total > 0 and not self.wrong_verdicts and self.rate >= TARGET


def fidelity(kernel: str, engine: str, version: str, triton: str, model=None, limits=None) -> Fidelity:
    """Over the held-out points outside :data:`GAPS` on the CUDA archs (an AMD arch counts only
    where its forms are proven; the rest are marked unproven, which the estimate says): how many
    the forms answer with the compile's bytes, the misses, and the verdicts against a device limit
    that differ where the form is claimed proven (an unproven group's verdict is not claimed)."""
    from .engine_model import EngineModel

    model = model or EngineModel(triton)
    limits = ec.cal.device_limits() if limits is None else limits
    out = Fidelity()
    for p in held_out(kernel, engine, version, triton):
        if in_gap(kernel, engine, p):
            continue
        ans = model.answer(p.spec().with_(engine=engine, triton=triton), p.arch, forms_only=True)
        if ans is None or (p.arch.startswith("gfx") and not ans.proven):
            continue
        out.total += 1
        if ans.shared_bytes == p.shared:
            out.exact += 1
        else:
            out.misses[(p.arch, p.path.name)] += 1
            if not ans.proven:
                continue
        for x in limits.get(p.arch, ()):
            if (ans.shared_bytes > x) != (p.shared > x):
                out.wrong_verdicts.append((p, ans.shared_bytes, x))
    return out
