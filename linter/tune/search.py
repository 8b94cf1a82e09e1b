"""Model-guided search: measure the model's favourites, then climb the configuration graph.

The performance model orders candidates well enough to seed a search but not to pick the
winner blind (its rank correlation with measured times is about 0.6-0.85 per batch size on an
H200). So the tuner measures the ``seed`` best-predicted candidates plus the winners of the
neighbouring batch size already tuned, then repeatedly measures the unmeasured neighbours (one
parameter one step away: a BLOCK size halved or doubled, one stage more or less, the other warp
count, the other GROUP_SIZE_M) of the ``climb_from`` best measured configs, the predicted-fastest
first. The last few measurements of the budget re-time the fastest configs found (a
confirmation round, interleaved), so the winner is not whichever config drew one lucky timing.
Replayed on the H200 sweep (bench/RESULTS.md, tests/test_tune.py), 24 measurements per entry
reach 0.97 of the sweep's best at all 12 (dtype, batch) points.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

STEPS = {
    "BLOCK_SIZE_M": (16, 32, 64, 128, 256),
    "BLOCK_SIZE_N": (32, 64, 128, 256),
    "BLOCK_SIZE_K": (64, 128, 256),
    "GROUP_SIZE_M": (1, 16, 32, 64),
    "num_warps": (4, 8),
    "num_stages": (2, 3, 4, 5),
}


@dataclass
class Search:
    """The search's winner, the time of every config it measured (the median of its timings for
    the confirmed finalists; None for a failed config) and how many timings it took. Unpacks
    as ``best, times``."""

    best: Mapping | None
    times: dict
    measurements: int

    def __iter__(self) -> Iterator:
        return iter((self.best, self.times))


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
                  climb_from: int = 2, seeds: Sequence[Mapping] = (), confirm: int = 3,
                  confirm_rounds: int = 1) -> Search:
    """Search ``candidates`` with at most ``budget`` measurements in all.

    ``predict(config)`` is the model's time, ``measure(config)`` the real one (None when the
    config fails: out of resources, compile error or wrong result). The last
    ``confirm * confirm_rounds`` measurements of the budget (when the budget is at least
    ``4 * confirm``; fewer finalists below) re-time the ``confirm`` fastest configs, interleaved, and each of them is ranked by the median of its times: one timing of a
    15 us kernel is a few per cent noisy, and the winner of single timings is biased towards
    whichever config got a lucky one.
    """
    allowed = {config_key(c): c for c in candidates}
    predicted = {k: predict(c) for k, c in allowed.items()}
    order = sorted(allowed, key=predicted.__getitem__)
    times: dict[str, float | None] = {}
    finalists_n = min(confirm, budget // 4)  # a small budget is all exploration
    reserve = finalists_n * confirm_rounds if finalists_n > 1 else 0
    explore = max(1, budget - reserve)

    def run(key: str) -> None:
        if key not in times and len(times) < explore:
            times[key] = measure(allowed[key])

    for cfg in seeds:
        if config_key(cfg) in allowed:
            run(config_key(cfg))
    for key in order[:seed]:
        run(key)
    while len(times) < min(explore, len(allowed)):
        ok = sorted((k for k, t in times.items() if t is not None), key=times.__getitem__)
        frontier = {config_key(n) for k in ok[:climb_from] for n in neighbours(allowed[k], allowed)}
        frontier = sorted((k for k in frontier if k not in times), key=predicted.__getitem__)
        if not frontier:
            frontier = [k for k in order if k not in times][:1]
        run(frontier[0])
    measurements = len(times)
    ok = sorted((k for k, t in times.items() if t is not None), key=times.__getitem__)
    finalists = ok[:finalists_n] if reserve and len(ok) > 1 else []
    samples = {k: [times[k]] for k in finalists}
    for _ in range(confirm_rounds if finalists else 0):
        for k in finalists:
            t = measure(allowed[k])
            measurements += 1
            if t is not None:
                samples[k].append(t)
    for k, ts in samples.items():
        times[k] = statistics.median(ts)
    ok = [k for k, t in times.items() if t is not None]
    best = min(ok, key=times.__getitem__) if ok else None
    return Search(allowed[best] if best else None, times, measurements)
