"""Model-guided search: measure the model's favourites, then climb the configuration graph.

The performance model orders candidates well enough to seed a search but not to pick the
winner blind (its rank correlation with measured times is about 0.6-0.85 per batch size on an
H200). So the tuner measures the best-predicted config of each of the ``seed`` best-predicted
tiles (``DISTINCT_TILE_STARTS``) plus the winners of the
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
# The start configs (``seed`` of them, after the given ``seeds``) are the model's fastest with
# distinct tiles (BLOCK_SIZE_M/N/K): the model ranks a tile's num_warps / num_stages variants
# close together, and a start set of one tile's variants leaves the climb one tile to climb
# from. Issue 13 (bench/RESULTS.md, ninth pass): with the launch's fill term the model's four
# fastest at Qwen3-Next fp8 M=1 were BN=32 variants, the climb stopped (patience) before
# reaching BN=64 or BM=64, and the tuner replay fell 0.984 -> 0.959 there. False: the plain
# model order (the search before that pass).
DISTINCT_TILE_STARTS = True
TILE = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
# At a small batch (fewer rows per expert than the smallest BLOCK_SIZE_M, so every M-block is
# mostly padding) BLOCK_SIZE_M changes little of the work, and four tiles that differ in it alone
# are one start repeated: the start tiles are then distinct in BLOCK_SIZE_N/K
# (:func:`start_tile`). Issue 13 check 11 (bench/RESULTS.md, tenth pass): at Qwen3-Next fp8 M=1
# the start tiles were 16/32/64x32x256, the climb's budget ended before BLOCK_SIZE_N 64 and the
# pick was 0.968-0.977 of the best fitting in 3 of 6 rounds. False: TILE at every batch size.
SMALL_BATCH_SPANS_N = True
SMALL_BATCH_TILE = ("BLOCK_SIZE_N", "BLOCK_SIZE_K")
# The climb times the other num_stages of the best measured config first (every fitting value,
# not only one step away): on sm_90 a config's time is not smooth in num_stages and the model
# cannot rank them (bench/RESULTS.md, sixth pass: 16x64x128 at M=1 is fastest at 3 stages on
# Mixtral fp8 and at 2 on Mixtral bf16, 2.5-7 % apart). Issue 13 check 11: at Mixtral bf16 M=1
# the model put 2 stages 36th, the climb never timed it and picked a config 2.5 % slower than
# 16x64x128 s2, the fastest fitting config on two cards. False: stage neighbours in model order
# with the rest of the frontier (the search before check 11).
STAGES_OF_BEST_FIRST = True
# The finalists re-timed at the end are the fastest measured config of each of the fastest
# *tiles*, and they are ranked by their re-timings alone (the screening timing that made a config
# a finalist is biased low: it is the lucky one among many). The measurer takes the re-timings
# with a longer window (``tilefit.tune.measurer.CONFIRM_RUNS``: at least 10 warm-up and 25 timed
# kernel runs): at power-capped points a 6 ms screening window times a 1 ms kernel at its boost
# clock. Issue 13 check 11 (bench/RESULTS.md): at Mixtral bf16 M=1024 the screening put
# 128x128x64 G32 first and both finalists were its GROUP_SIZE_M variants; 25-run windows time it
# 10 % slower than 128x256x64, which the screening had third. False: the fastest configs,
# ranked by the median of all their timings (the search before check 11).
FINALISTS_DISTINCT_TILES = True
# In a small-batch search (``tile`` is ``SMALL_BATCH_TILE``) the climb goes on from the best config
# of each of the ``climb_from`` best *tiles* (``CLIMB_DISTINCT_TILES``), and the other num_stages
# of each of them come first (``STAGES_OF_CLIMB``; else only the best config's). Issue 13 twelfth
# pass (bench/RESULTS.md): with the BN-spanning starts alone, 16x64x256 s4 was timed at Qwen3-Next
# fp8 M=1 but the climb stayed on the 16x32x256 tile (its two best measured) and never timed
# 16x64x256 s5, the pick (0.999 pooled, 0.998-1.000 on three cards in check 12); offline, no
# table's min lower. ``CLIMB_SPANS_SMALL_ONLY`` False: the same climb at every batch size (not
# measured on a GPU). All three False: the climb of the tenth pass.
CLIMB_DISTINCT_TILES = True
STAGES_OF_CLIMB = True
CLIMB_SPANS_SMALL_ONLY = True


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


def start_tile(M: int, top_k: int, experts: int) -> tuple[str, ...]:
    """The parameters the start configs of a search at batch size ``M`` must differ in
    (``SMALL_BATCH_SPANS_N`` says why): ``SMALL_BATCH_TILE`` when the launch has fewer rows per
    expert (``M * top_k / experts``) than the smallest BLOCK_SIZE_M, else ``TILE``."""
    if SMALL_BATCH_SPANS_N and M * top_k < STEPS["BLOCK_SIZE_M"][0] * experts:
        return SMALL_BATCH_TILE
    return TILE


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


def steps(a: Mapping, b: Mapping) -> int:
    """Edit distance between two configs: positions along each parameter's values (``STEPS``);
    a value outside them counts one step."""
    total = 0
    for key, values in STEPS.items():
        x, y = a.get(key), b.get(key)
        if x == y:
            continue
        total += abs(values.index(x) - values.index(y)) if (x in values and y in values) else 1
    return total


class GuidedSearch:
    """:func:`guided_search` as a state machine: :meth:`ask` names the next config to time,
    :meth:`tell` gives its time (None when it failed). The scheduler (``tilefit.tune.scheduler``)
    drives many of these at once, so the measurements of many entries run on several GPUs while
    each entry's search stays sequential and deterministic: the same timings give the same
    questions in the same order, whatever ran where.

    Arguments as for :func:`guided_search`.
    """

    def __init__(self, candidates: Sequence[Mapping], predict: Callable[[Mapping], float], *, seed: int = 8,
                 budget: int = 24, climb_from: int = 2, seeds: Sequence[Mapping] = (), confirm: int = 3,
                 confirm_rounds: int = 1, patience: int | None = None, min_gain: float = 0.005,
                 tile: Sequence[str] = TILE):
        self.patience = patience
        self.tile = tuple(tile)
        self.min_gain = min_gain
        self._stale = 0  # climbing timings in a row without a gain of min_gain
        self.allowed = {config_key(c): c for c in candidates}
        self.predicted = {k: predict(c) for k, c in self.allowed.items()}
        self.order = sorted(self.allowed, key=self.predicted.__getitem__)  # ties: candidate order
        self._rank = {k: i for i, k in enumerate(self.order)}
        self.climb_from = climb_from
        self.times: dict[str, float | None] = {}
        self.finalists_n = min(confirm, budget // 4)  # a small budget is all exploration
        self.confirm_rounds = confirm_rounds
        self.reserve = self.finalists_n * confirm_rounds if self.finalists_n > 1 else 0
        self.explore = max(1, budget - self.reserve)
        starts = [config_key(c) for c in seeds if config_key(c) in self.allowed] + self._first(seed)
        self._starts = list(dict.fromkeys(starts))
        self._pending: str | None = None
        self._confirm: list[str] | None = None  # the finalists' re-timings still to take
        self._samples: dict[str, list] = {}
        self._adjacent: dict[str, list] = {}
        self.measurements = 0
        self.done = False

    def _first(self, n: int) -> list[str]:
        """The ``n`` start configs in model order: with ``DISTINCT_TILE_STARTS``, the fastest
        predicted config of each of the ``n`` fastest tiles (the search's ``tile`` parameters;
        fewer tiles than ``n``: filled up in model order)."""
        if not DISTINCT_TILE_STARTS:
            return self.order[:n]
        out, tiles = [], set()
        for k in self.order:
            if len(out) >= n:
                break
            tile = tuple(self.allowed[k].get(x) for x in self.tile)
            if tile not in tiles:
                tiles.add(tile)
                out.append(k)
        return out + [k for k in self.order if k not in out][:n - len(out)]

    def _next_explore(self) -> str | None:
        if len(self.times) >= min(self.explore, len(self.allowed)):
            return None
        for key in self._starts:
            if key not in self.times:
                return key
        if self.patience is not None and self._stale >= self.patience:
            return None
        frontier = self.frontier()
        return frontier[0] if frontier else next(k for k in self.order if k not in self.times)

    def frontier(self, times: Mapping | None = None) -> list[str]:
        """Unmeasured neighbours of the ``climb_from`` best measured configs, predicted-fastest
        first (of ``times``, default the search's own)."""
        times = self.times if times is None else times
        ok = sorted((k for k, t in times.items() if t is not None), key=times.__getitem__)
        spans = CLIMB_DISTINCT_TILES and (self.tile != TILE or not CLIMB_SPANS_SMALL_ONLY)
        climb = self._tile_bests(ok)[:self.climb_from] if spans else ok[:self.climb_from]
        frontier = {n for k in climb for n in self._neighbours(k)}
        first = set()
        if ok and STAGES_OF_BEST_FIRST:
            first = {n for k in (climb if STAGES_OF_CLIMB and spans else ok[:1]) for n in self._stage_siblings(k)}
        # by rank, not by predicted time alone: ties would follow the set's order, which
        # changes with the process's string hash seed (and so would the picks)
        return sorted((k for k in frontier | first if k not in times),
                      key=lambda k: (k not in first, self._rank[k]))

    def _tile_bests(self, ranked: Sequence[str], tile: Sequence[str] | None = None) -> list[str]:
        """The first config of each tile (``tile``'s parameters, default the search's) in ``ranked``."""
        tiles: dict = {}
        for k in ranked:
            tiles.setdefault(tuple(self.allowed[k].get(x) for x in (tile or self.tile)), k)
        return list(tiles.values())

    def _stage_siblings(self, key: str) -> list[str]:
        """The candidates that differ from ``key`` in num_stages only."""
        if not hasattr(self, "_by_stages"):
            self._by_stages: dict = {}
            for k, c in self.allowed.items():
                self._by_stages.setdefault(tuple(c.get(x) for x in STEPS if x != "num_stages"), []).append(k)
        c = self.allowed[key]
        return [k for k in self._by_stages.get(tuple(c.get(x) for x in STEPS if x != "num_stages"), []) if k != key]

    def _neighbours(self, key: str) -> list[str]:
        hit = self._adjacent.get(key)
        if hit is None:
            hit = self._adjacent[key] = [config_key(n) for n in neighbours(self.allowed[key], self.allowed)]
        return hit

    def ask(self) -> Mapping | None:
        """The config to time next (the same one until :meth:`tell`); None when the search is done."""
        if self.done:
            return None
        if self._pending is None:
            if self._confirm is None:
                self._pending = self._next_explore()
                if self._pending is None:
                    self._start_confirmation()
            if self._pending is None and self._confirm:
                self._pending = self._confirm[0]
            if self._pending is None:
                self._finish()
                return None
        return self.allowed[self._pending]

    def tell(self, time_us: float | None) -> None:
        key, self._pending = self._pending, None
        if key is None:
            raise RuntimeError("tell() without a pending ask()")
        self.measurements += 1
        if self._confirm is None:
            if key not in self._starts:
                best = min((t for t in self.times.values() if t is not None), default=None)
                gain = time_us is not None and (best is None or time_us < best * (1.0 - self.min_gain))
                self._stale = 0 if gain else self._stale + 1
            self.times[key] = time_us
        else:
            self._confirm.pop(0)
            if time_us is not None:
                self._samples[key].append(time_us)

    @property
    def confirming(self) -> bool:
        """Whether the pending question (:meth:`ask`) is a finalist's re-timing."""
        return self._confirm is not None and self._pending is not None

    def _start_confirmation(self) -> None:
        ok = sorted((k for k, t in self.times.items() if t is not None), key=self.times.__getitem__)
        if FINALISTS_DISTINCT_TILES:
            best = self._tile_bests(ok, TILE)
            ok = best + [k for k in ok if k not in best]
        finalists = ok[:self.finalists_n] if self.reserve and len(ok) > 1 else []
        self._samples = {k: [self.times[k]] for k in finalists}
        self._confirm = [k for _ in range(self.confirm_rounds if finalists else 0) for k in finalists]

    def _finish(self) -> None:
        for k, ts in self._samples.items():
            self.times[k] = statistics.median(ts[1:] if FINALISTS_DISTINCT_TILES and len(ts) > 1 else ts)
        self.done = True

    def upcoming(self, n: int) -> list[Mapping]:
        """Up to ``n`` configs the search will probably ask for after the pending one: what to
        compile ahead. The remaining start configs; once climbing, the next question for each
        way the pending timing can rank (best, among the ``climb_from`` best, behind them, failed
        -- one of them is the next question), then the rest of the frontier."""
        if self.done or self._confirm is not None:
            return []
        room = min(self.explore, len(self.allowed)) - len(self.times) - (self._pending is not None)
        out = [k for k in self._starts if k not in self.times and k != self._pending]
        pending = self._pending
        if pending is not None and not out:
            ok = sorted(t for t in self.times.values() if t is not None)
            ranks = [ok[0] / 2 if ok else 1.0, None]
            if len(ok) >= self.climb_from:
                ranks.append(ok[self.climb_from - 1] * 2 + 1)
            if len(ok) > 1:
                ranks.append((ok[0] + ok[1]) / 2)
            for t in ranks:
                after = dict(self.times)
                after[pending] = t
                nxt = self.frontier(after)[:1] or [k for k in self.order if k not in after][:1]
                out += [k for k in nxt if k not in out]
        out += [k for k in self.frontier() if k != pending and k not in out]
        return [self.allowed[k] for k in out[:max(0, min(n, room))]]

    def result(self) -> Search:
        if not self.done:
            raise RuntimeError("the search is not finished")
        ok = [k for k, t in self.times.items() if t is not None]
        if FINALISTS_DISTINCT_TILES and any(self.times.get(k) is not None for k in self._samples):
            # the winner is the fastest finalist by its re-timings: a config screened once (a short
            # window, at the boost clock) is not compared with re-timed ones (issue 13 check 12:
            # the finalists' steady re-timings ranked 128x256x64 first at Mixtral bf16 M=1024,
            # and 128x128x64 G16, a finalist's GROUP_SIZE_M sibling screened 7 % faster, won)
            ok = [k for k in self._samples if self.times.get(k) is not None]
        best = min(ok, key=self.times.__getitem__) if ok else None
        return Search(self.allowed[best] if best else None, self.times, self.measurements)


def guided_search(candidates: Sequence[Mapping], predict: Callable[[Mapping], float],
                  measure: Callable[[Mapping], float | None], *, seed: int = 8, budget: int = 24,
                  climb_from: int = 2, seeds: Sequence[Mapping] = (), confirm: int = 3,
                  confirm_rounds: int = 1, patience: int | None = None, min_gain: float = 0.005,
                  tile: Sequence[str] = TILE) -> Search:
    """Search ``candidates`` with at most ``budget`` measurements in all.

    ``predict(config)`` is the model's time, ``measure(config)`` the real one (None when the
    config fails: out of resources, compile error or wrong result). The last
    ``confirm * confirm_rounds`` measurements of the budget (when the budget is at least
    ``4 * confirm``; fewer finalists below) re-time the ``confirm`` fastest configs, interleaved,
    and each of them is ranked by the median of its times: one timing of a 15 us kernel is a few
    per cent noisy, and the winner of single timings is biased towards whichever config got a
    lucky one. ``patience``: exploration also stops once that many timings in a row (after the
    start configs) found nothing ``min_gain`` faster than the best so far; the rest of the budget
    is not spent. ``tile``: the parameters the start configs differ in (:func:`start_tile`).
    """
    search = GuidedSearch(candidates, predict, seed=seed, budget=budget, climb_from=climb_from, seeds=seeds,
                          confirm=confirm, confirm_rounds=confirm_rounds, patience=patience, min_gain=min_gain,
                          tile=tile)
    while (cfg := search.ask()) is not None:
        search.tell(measure(cfg))
    return search.result()
