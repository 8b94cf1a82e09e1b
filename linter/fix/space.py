"""The graph of configurations around an entry, and the kernel constraints on it.

A node is a config ``(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages)``; an
edge changes one of them one step: a block size halved or doubled, ``num_warps`` halved or
doubled, one stage more or less. The graph is a lattice over each dimension's allowed values
(``graph()``: a networkx graph, built once per domain and cached, for those who want one); the
fixer walks it breadth first from the offending entry without building it (``layers`` and
``neighbours`` give the graph's nodes in its own order), so the candidates it finds are ordered
by edit distance. ``GROUP_SIZE_M`` does not change shared memory or threads, so it is not a
lattice dimension: the ranking step tries each of its values on the best candidates
(:meth:`ConfigSpace.group_values`).

**Values: the engines' tuning grids plus the table's own.** A dimension takes the values the
engines' own tuners search (``ENGINE_GRIDS``; vLLM's ``benchmarks/kernels/benchmark_moe.py`` and
SGLang's ``tuning_fused_moe_triton.py`` share the CUDA grid: BM 16-256, BN 32-256, BK 64-256,
GROUP 1/16/32/64, 4 or 8 warps, 2-5 stages; their ROCm grid: BM/BN/BK 16-256, 1-8 warps,
GROUP 1/4/8/16/32, 2 stages) and the values the table itself uses in any entry, so a fix never
writes a value no tuner and no author of the file chose (``GROUP_SIZE_M=2`` say).

Constraints on the values a fix may *set* (values the entry keeps are never judged):

* block sizes are powers of two from 16 to 256 (``tl.arange`` and ``tl.dot`` need powers of two
  and at least 16 rows), apart from values the table already uses;
* block-quantised tables: BLOCK_SIZE_K must divide the quantisation block ``block_k`` (one scale
  per K block; SGLang's loader raises a smaller BK that does not divide it, vLLM clamps BK to
  the block at launch);
* the kernel family's constraints (``tables.fix.constraints`` of its ``family.json``): in
  ``fused_moe`` tables the weight-only group-quantised paths (int4_w4a16, int8_w8a16) need
  BLOCK_SIZE_K a multiple of the group (128; vLLM's CUDA ``moe_wna16_gemm`` checks
  ``BLOCK_SIZE_K % group_size == 0``) and BLOCK_SIZE_M kept <= 64 when it was;
* ``num_warps * warp_size`` within every target's threads per block;
* SGLang's ``_down`` tables and the gate/up tables next to one keep BLOCK_SIZE_M: at run time
  the down GEMM takes the up entry's BLOCK_SIZE_M (one token sort serves both), so a new value
  in the down table would do nothing and one in the up table would change the down kernel.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Iterator, Mapping

if TYPE_CHECKING:
    import networkx as nx
# networkx is imported where a graph is built: the planner's search walks the lattice without it,
# so no check imports it (the import was a sixth of a warm json run)

from tilefit import kernels
from tilefit.serving.launch import clamps_block_k
from tilefit.variants import DEFAULT_NUM_STAGES_CUDA, DEFAULT_NUM_STAGES_ROCM, DEFAULT_NUM_WARPS, dtype_path

DIMS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_warps", "num_stages")
BLOCK_VALUES = (16, 32, 64, 128, 256)

# The engines' tuning grids, per vendor (docs: shared/docs/engines.md, "Tuning scripts").
ENGINE_GRIDS: Mapping[str, Mapping[str, tuple[int, ...]]] = {
    "cuda": {"BLOCK_SIZE_M": (16, 32, 64, 128, 256), "BLOCK_SIZE_N": (32, 64, 128, 256),
             "BLOCK_SIZE_K": (64, 128, 256), "GROUP_SIZE_M": (1, 16, 32, 64), "num_warps": (4, 8),
             "num_stages": (2, 3, 4, 5)},
    "rocm": {"BLOCK_SIZE_M": (16, 32, 64, 128, 256), "BLOCK_SIZE_N": (16, 32, 64, 128, 256),
             "BLOCK_SIZE_K": (16, 32, 64, 128, 256), "GROUP_SIZE_M": (1, 4, 8, 16, 32), "num_warps": (1, 2, 4, 8),
             "num_stages": (2,)},
}
TABLE_KEYS = DIMS + ("GROUP_SIZE_M",)


def grid_for(vendor: str | None) -> Mapping[str, tuple[int, ...]]:
    return ENGINE_GRIDS["rocm" if vendor == "AMD" else "cuda"]


def table_values(entries) -> dict[str, frozenset]:
    """Per key, the integer values the table's entries use (``entries``: the table's values)."""
    out: dict[str, set] = {k: set() for k in TABLE_KEYS}
    for e in entries:
        if isinstance(e, Mapping):
            for k in TABLE_KEYS:
                v = e.get(k)
                if type(v) is int and v > 0:
                    out[k].add(v)
    return {k: frozenset(v) for k, v in out.items()}

Node = tuple  # (BM, BN, BK, W, S)


def _with(values, original) -> tuple[int, ...]:
    out = set(values)
    if type(original) is int:
        out.add(original)
    return tuple(sorted(out))


@lru_cache(maxsize=256)
def lattice(domain: tuple[tuple[int, ...], ...]) -> nx.Graph:
    """The lattice of every config in ``domain`` (one value tuple per dimension); an edge joins
    configs that differ in one dimension by one position of that dimension's sorted values
    (``networkx.grid_graph`` with value labels, built directly)."""
    import networkx as nx

    g = nx.Graph()
    nodes = list(itertools.product(*domain))
    g.add_nodes_from(nodes)
    nxt = [dict(zip(values, values[1:])) for values in domain]
    edges = []
    for node in nodes:
        for d, step in enumerate(nxt):
            up = step.get(node[d])
            if up is not None:
                edges.append((node, node[:d] + (up,) + node[d + 1:]))
    g.add_edges_from(edges)
    return g


_NEIGHBOURS: dict[tuple, dict] = {}  # domain -> node -> its neighbours (None -> the steps per dimension)


def _neighbour_memo(domain: tuple) -> dict:
    """The neighbours memo of a lattice (:meth:`ConfigSpace.neighbours`), shared by the spaces of
    one domain (the entries of a table mostly share theirs); at most 256 domains are kept, as
    :func:`lattice` keeps its graphs."""
    hit = _NEIGHBOURS.get(domain)
    if hit is None:
        if len(_NEIGHBOURS) >= 256:
            _NEIGHBOURS.clear()
        # per dimension: value -> (the value below, the value above)
        steps = tuple({v: (values[i - 1] if i else None, values[i + 1] if i + 1 < len(values) else None)
                       for i, v in enumerate(values)} for values in domain)
        hit = _NEIGHBOURS[domain] = {None: steps}
    return hit


def table_constraints(family: str) -> tuple[dict, ...]:
    """The kernel constraints a config family's entries keep under a fix (its kernel family's
    ``tables.fix.constraints``: for some dtype paths, BLOCK_SIZE_K a multiple of a group size,
    BLOCK_SIZE_M kept at or below a bound once there)."""
    owner = kernels.table(family)
    if owner is None:
        return ()
    return tuple((owner.table.get("fix") or {}).get("constraints", ()))


@dataclass(frozen=True)
class ConfigSpace:
    """The configs a fix may choose for one entry."""

    original: tuple  # the entry's items, in order
    domain: tuple[tuple[int, ...], ...]
    default_warps: int
    default_stages: int
    vllm_block_k: int | None  # vLLM clamps BK to this at launch
    has_group: bool
    groups: tuple[int, ...] = ()  # GROUP_SIZE_M values a fix may set

    @classmethod
    def for_entry(cls, meta, entry: Mapping, vendor: str | None, max_warps: int,
                  lock_block_m: bool = False, table: Mapping[str, frozenset] | None = None) -> "ConfigSpace":
        """``lock_block_m``: BLOCK_SIZE_M may not change (SGLang's up/down table pairs share it).
        ``table``: the values the table uses per key (:func:`table_values`), allowed besides the
        engines' grid."""
        path = dtype_path(meta)
        grid = grid_for(vendor)
        table = table or {}
        block = meta.block_shape if meta.block_shape and min(meta.block_shape) > 0 else None

        def values(key: str, allowed=lambda v: True) -> tuple[int, ...]:
            return tuple(sorted(v for v in set(grid[key]) | set(table.get(key, ())) if allowed(v)))

        bm, bk = entry.get("BLOCK_SIZE_M"), entry.get("BLOCK_SIZE_K")
        bk_ok = lambda v: True  # noqa: E731
        bm_ok = lambda v: True  # noqa: E731
        if block is not None:
            bk_ok = lambda v: block[1] % v == 0  # noqa: E731
        for rule in table_constraints(meta.family):
            if path not in rule.get("dtypes", ()) or (block is not None and rule.get("unless_block_shape")):
                continue
            if rule.get("block_k_multiple_of"):
                bk_ok = lambda v, m=int(rule["block_k_multiple_of"]), prev=bk_ok: prev(v) and v % m == 0  # noqa: E731
            cap = rule.get("block_m_stays_at_most")
            if cap and type(bm) is int and bm <= int(cap):
                bm_ok = lambda v, cap=int(cap): v <= cap  # noqa: E731
        bm_values = () if lock_block_m else values("BLOCK_SIZE_M", bm_ok)
        warps = values("num_warps", lambda w: w <= max_warps)
        default_stages = DEFAULT_NUM_STAGES_ROCM if vendor == "AMD" else DEFAULT_NUM_STAGES_CUDA
        w0 = entry.get("num_warps", DEFAULT_NUM_WARPS)
        s0 = entry.get("num_stages", default_stages)
        domain = (
            _with(bm_values, bm),
            _with(values("BLOCK_SIZE_N"), entry.get("BLOCK_SIZE_N")),
            _with(values("BLOCK_SIZE_K", bk_ok), bk),
            _with(warps, w0),
            _with(values("num_stages"), s0),
        )
        vblock = min(block) if (block is not None and clamps_block_k(meta.engine)) else None
        has_group = type(entry.get("GROUP_SIZE_M")) is int
        groups = _with(values("GROUP_SIZE_M"), entry.get("GROUP_SIZE_M")) if has_group else ()
        return cls(tuple(entry.items()), domain, DEFAULT_NUM_WARPS, default_stages, vblock, has_group, groups)

    # -- nodes and entries ---------------------------------------------------------------------
    @property
    def entry(self) -> dict:
        return dict(self.original)

    @property
    def start(self) -> Node:
        hit = self.__dict__.get("_start")  # asked for each candidate's distance: built once
        if hit is None:
            e = self.entry
            hit = self.__dict__["_start"] = (e["BLOCK_SIZE_M"], e["BLOCK_SIZE_N"], e["BLOCK_SIZE_K"],
                                             e.get("num_warps", self.default_warps),
                                             e.get("num_stages", self.default_stages))
        return hit

    @property
    def _original(self) -> dict:
        """The original entry as a dict, built once (read, never changed)."""
        hit = self.__dict__.get("_original_dict")
        if hit is None:
            hit = self.__dict__["_original_dict"] = dict(self.original)
        return hit

    def node_of(self, entry: Mapping) -> Node:
        return (entry["BLOCK_SIZE_M"], entry["BLOCK_SIZE_N"], entry["BLOCK_SIZE_K"],
                entry.get("num_warps", self.default_warps), entry.get("num_stages", self.default_stages))

    def graph(self) -> nx.Graph:
        return lattice(self.domain)

    def to_entry(self, node: Node, group: int | None = None) -> dict:
        """The entry with ``node``'s values: the original's keys in order, changed values in
        place, a launch option the original leaves out added only when it differs from the
        default Triton would use."""
        out = self._original.copy()  # a copy of the dict built once (a search builds thousands)
        for name, value in zip(DIMS, node):
            if name in out or not self._is_default(name, value):
                out[name] = value
        if group is not None and self.has_group:
            out["GROUP_SIZE_M"] = group
        return out

    def _is_default(self, name: str, value: int) -> bool:
        if name == "num_warps":
            return value == self.default_warps
        if name == "num_stages":
            return value == self.default_stages
        return False

    def changes(self, entry: Mapping) -> dict:
        """Keys whose value differs from the original (added keys included), in entry order."""
        orig = self._original
        return {k: v for k, v in entry.items() if k not in orig or orig[k] != v or type(orig[k]) is not type(v)}

    def distance(self, entry: Mapping) -> int:
        """Edit distance from the original: steps along each dimension's values (a value outside
        the domain counts one step), plus one for a changed GROUP_SIZE_M."""
        node = (entry["BLOCK_SIZE_M"], entry["BLOCK_SIZE_N"], entry["BLOCK_SIZE_K"],
                entry.get("num_warps", self.default_warps), entry.get("num_stages", self.default_stages))
        total = 0
        for pos, a, b in zip(self._positions(), self.start, node):  # the five lattice dimensions
            if a == b:
                continue
            i, j = pos.get(a), pos.get(b)
            total += abs(i - j) if (i is not None and j is not None) else 1
        if self.has_group and entry.get("GROUP_SIZE_M") != self._original.get("GROUP_SIZE_M"):
            total += 1
        return total

    def steps(self, a: Mapping, b: Mapping) -> int:
        """Edit steps between two entries: positions along each dimension's sorted values and
        along GROUP_SIZE_M's (a value outside the domain counts one step)."""
        total = 0
        for values, x, y in zip(self.domain + (self.groups,), self.node_of(a) + (a.get("GROUP_SIZE_M"),),
                                self.node_of(b) + (b.get("GROUP_SIZE_M"),)):
            if x == y:
                continue
            total += abs(values.index(x) - values.index(y)) if (x in values and y in values) else 1
        return total

    def _positions(self) -> tuple[dict, ...]:
        """Per dimension of the lattice, then for GROUP_SIZE_M: value -> its first position among
        the dimension's values (what ``tuple.index`` answers; a value that is none of them is
        absent), built once per space (each candidate's distance and steps ask)."""
        positions = self.__dict__.get("_positions_memo")
        if positions is None:
            positions = []
            for values in self.domain + (self.groups,):
                pos: dict = {}
                for i, v in enumerate(values):
                    pos.setdefault(v, i)
                positions.append(pos)
            positions = self.__dict__["_positions_memo"] = tuple(positions)
        return positions

    def steps_from(self, a: Mapping):
        """``lambda b: self.steps(a, b)``, with ``a``'s node and each dimension's positions
        looked up once (the ranking asks it for every candidate of a search)."""
        positions = self._positions()
        start = self.node_of(a) + (a.get("GROUP_SIZE_M"),)
        node_of = self.node_of

        def steps(b: Mapping) -> int:
            total = 0
            for pos, x, y in zip(positions, start, node_of(b) + (b.get("GROUP_SIZE_M"),)):
                if x == y:
                    continue
                i, j = pos.get(x), pos.get(y)
                total += abs(i - j) if (i is not None and j is not None) else 1
            return total

        return steps

    def effective_bk(self, bk: int) -> int:
        return min(bk, self.vllm_block_k) if self.vllm_block_k else bk

    def changes_accumulation(self, entry: Mapping) -> bool:
        """True when the launch's BLOCK_SIZE_K (after vLLM's clamp) differs: an unsafe change."""
        own = self.__dict__.get("_own_bk")  # the original's, asked for every ranked candidate: found once
        if own is None:
            own = self.__dict__["_own_bk"] = self.effective_bk(self._original["BLOCK_SIZE_K"])
        return self.effective_bk(entry["BLOCK_SIZE_K"]) != own

    def group_values(self, group: int | None = None) -> list[int]:
        """The GROUP_SIZE_M values a fix may set, ``group`` excluded (the engines' grid and the
        table's own values)."""
        if not self.has_group:
            return []
        return [g for g in self.groups if g != group]

    def in_domain(self, entry: Mapping) -> bool:
        """Whether every value of ``entry`` is one the space allows (grid, table or the entry's)."""
        node = self.node_of(entry)
        if any(v not in values for v, values in zip(node, self.domain)):
            return False
        return not self.has_group or entry.get("GROUP_SIZE_M") in self.groups

    # -- search --------------------------------------------------------------------------------
    def layers(self, max_depth: int) -> Iterator[list[Node]]:
        """Breadth-first layers of the lattice from the entry, up to ``max_depth`` edits, each
        in the order ``networkx.bfs_layers`` gives on :meth:`graph` (its nodes' neighbours in
        :meth:`neighbours`' order), without building the graph."""
        start = self.start
        if not self.in_lattice(start):  # a value outside the domain (non-int types never get here)
            yield [start]
            return
        visited = {start}
        layer = [start]
        for _depth in range(max_depth + 1):
            if not layer:
                return
            yield layer
            nxt = []
            for node in layer:
                for child in self.neighbours(node):
                    if child not in visited:
                        visited.add(child)
                        nxt.append(child)
            layer = nxt

    def in_lattice(self, node: Node) -> bool:
        """Whether ``node`` is a node of :meth:`graph` (each value one of its dimension's)."""
        return all(v in values for v, values in zip(node, self.domain))

    def neighbours(self, node: Node) -> tuple[Node, ...]:
        """The neighbours of a node of :meth:`graph` in its adjacency order: :func:`lattice`
        adds each node's edges up (one position along each dimension in turn) in
        ``itertools.product`` order, so a node's down neighbours (dimension by dimension: the
        product order of those nodes) come first, then its up neighbours, dimension by
        dimension (``tests/test_fix_space.py`` holds it equal to the graph's)."""
        memo = self.__dict__.get("_neighbours")
        if memo is None:
            memo = self.__dict__["_neighbours"] = _neighbour_memo(self.domain)
        hit = memo.get(node)
        if hit is None:
            steps = memo[None]
            down, up = [], []
            for d, step in enumerate(steps):
                lo, hi = step[node[d]]
                if lo is not None:
                    down.append(node[:d] + (lo,) + node[d + 1:])
                if hi is not None:
                    up.append(node[:d] + (hi,) + node[d + 1:])
            hit = memo[node] = tuple(down + up)
        return hit
