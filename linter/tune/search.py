"""Model-guided search: measure the model's favourites, then climb the configuration graph.

The performance model orders candidates well enough to seed a search but not to pick the
winner blind (its rank correlation with measured times is about 0.6-0.85 per batch size on an
H200). So the tuner measures the ``seed`` best-predicted candidates plus the winners of the
neighbouring batch size already tuned, then repeatedly measures the unmeasured neighbours (one
parameter one step away: a BLOCK size halved or doubled, one stage more or less, the other warp
count, the other GROUP_SIZE_M) of the ``climb_from`` best measured configs, the predicted-fastest
first, until ``budget`` measurements are spent. On the H200 sweep (bench/RESULTS.md) 24
measurements per entry found the sweep's best at all 12 (dtype, batch) points.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

STEPS = {
    "BLOCK_SIZE_M": (16, 32, 64, 128, 256),
    "BLOCK_SIZE_N": (32, 64, 128, 256),
    "BLOCK_SIZE_K": (64, 128, 256),
    "GROUP_SIZE_M": (1, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}


def config_key(cfg: Mapping) -> str:
    return "/".join(str(cfg.get(k)) for k in STEPS)


def neighbours(cfg: Mapping, allowed: Mapping[str, Mapping]) -> list[Mapping]:
    """Candidates one edge away from ``cfg`` in the configuration graph, among ``allowed``."""
    out = []
    for key, values in STEPS.items():
        if cfg.get(key) not in values:
            continue
        i = values.index(cfg[key])
        for j in (i - 1, i + 1):
            if 0 <= j < len(values):
                other = dict(cfg)
                other[key] = values[j]
                hit = allowed.get(config_key(other))
                if hit is not None:
                    out.append(hit)
    return out


def guided_search(candidates: Sequence[Mapping], predict: Callable[[Mapping], float],
                  measure: Callable[[Mapping], float | None], *, seed: int = 8, budget: int = 24,
                  climb_from: int = 2, seeds: Sequence[Mapping] = ()) -> tuple[Mapping | None, dict[str, float | None]]:
    """(best config, {config key: measured time or None}) after at most ``budget`` measurements.

    ``predict(config)`` is the model's time, ``measure(config)`` the real one (None when the
    config fails: out of resources, compile error or wrong result).
    """
    allowed = {config_key(c): c for c in candidates}
    predicted = {k: predict(c) for k, c in allowed.items()}
    order = sorted(allowed, key=predicted.__getitem__)
    times: dict[str, float | None] = {}

    def run(key: str) -> None:
        if key not in times and len(times) < budget:
            times[key] = measure(allowed[key])

    for cfg in seeds:
        if config_key(cfg) in allowed:
            run(config_key(cfg))
    for key in order[:seed]:
        run(key)
    while len(times) < min(budget, len(allowed)):
        ok = sorted((k for k, t in times.items() if t is not None), key=times.__getitem__)
        frontier = {config_key(n) for k in ok[:climb_from] for n in neighbours(allowed[k], allowed)}
        frontier = sorted((k for k in frontier if k not in times), key=predicted.__getitem__)
        if not frontier:
            frontier = [k for k in order if k not in times][:1]
        run(frontier[0])
    ok = [k for k, t in times.items() if t is not None]
    best = min(ok, key=times.__getitem__) if ok else None
    return (allowed[best] if best else None), times
