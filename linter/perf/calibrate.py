"""Fitting the performance model's coefficients to kernel times measured on one device.

``fit(samples, device)`` adjusts the coefficients that describe how close a device gets to its
datasheet (tensor-core efficiency, DRAM efficiency, load latency, per-iteration and launch
overheads, the roofline's overlap) so that predicted times match measured ones in log space
(relative error: a 10 µs kernel counts as much as a 500 µs one). The search is a coordinate
descent over multiplicative steps that shrink each round; it needs no numeric library and a few
hundred model evaluations. What the tuner needs from the model is the *order* of candidates, so
:func:`rank_correlation` reports the mean Spearman correlation between predicted and measured
times within each (dtype, M) group, before and after fitting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from .coefficients import Coefficients, load_coefficients
from .model import predict_time
from .shapes import GemmShape

# Coefficients worth fitting per device, with the range the search keeps them in.
FIT_BOUNDS: Mapping[str, tuple[float, float]] = {
    "mma_efficiency": (0.05, 1.0),
    "dram_efficiency": (0.2, 1.0),
    "l2_efficiency": (0.05, 1.0),
    "load_latency_ns": (100.0, 5000.0),
    "iter_overhead_cycles": (0.0, 2000.0),
    "launch_overhead_us": (0.5, 30.0),
    "epilogue_latency_ns": (0.0, 5000.0),
    "overlap_p": (1.0, 8.0),
    "mma_v2_on_wgmma": (0.1, 1.0),
    "l2_reuse_fraction": (0.05, 1.0),
    "dram_segment_bytes": (32.0, 1024.0),
    "block_scale_cycles_per_kelement": (1.0, 256.0),
    "spill_penalty_per_32_regs": (0.02, 2.0),
}


@dataclass(frozen=True)
class Sample:
    """One measured kernel time."""

    config: Mapping
    shape: GemmShape
    time_us: float
    smem_bytes: int | None = None
    group: str = ""  # what the rank correlation groups by (e.g. "fp8_w8a8/M=256")


def _predict_all(samples: Sequence[Sample], device, c: Coefficients) -> list[float]:
    return [predict_time(s.config, s.shape, device, c, smem_bytes=s.smem_bytes) for s in samples]


def log_loss(samples: Sequence[Sample], device, c: Coefficients) -> float:
    preds = _predict_all(samples, device, c)
    return sum((math.log(p) - math.log(s.time_us)) ** 2 for p, s in zip(preds, samples)) / max(1, len(samples))


# A config this much slower (in log space) than its group's fastest weighs e^-1 as much in the
# rank loss.
RANK_TAU = 0.15


def rank_loss(samples: Sequence[Sample], device, c: Coefficients, tau: float = RANK_TAU) -> float:
    """What a picker needs: the *relative* times within each group (same shape and batch size),
    right near the top. Per group, the squared log errors minus their weighted mean (a common
    scale error costs nothing), each config weighted by how close it is to the group's fastest,
    measured *or predicted* (so a slow config the model calls fast weighs as much as a fast one);
    the mean over groups."""
    preds = _predict_all(samples, device, c)
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(s.group, []).append(i)
    total = 0.0
    for idx in groups.values():
        lt = [math.log(samples[i].time_us) for i in idx]
        lp = [math.log(preds[i]) for i in idx]
        bt, bp = min(lt), min(lp)
        w = [max(math.exp(-(a - bt) / tau), math.exp(-(b - bp) / tau)) for a, b in zip(lt, lp)]
        e = [b - a for a, b in zip(lt, lp)]
        sw = sum(w)
        mean = sum(wi * ei for wi, ei in zip(w, e)) / sw
        total += sum(wi * (ei - mean) ** 2 for wi, ei in zip(w, e)) / sw
    return total / max(1, len(groups))


LOSSES = {"log": log_loss, "rank": rank_loss}


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) < 2:
        return float("nan")
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    vy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (vx * vy) if vx and vy else float("nan")


def rank_correlation(samples: Sequence[Sample], device, c: Coefficients) -> float:
    """Mean Spearman correlation of predicted vs measured times within each sample group."""
    preds = _predict_all(samples, device, c)
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(s.group, []).append(i)
    values = []
    for idx in groups.values():
        r = spearman([preds[i] for i in idx], [samples[i].time_us for i in idx])
        if not math.isnan(r):
            values.append(r)
    return sum(values) / len(values) if values else float("nan")


@dataclass
class FitReport:
    values: dict[str, float]
    loss_before: float
    loss_after: float
    rank_before: float
    rank_after: float
    evaluations: int

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def fit(samples: Sequence[Sample], device, base: Coefficients | None = None,
        params: Iterable[str] = tuple(FIT_BOUNDS), rounds: int = 8, loss: str = "log") -> FitReport:
    """Coordinate descent in log space over ``params``, starting from ``base``. ``loss``: ``log``
    (absolute log error) or ``rank`` (:func:`rank_loss`, what picking a config needs)."""
    if not samples:
        raise ValueError("no measurements to fit")
    loss_fn = LOSSES[loss]
    base = base or load_coefficients(device)
    values = dict(base.values)
    params = [p for p in params if p in values]
    current = base
    best = loss_fn(samples, device, current)
    before, rank_before = best, rank_correlation(samples, device, base)
    evaluations = 1
    step = 2.0
    for _ in range(rounds):
        improved = False
        for name in params:
            lo, hi = FIT_BOUNDS[name]
            for factor in (step, 1.0 / step):
                trial_value = min(hi, max(lo, values[name] * factor))
                if trial_value == values[name]:
                    continue
                trial = current.with_(**{name: trial_value})
                value = loss_fn(samples, device, trial)
                evaluations += 1
                if value < best - 1e-9:
                    best, current = value, trial
                    values[name] = trial_value
                    improved = True
                    break
        if not improved:
            step = math.sqrt(step)
            if step < 1.02:
                break
    fitted = {k: values[k] for k in params}
    return FitReport(fitted, before, best, rank_before, rank_correlation(samples, device, current), evaluations)
