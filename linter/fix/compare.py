"""Original, naive and chosen configs side by side, for timing on a GPU.

>>> from tilefit.app import compare_fixes
>>> for row in compare_fixes("E=128,N=768,device_name=NVIDIA_H200,dtype=fp8_w8a8.json", ["rtx4090"]):
...     time(row.original, row.M); time(row.naive, row.M); time(row.chosen, row.M)

For every entry with a fixable diagnostic: the original entry, the naive fix (lower num_stages,
not below 2, until it fits every target, then halve the largest block), the engine's own default
for the batch size (vLLM's ``get_default_config``, when it fits) and the fixer's choice, plus the
GEMM shape the performance model assumed, its predictions, and why each key changed. A GPU script can time the
three configs at ``M`` with the table's kernel; nothing here needs a GPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

from tilefit.model import Applicability


@dataclass(frozen=True)
class FixComparison:
    path: str
    key: str  # the batch key as written
    M: int | None  # the batch size (tokens)
    original: Mapping
    naive: Mapping | None
    chosen: Mapping
    applicability: str  # "safe" or "unsafe"
    targets: tuple[str, ...]  # every device the chosen config fits
    shape: Mapping | None = None  # tilefit.perf.GemmShape as a dict (E, top_k, n, k, dtype, ...)
    # device -> original/naive/chosen (and engine_default when there is one)
    predicted_us: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    engine_default: Mapping | None = None  # vLLM's get_default_config for the batch size, if it fits
    source: str = "search"  # where the choice came from: search, naive fix, engine default
    reasons: Mapping[str, str] = field(default_factory=dict)  # changed key -> to fit / for speed / engine default

    def as_dict(self) -> dict:
        return asdict(self)


def compare_with(engine, table, *, margin: int = 0, unsafe: bool = False) -> list[FixComparison]:
    """The comparison rows of ``table`` (a path or a :class:`tilefit.tables.ConfigTable`) for
    ``engine``'s targets (``tilefit.app.compare_fixes`` builds the engine from ``--target``s)."""
    from tilefit.perf import shape_for
    from tilefit.tables import read_table

    from .planner import FixPlanner, batch_size

    if isinstance(table, str) or hasattr(table, "__fspath__"):
        table = read_table(str(table))
    planner = FixPlanner(engine, margin=margin, unsafe=unsafe)
    diagnostics = engine.check_table(table)
    plan = planner.plan_table(table, diagnostics)
    out = []
    for key, p in plan.plans.items():
        M = batch_size(key)
        shape = shape_for(table.meta, M) if M is not None else None
        out.append(FixComparison(
            path=table.path, key=key, M=M, original=dict(p.original), naive=dict(p.naive) if p.naive else None,
            chosen=dict(p.entry), applicability="unsafe" if p.applicability == Applicability.UNSAFE else "safe",
            targets=tuple(d for n in p.needs for d in n.group.devices),
            shape=asdict(shape) if shape is not None else None,
            predicted_us={dev: dict(row) for dev, row in p.predicted.items()},
            engine_default=dict(p.engine_default) if p.engine_default else None, source=p.source,
            reasons=dict(p.reasons),
        ))
    return out
