"""Calibrating the analytic shared-memory model against the installed Triton.

``tilefit calibrate smem`` compiles a designed grid of kernel specialisations with the exact
estimator (ahead of time, for every arch family of the model), fits one closed form per (arch
family, kernel, dtype path) by choosing, from a library of candidate forms, the one that matches
the most points exactly (ties: fewest fits/overflows verdict errors against the device limits,
then the simplest), and writes ``tilefit/data/smem_model/triton-<major>.<minor>.json`` with its
provenance.

The pieces, each usable alone:

* :class:`Path` -- a dtype path of one kernel (``fused_moe`` fp8 block-quantised, ``mla_decode``
  with an fp8 KV cache, ...), :data:`PATHS` the calibrated ones;
* :func:`fit_grid` / :func:`proof_grid` -- the two point designs (the fit grid is stratified so
  every tile size, warp count and stage count appears for every path and arch; the proof grid is
  a different, seeded random design plus the tiles of real tuning tables, so a proof never
  re-uses the points a form was chosen on);
* :func:`collect` -- compiles points (cache, spawn pool) into :class:`Point` records;
* :func:`gemm_library` (GEMM kernels: ``max(loop, epilogue)`` from rings, async-copy thresholds,
  the num_stages-1 layout, extra terms and the measured epilogue table ``E``) and
  the "sums" library of a family's ``family.json`` (MLA decode: sums of tiles per num_stages
  regime) are the libraries; :func:`fit_group` / :func:`fit_sums` choose per group; :func:`build_table` writes the model;
* :func:`dump_points` / :func:`load_points` -- the compact JSON of compiled points the proof test
  reads (``tests/data/smem_points_triton-<v>.json``).

Nothing here imports triton at module level; only :func:`collect` compiles.
"""

from __future__ import annotations

import datetime
import os
import re
import itertools
import json
import random
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Callable, Iterable, Mapping, Sequence

from .. import versions
from ..dtypes import PATHS as DTYPE_PATHS, operand_bytes
from ..atomicfile import write_atomic

from ..formula import compile_formula
from ..serving.launch import SWAP_AB_ARCH, swap_ab_tile
from ..kernels import registry
from ..kernels.gemm import GEMM_BK, GEMM_BM, GEMM_BN, STAGES, WARPS  # noqa: F401 - the GEMM grid
from ..kernels.spec import KernelSpec

# ------------------------------------------------------------------------------------------------
# arch families


# Every arch the model maps, by family. The calibration compiles the archs of CALIBRATION_ARCHS;
# the others of a family inherit its forms (same lowering of tl.dot).
ARCH_FAMILIES: Mapping[str, str] = {
    "sm_70": "fma", "sm_75": "fma",
    "sm_80": "mma_v2", "sm_86": "mma_v2", "sm_87": "mma_v2", "sm_89": "mma_v2",
    "sm_120": "mma_v2", "sm_121": "mma_v2_sm121",
    "sm_90": "wgmma",
    "sm_100": "tcgen05", "sm_110": "tcgen05", "sm_103": "tcgen05_sm103",
    "gfx90a": "cdna3", "gfx942": "cdna3", "gfx950": "cdna4",
    "gfx1100": "rdna", "gfx1151": "rdna", "gfx1201": "rdna",
    # MI455X (CDNA5): wave32 WMMA; only the engines' own gfx1250 kernels are calibrated there
    "gfx1250": "cdna5",
}

# archs compiled per family, the first one with the most points
CALIBRATION_ARCHS: Mapping[str, tuple[str, ...]] = {
    "fma": ("sm_75",),
    "mma_v2": ("sm_89", "sm_80", "sm_86", "sm_120"),
    # GB10: Triton 3.6 stages one operand at num_stages 1 where the other mma.sync archs stage both
    "mma_v2_sm121": ("sm_121",),
    "wgmma": ("sm_90",),
    "tcgen05": ("sm_100",),
    "tcgen05_sm103": ("sm_103",),
    "cdna3": ("gfx942",),
    "cdna4": ("gfx950",),
    "rdna": ("gfx1100", "gfx1201"),
}

# archs whose Triton has no fp8e4nv (sm_70/75/80/86: fp8e4b15/fp8e5 only; gfx90a, gfx1100: none)
NO_FP8 = frozenset({"sm_70", "sm_75", "sm_80", "sm_86", "sm_87", "gfx90a", "gfx1100"})


# ------------------------------------------------------------------------------------------------
# dtype paths


@dataclass(frozen=True)
class Path:
    """One dtype path of one kernel: what a form is fitted for (``dtype`` is the model's key)."""

    kernel: str
    dtype: str  # the form's dtype key (for MLA decode: the KV-cache dtype)
    quant: str = "none"
    block_shape: tuple[int, int] | None = None
    kv_dtype: str | None = None
    swap_ab: bool = False
    tma: str | None = None  # SGLang's fused MoE through TMA descriptors: "b" (up) or "ab" (down)

    @property
    def name(self) -> str:
        parts = [self.kernel, self.dtype]
        if self.quant not in ("none",):
            parts.append(self.quant)
        if self.block_shape:
            parts.append("%dx%d" % self.block_shape)
        if self.swap_ab:
            parts.append("swap_ab")
        if self.tma:
            parts.append(f"tma_{self.tma}")
        return "/".join(parts)

    def to_json(self) -> dict:
        out: dict = {"kernel": self.kernel, "dtype": self.dtype}
        if self.quant != "none":
            out["quant"] = self.quant
        if self.block_shape:
            out["block_shape"] = list(self.block_shape)
        if self.kv_dtype:
            out["kv_dtype"] = self.kv_dtype
        if self.swap_ab:
            out["swap_ab"] = True
        if self.tma:
            out["tma"] = self.tma
        return out

    @classmethod
    def from_json(cls, d: Mapping) -> "Path":
        bs = d.get("block_shape")
        return cls(d["kernel"], d["dtype"], d.get("quant", "none"), tuple(bs) if bs else None,
                   d.get("kv_dtype"), bool(d.get("swap_ab", False)), d.get("tma"))

    @property
    def fp8(self) -> bool:
        return self.dtype == "fp8_w8a8" or (self.kv_dtype or "").startswith("fp8")

    def runs_on(self, arch: str) -> bool:
        """Whether the engines launch this path on ``arch`` (fp8 needs sm_89+ / gfx942+, the swap
        of A and B is vLLM's on sm_90 only)."""
        if self.fp8 and arch in NO_FP8:
            return False
        if self.swap_ab and arch != SWAP_AB_ARCH:
            return False
        return True


def family_paths(kernels: Iterable[str] | None = None) -> tuple[Path, ...]:
    """The dtype paths the calibration fits forms for: every registered kernel family's
    (``family.json``'s ``calibration.paths``), or those of ``kernels``."""
    fams = registry.families() if kernels is None else [registry.get(k) for k in kernels]
    return tuple(Path.from_json(p) for fam in fams for p in fam.calibration_paths())


PATHS: tuple[Path, ...] = family_paths()

# A point whose operand ring alone exceeds this is out of the model's domain: it overflows every
# device (the largest per-block limit is 232448 bytes) whatever the form says.
DOMAIN_BYTES = 4 * 131072


@dataclass(frozen=True)
class Point:
    """One compiled point: a path, a tile, num_warps, num_stages, an arch and the result."""

    path: Path
    tile: tuple[int, ...]  # GEMM: (BM, BN, BK); MLA decode: (BLOCK_N, BLOCK_H, Lk, Lv)
    num_warps: int
    num_stages: int
    arch: str
    shared: int | None = None  # None: not compiled (or failed, see error)
    error: str | None = None

    def spec(self) -> KernelSpec:
        return point_spec(self.path, self.tile, self.num_warps, self.num_stages)

    @property
    def family(self) -> str:
        return ARCH_FAMILIES.get(self.arch, "?")


def point_spec(path: Path, tile: Sequence[int], num_warps: int, num_stages: int) -> KernelSpec:
    """The spec a table entry (or a call site) of ``path`` with this tile produces (its kernel
    family's :meth:`~tilefit.kernels.KernelFamily.point_spec`)."""
    return registry.get(path.kernel).point_spec(path, tile, num_warps, num_stages)


def ring_lower_bound(path: Path, tile: Sequence[int], num_stages: int) -> int:
    """A cheap lower bound of the operand buffers (the domain filter of the grids)."""
    return registry.get(path.kernel).ring_lower_bound(path, tile, num_stages)


def _applies(path: Path, tile: Sequence[int]) -> bool:
    if path.swap_ab:  # vLLM swaps only for BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N
        return swap_ab_tile(tile[0], tile[1])
    return registry.get(path.kernel).applies(path, tile)


def _stratified(rng: random.Random, pool: list, n: int, keys: Sequence[Callable]) -> list:
    """``n`` items of ``pool`` such that every value of every key appears (as far as ``n``
    allows), the rest uniformly at random."""
    if n >= len(pool):
        return list(pool)
    chosen: list = []
    seen = set()
    for key in keys:
        values = sorted({key(p) for p in pool}, key=repr)
        for v in values:
            cands = [p for p in pool if key(p) == v and id(p) not in seen]
            if cands and len(chosen) < n:
                pick = rng.choice(cands)
                chosen.append(pick)
                seen.add(id(pick))
    rest = [p for p in pool if id(p) not in seen]
    rng.shuffle(rest)
    chosen.extend(rest[: max(0, n - len(chosen))])
    return chosen


def _points_for(path: Path, arch: str, n: int, rng: random.Random) -> list[Point]:
    if not path.runs_on(arch):
        return []
    fam = registry.get(path.kernel)
    pool = [(t, w, s) for t, w, s in fam.calibration_points()
            if _applies(path, t) and ring_lower_bound(path, t, s) <= DOMAIN_BYTES]
    picked = _stratified(rng, pool, n, fam.calibration_strata())
    return [Point(path, tuple(t), w, s, arch) for t, w, s in picked]


# points per (path, arch): the first arch of a family gets the most
FIT_PER_PATH = {"main": 60, "other": 16}
PROOF_PER_PATH = {"main": 14, "other": 6}


# families sampled more thinly (an arch of a family calibrated elsewhere, or families whose
# lowering the library does not capture yet)
FAMILY_SCALE = {"fma": 0.5, "tcgen05_sm103": 0.5, "cdna4": 0.5, "rdna": 0.5, "mma_v2_sm121": 0.5}


def _design(seed: int, per_path: Mapping[str, int], families: Iterable[str] | None,
            paths: Sequence[Path], scale: float, archs: Mapping[str, Sequence[str]] | None = None) -> list[Point]:
    archs = archs or CALIBRATION_ARCHS
    fams = list(families) if families is not None else list(archs)
    points: list[Point] = []
    for fam in fams:
        for i, arch in enumerate(archs.get(fam, ())):
            n = per_path["main" if i == 0 else "other"]
            for path in paths:
                rng = random.Random(f"{seed}:{path.name}:{arch}")
                k = max(4, int(round(n * scale * FAMILY_SCALE.get(fam, 1.0))))
                extra = float(registry.get(path.kernel).calibration.get("points_scale", 1.0))
                if extra != 1.0:  # kernels with more regimes get more points
                    k = max(4, int(round(k * extra)))
                points.extend(_points_for(path, arch, k, rng))
    return points


def fit_grid(families: Iterable[str] | None = None, paths: Sequence[Path] | None = None,
             scale: float = 1.0) -> list[Point]:
    """The design the forms are chosen on (stratified over every factor; seed 1)."""
    return _design(1, FIT_PER_PATH, families, PATHS if paths is None else paths, scale)


# the archs the proof covers (the brief's NVIDIA set; AMD where calibrated)
PROOF_ARCHS: Mapping[str, tuple[str, ...]] = {
    "mma_v2": ("sm_89", "sm_80", "sm_86", "sm_120"),
    "wgmma": ("sm_90",),
    "tcgen05": ("sm_100",),
    "cdna3": ("gfx942",),
}


def proof_grid(families: Iterable[str] | None = None, paths: Sequence[Path] | None = None, scale: float = 1.0,
               exclude: Iterable[Point] = (), archs: Mapping[str, Sequence[str]] | None = None) -> list[Point]:
    """A different design (seed 2, uniform random), without the points of ``exclude``."""
    taken = {_ident(p) for p in exclude}
    pts = _design(2, PROOF_PER_PATH, families, PATHS if paths is None else paths, scale, archs or PROOF_ARCHS)
    return [p for p in pts if _ident(p) not in taken]


def _ident(p: Point) -> tuple:
    return (p.path, p.tile, p.num_warps, p.num_stages, p.arch)


# ------------------------------------------------------------------------------------------------
# compiling


def collect(points: Sequence[Point], jobs: int | None = None, cache_dir=None,
            progress: Callable[[int, int], None] | None = None) -> list[Point]:
    """Compile every point (exact estimator, cached); returns the points with ``shared`` or
    ``error`` filled in."""
    from .cache import ExactEstimator

    est = ExactEstimator(cache_dir)
    items = [(p.spec(), p.arch) for p in points]
    results = est.many(items, jobs=jobs, progress=progress)
    out = []
    for p, item in zip(points, items):
        r = results[item]
        if r.error is None:
            out.append(Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, int(r.shared_bytes)))
        else:
            out.append(Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, None,
                             (r.error_stage or "?") + ": " + _first_error_line(r.error)))
    return out


def _first_error_line(text: str) -> str:
    for line in text.splitlines():
        if "error" in line.lower() and len(line) < 300:
            return line.strip()
    return text.strip().splitlines()[-1][:300] if text.strip() else "?"


# ------------------------------------------------------------------------------------------------
# compact JSON of points


def dump_points(points: Sequence[Point], *, triton_version: str, design: str, extra: Mapping | None = None) -> dict:
    """A compact document: the paths once, then one short row per point
    ``[path index, arch, *tile, num_warps, num_stages, shared]`` (failed compiles are left out)."""
    paths: list[Path] = []
    index: dict[Path, int] = {}
    rows = []
    for p in points:
        if p.shared is None:
            continue
        if p.path not in index:
            index[p.path] = len(paths)
            paths.append(p.path)
        rows.append([index[p.path], p.arch, *p.tile, p.num_warps, p.num_stages, p.shared])
    doc = {"format": 1, "triton_version": triton_version, "design": design,
           "columns": "path, arch, tile (GEMM: BM BN BK; MLA decode: BLOCK_N BLOCK_H Lk Lv), num_warps, "
                      "num_stages, shared bytes (metadata.shared)",
           "paths": [p.to_json() for p in paths], "points": rows}
    if extra:
        doc.update(extra)
    return doc


def write_points(doc: Mapping, path: str | FsPath) -> None:
    """One point per line: small diffs, small files."""
    lines = ["{"]
    items = [(k, v) for k, v in doc.items() if k != "points"]
    for k, v in items:
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))},")
    lines.append('  "points": [')
    rows = doc.get("points", [])
    for i, row in enumerate(rows):
        lines.append("    " + json.dumps(row, separators=(",", ":")) + ("," if i + 1 < len(rows) else ""))
    lines.append("  ]")
    lines.append("}")
    write_atomic(path, "\n".join(lines) + "\n")


def decode_row(paths: Sequence[Path], row: Sequence) -> tuple[Point, list]:
    """One row of a points file, ``[path index, arch, *tile, num_warps, num_stages, shared, *rest]``
    (the tile as long as the kernel family's point columns; shared null where the point did not
    compile): the point, and what follows its bytes (an engine calibration's design and error
    index). The one reader of both points formats (:func:`load_points`, the engine calibration's
    :func:`~tilefit.smem.engine_calibrate.load_points` and its model's compiled points)."""
    if not isinstance(row, (list, tuple)) or len(row) < 5 or not isinstance(row[0], int) \
            or not 0 <= row[0] < len(paths):
        raise ValueError(f"points row {row!r}: not [path index, arch, *tile, num_warps, num_stages, shared, ...]")
    path = paths[row[0]]
    ntile = len(registry.get(path.kernel).point_columns)
    if len(row) < 5 + ntile:
        raise ValueError(f"points row {row!r}: {path.kernel} rows have {ntile} tile columns")
    tile = tuple(int(x) for x in row[2:2 + ntile])
    w, s, shared = row[2 + ntile:5 + ntile]
    return (Point(path, tile, int(w), int(s), str(row[1]), None if shared is None else int(shared)),
            list(row[5 + ntile:]))


def load_points(doc_or_path) -> list[Point]:
    if isinstance(doc_or_path, (str, FsPath)):
        doc = json.loads(FsPath(doc_or_path).read_text(encoding="utf-8"))
    else:
        doc = doc_or_path
    paths = [Path.from_json(p) for p in doc["paths"]]
    return [decode_row(paths, row)[0] for row in doc["points"]]


# ------------------------------------------------------------------------------------------------
# the epilogue's layout-conversion scratch


# The accumulator leaves the MMA in the MMA's register layout and is stored from a coalesced
# blocked layout; the conversion between the two goes through shared memory when warps exchange
# data, and Triton sizes that scratch with its linear-layout swizzling optimiser
# (``getNumScratchElemsSwizzledCvt``: the tile over the repetitions both layouts share). That
# size has no closed form in (BM, BN, num_warps): 256x128 with 8 warps needs the full tile,
# 256x256 with 8 warps an eighth of it, 128x32 with 4 warps none. It depends on nothing else of
# the kernel (the dtype path only through the output's element size), so the calibration
# measures it once per (BM, BN, num_warps, output bytes) and arch family, with the operand
# buffers as small as they get (num_stages 1, BLOCK_SIZE_K 16), and the forms read it as the
# variable ``E``. Sizes outside the table fall back to the full tile ``BM*BN*c`` (an upper bound).
EPI_BM = (16, 32, 64, 128, 256)
EPI_BN = (16, 32, 64, 128, 256)
EPI_WARPS = (1, 2, 4, 8, 16)
# (output bytes, path, BLOCK_SIZE_K): the 8-bit paths at BK 32 have the operand bytes of the 16-bit
# one at BK 16 but, at num_stages 1, sometimes keep an operand out of shared memory (fp8 and int8
# not always alike); the table takes the smallest (each is the larger of its operands and the
# epilogue's scratch).
EPI_MEASURES = ((2, Path("fused_moe", "bf16"), 16), (2, Path("fused_moe", "int8_w8a8", "per_tensor"), 32),
                (2, Path("fused_moe", "fp8_w8a8", "per_tensor"), 32), (4, Path("fused_moe", "fp32"), 16))
EPI_PATHS = {2: Path("fused_moe", "bf16"), 4: Path("fused_moe", "fp32")}


def epilogue_points(arch: str) -> list[Point]:
    pts = []
    for _c, path, bk in EPI_MEASURES:
        if arch == "sm_75" and path.dtype == "int8_w8a8":  # no int8 MMA there
            continue
        if not path.runs_on(arch):  # no fp8e4nv
            continue
        for bm, bn, w in itertools.product(EPI_BM, EPI_BN, EPI_WARPS):
            pts.append(Point(path, (bm, bn, bk), w, 1, arch))
    return pts


def epilogue_doc(points: Sequence[Point], family_default: Mapping[str, str] | None = None) -> dict:
    """The model file's ``epilogue`` entry from compiled :func:`epilogue_points`: per arch and
    output size, the shared memory of the smallest kernel of each (BM, BN, num_warps). A failed
    compile leaves the full tile (the upper bound)."""
    archs: dict[str, dict[str, list]] = {}
    values: dict[tuple, int] = {}
    for p in points:
        if p.shared is None:
            continue
        key = (p.arch, 4 if p.path.dtype == "fp32" else 2, p.tile[0], p.tile[1], p.num_warps)
        values[key] = min(values.get(key, p.shared), p.shared)
    for arch in sorted({p.arch for p in points}):
        per_c = {}
        for c in sorted(EPI_PATHS):
            per_c[str(c)] = [[[values.get((arch, c, bm, bn, w)) or bm * bn * c for w in EPI_WARPS]
                              for bn in EPI_BN] for bm in EPI_BM]
        archs[arch] = per_c
    defaults = dict(family_default or {f: a[0] for f, a in CALIBRATION_ARCHS.items()})
    return {"axes": {"BM": list(EPI_BM), "BN": list(EPI_BN), "W": list(EPI_WARPS)},
            "family_default": {f: a for f, a in defaults.items() if a in archs}, "archs": archs}


# ------------------------------------------------------------------------------------------------
# the candidate forms


# what the model file records per dtype path (tilefit.dtypes is the source)
OPERAND_BYTES: Mapping[str, Mapping[str, float]] = {
    name: dict(zip("abc", p.operand_bytes)) for name, p in DTYPE_PATHS.items()}

# The GEMM library. Each choice is (formula text, the same as a Python function of the variables
# dict ``v``); the search evaluates the functions, the chosen form is written as text and checked
# against the functions on every point.
#
# How many buffers a pipelined operand gets: num_stages - 1 (mma.sync, AMD), num_stages where the
# MMA reads shared memory asynchronously (wgmma, tcgen05: only for BLOCK_SIZE_M >= 64, below that
# Triton falls back to mma.sync; vLLM's swapped fp8 kernel fills the 64-row side with N).
RINGS: Mapping[str, tuple[str, Callable]] = {
    "S-1": ("max(S - 1, 1)", lambda v: max(v["S"] - 1, 1)),
    "S": ("S", lambda v: v["S"]),
    "S|BM>=64": ("(S if BM >= 64 or SWAP else max(S - 1, 1))",
                 lambda v: v["S"] if v["BM"] >= 64 or v["SWAP"] else max(v["S"] - 1, 1)),
}
# An operand is copied asynchronously (and so multi-buffered) only when each thread moves at least
# 4 bytes of it (cp.async's smallest copy); otherwise it is loaded into registers and stored once.
# Thresholds in bytes per warp (32-thread warps; 64 on CDNA). "never": the operand is not in shared
# memory at all (packed int4 weights, unpacked and dequantised in registers before the MMA).
ASYNC_MIN: Mapping[str, int | None] = {"any": None, "4B/thread": 128, "8B/thread": 256, "never": -1}
S1_MODES: Mapping[str, str] = {
    "sum": "",  # without pipelining both operands are staged once
    "max": "max(BM*BK*a, BK*BN*b)",  # ... one after the other
    "A": "BM*BK*a",  # ... only the activation (the weight is dequantised from registers)
    # ... only the weight: below the MMA's 64 rows an 8-bit activation is loaded straight into the
    # operand layout (Hopper and Blackwell fall back to mma.sync there)
    "B|BM<64": "(BK*BN*b if BM < 64 and not SWAP else BM*BK*a + BK*BN*b)",
}
# Terms added to the loop's buffers.
LOOP_EXTRAS: Mapping[str, tuple[str, Callable]] = {
    # block quantisation: the scale vector (fp32) of the longer tile side, converted across warps
    # once the loop is pipelined and the vector spans more than one element per thread
    "scales": (" + (4*max(BM, BN) if GK and S >= 2 and max(BM, BN) >= 32*W else 0)",
               lambda v: 4 * max(v["BM"], v["BN"]) if v["GK"] and v["S"] >= 2 and max(v["BM"], v["BN"]) >= 32 * v["W"]
               else 0),
    # ... where only one side's vector crosses warps (the MMA's accumulator layout decides which)
    "scales_n": (" + (4*BN if GK and S >= 2 and BN >= 32*W else 0)",
                 lambda v: 4 * v["BN"] if v["GK"] and v["S"] >= 2 and v["BN"] >= 32 * v["W"] else 0),
    "scales_m": (" + (4*BM if GK and S >= 2 and BM >= 32*W else 0)",
                 lambda v: 4 * v["BM"] if v["GK"] and v["S"] >= 2 and v["BM"] >= 32 * v["W"] else 0),
    # wNa16: the dequantised weight tile in the compute dtype, staged once for the MMA
    "dequant": (" + BK*BN*2", lambda v: v["BK"] * v["BN"] * 2),
    # wgmma/tcgen05 read B from shared memory: an int8 weight converted to 16 bits is staged there
    "convert_b": (" + BK*BN*b", lambda v: v["BK"] * v["BN"] * v["b"]),
    "convert_b_wg": (" + (BK*BN*b if BM >= 64 else 0)", lambda v: v["BK"] * v["BN"] * v["b"] if v["BM"] >= 64 else 0),
    # tcgen05: the MMA's completion barriers (8 bytes each)
    "barriers": (" + ((8 if S == 1 else 16) if BM >= 64 else 0)",
                 lambda v: (8 if v["S"] == 1 else 16) if v["BM"] >= 64 else 0),
    "barriers_s": (" + (8*S if BM >= 64 else 0)", lambda v: 8 * v["S"] if v["BM"] >= 64 else 0),
}
EPILOGUES: Mapping[str, tuple[str, Callable]] = {
    "table": ("E", lambda v: v["E"]),
    "full": ("BM*BN*c", lambda v: v["BM"] * v["BN"] * v["c"]),
    "none": ("0", lambda v: 0),
}


@dataclass(frozen=True)
class GemmForm:
    """One candidate of the GEMM library: ``max(loop, epilogue)``."""

    ring_a: str
    ring_b: str
    async_a: str
    async_b: str
    s1: str
    extras: tuple[str, ...]
    epilogue: str

    @property
    def label(self) -> str:
        ring = self.ring_a if self.ring_a == self.ring_b else f"A:{self.ring_a},B:{self.ring_b}"
        return (f"ring={ring} async A:{self.async_a} B:{self.async_b} s1={self.s1} "
                f"extras={'+'.join(self.extras) or '-'} epilogue={self.epilogue}")

    def text(self) -> str:
        def operand(ring: str, size: str, threshold: str) -> str:
            t = ASYNC_MIN[threshold]
            r = RINGS[ring][0]
            if t == -1:
                return "0"
            if t is None:
                return f"{r}*{size}"
            return f"({r} if {size} >= {t}*W else 1)*{size}"

        loop = f"{operand(self.ring_a, 'BM*BK*a', self.async_a)} + {operand(self.ring_b, 'BK*BN*b', self.async_b)}"
        if self.s1 != "sum":
            loop = f"({loop} if S > 1 else {S1_MODES[self.s1]})"
        loop += "".join(LOOP_EXTRAS[x][0] for x in self.extras)
        epi = EPILOGUES[self.epilogue][0]
        return loop if epi == "0" else f"max({loop}, {epi})"


# extra terms of one kind exclude each other (a form has at most one of each group)
EXTRA_GROUPS = (("scales", "scales_n", "scales_m"), ("convert_b", "convert_b_wg"), ("dequant",),
                ("barriers", "barriers_s"))


def gemm_library(extras: Sequence[str] | None = None, max_extras: int = 2) -> list[GemmForm]:
    names = set(extras if extras is not None else LOOP_EXTRAS)
    groups = [[None] + [e for e in g if e in names] for g in EXTRA_GROUPS]
    extra_sets = []
    for combo in itertools.product(*groups):
        chosen = tuple(e for e in combo if e is not None)
        if len(chosen) <= max_extras:
            extra_sets.append(chosen)
    return [GemmForm(ra, rb, ta, tb, s1, xs, e) for ra, rb, ta, tb, s1, xs, e in itertools.product(
        RINGS, RINGS, ASYNC_MIN, ASYNC_MIN, S1_MODES, extra_sets, EPILOGUES)]


def _gemm_parts(v: Mapping) -> dict:
    """Per point: every component's value, so a candidate costs a few additions."""
    A = v["BM"] * v["BK"] * v["a"]
    B = v["BK"] * v["BN"] * v["b"]
    W = v["W"]
    rings = {k: f(v) for k, (_, f) in RINGS.items()}

    def n_buffers(size):
        return {k: (0 if t == -1 else None if t is None else size >= t * W) for k, t in ASYNC_MIN.items()}

    return {"A": A, "B": B, "S1": v["S"] == 1, "rings": rings, "async_a": n_buffers(A), "async_b": n_buffers(B),
            "s1": {"sum": None, "max": max(A, B), "A": A, "B|BM<64": B if v["BM"] < 64 and not v["SWAP"] else A + B},
            "extras": {k: f(v) for k, (_, f) in LOOP_EXTRAS.items()},
            "epi": {k: f(v) for k, (_, f) in EPILOGUES.items()}}


def _gemm_predict(form: GemmForm, parts: Mapping) -> float:
    def operand(ring, size, flag):
        if flag == 0 and flag is not False:  # "never"
            return 0
        r = parts["rings"][ring]
        if flag is None or flag is True:
            return r * size
        return size  # below the async threshold: one buffer

    flag_a = parts["async_a"][form.async_a]
    flag_b = parts["async_b"][form.async_b]
    s1 = parts["s1"][form.s1]
    if parts["S1"] and s1 is not None:
        loop = s1
    else:
        loop = operand(form.ring_a, parts["A"], flag_a) + operand(form.ring_b, parts["B"], flag_b)
    for x in form.extras:
        loop += parts["extras"][x]
    return max(loop, parts["epi"][form.epilogue])


# ------------------------------------------------------------------------------------------------
# fitting


CALIBRATED_RATE = 0.99


def device_limits(db=None) -> dict[str, tuple[int, ...]]:
    """The per-block shared-memory limits of the device database, per arch."""
    if db is None:
        from tilefit.device_db import load_database

        db = load_database()
    out: dict[str, set] = {}
    for dev in db.devices:
        if dev.smem_per_block_optin:
            out.setdefault(dev.arch, set()).add(int(dev.smem_per_block_optin))
    return {a: tuple(sorted(v)) for a, v in out.items()}


def _variables_model(epilogue: Mapping | None = None):
    from .analytic import AnalyticModel

    return AnalyticModel({"triton_version": "calibration", "arch_families": dict(ARCH_FAMILIES),
                          "operand_bytes": OPERAND_BYTES, "formulas": {}, "epilogue": epilogue or {}})


def point_variables(points: Sequence[Point], epilogue: Mapping | None = None) -> list[dict]:
    model = _variables_model(epilogue)
    return [model.variables(p.spec(), ARCH_FAMILIES.get(p.arch), p.arch) for p in points]


@dataclass
class FitResult:
    family: str
    kernel: str
    dtype: str
    label: str
    formula: str
    points: int
    exact: int
    verdict_errors: int
    max_error: int
    archs: tuple[str, ...] = ()
    misses: list = field(default_factory=list)  # a few (point, predicted) that do not match

    @property
    def rate(self) -> float:
        return self.exact / self.points if self.points else 0.0

    @property
    def status(self) -> str:
        return "calibrated" if self.points and self.rate >= CALIBRATED_RATE and not self.verdict_errors \
            else "uncalibrated"

    def summary(self) -> dict:
        return {"points": self.points, "exact": self.exact, "exact_rate": round(self.rate, 4),
                "verdict_errors": self.verdict_errors, "max_error": self.max_error, "form": self.label,
                "archs": list(self.archs)}


def _fast_gemm_search(forms: Sequence[GemmForm], variables: Sequence[Mapping], truth: Sequence[int],
                      lims: Sequence[Sequence[int]]):
    """The best :class:`GemmForm` of ``forms`` by (misses, verdict errors, formula length), all
    candidates evaluated at once with numpy; None without numpy."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return None
    parts = [_gemm_parts(v) for v in variables]
    n = len(parts)
    t = np.asarray(truth, dtype=np.float64)
    A = np.array([p["A"] for p in parts], dtype=np.float64)
    B = np.array([p["B"] for p in parts], dtype=np.float64)
    s1mask = np.array([p["S1"] for p in parts], dtype=bool)

    def operand(ring, thr, size, key):
        r = np.array([p["rings"][ring] for p in parts], dtype=np.float64)
        flag = [p[key][thr] for p in parts]
        if ASYNC_MIN[thr] == -1:
            return np.zeros(n)
        if ASYNC_MIN[thr] is None:
            return r * size
        f = np.array([bool(x) for x in flag])
        return np.where(f, r * size, size)

    ring_names, thr_names = list(RINGS), list(ASYNC_MIN)
    s1_names = list(S1_MODES)
    extra_sets = sorted({f.extras for f in forms}, key=lambda x: (len(x), x))
    epi_names = list(EPILOGUES)
    wanted = {(f.ring_a, f.async_a, f.ring_b, f.async_b, f.s1, f.extras, f.epilogue) for f in forms}
    ex_vals = {name: np.array([p["extras"][name] for p in parts], dtype=np.float64) for name in LOOP_EXTRAS}
    EX = np.stack([sum((ex_vals[x] for x in xs), np.zeros(n)) for xs in extra_sets])  # sets x n
    EPI = np.stack([np.array([p["epi"][e] for p in parts], dtype=np.float64) for e in epi_names])  # epi x n
    s1v = {m: np.array([(p["s1"][m] if p["s1"][m] is not None else 0) for p in parts], dtype=np.float64)
           for m in s1_names}
    all_lims = sorted({x for lim in lims for x in lim})
    lim_mask = np.array([[x in lim for x in all_lims] for lim in lims], dtype=bool) if all_lims else None
    ops_a = {(r, th): operand(r, th, A, "async_a") for r in ring_names for th in thr_names}
    ops_b = {(r, th): operand(r, th, B, "async_b") for r in ring_names for th in thr_names}
    best_key, best_forms = None, []
    for (ra, ta), oa in ops_a.items():
        for (rb, tb), ob in ops_b.items():
            base = oa + ob
            for m in s1_names:
                loop0 = base if m == "sum" else np.where(s1mask, s1v[m], base)
                loop = loop0[None, :] + EX  # sets x n
                pred = np.rint(np.maximum(loop[None, :, :], EPI[:, None, :]))  # epi x sets x n
                miss = (pred != t).sum(axis=2)
                verdict = np.zeros(miss.shape, dtype=np.int64)
                if lim_mask is not None:
                    for j, x in enumerate(all_lims):
                        verdict += (((pred > x) != (t > x)) & lim_mask[:, j]).sum(axis=2)
                for ei, e in enumerate(epi_names):
                    for si, xs in enumerate(extra_sets):
                        key = (int(miss[ei, si]), int(verdict[ei, si]))
                        if best_key is not None and key > best_key:
                            continue
                        cand = (ra, ta, rb, tb, m, xs, e)
                        if cand not in wanted:
                            continue
                        if best_key is None or key < best_key:
                            best_key, best_forms = key, [cand]
                        else:
                            best_forms.append(cand)
    if best_key is None:
        return None
    forms_ = [GemmForm(ra, rb, ta, tb, m, xs, e) for ra, ta, rb, tb, m, xs, e in best_forms]
    return min(forms_, key=lambda f: (len(f.text()), f.label))


def fit_group(points: Sequence[Point], candidates: Sequence, limits: Mapping[str, Sequence[int]],
              epilogue: Mapping | None = None) -> FitResult:
    """Choose the candidate matching most points exactly (then fewest verdict errors against the
    device limits of each point's arch, then the shortest formula). ``candidates``: :class:`GemmForm`
    instances (searched on precomputed components) or ``(label, formula)`` pairs."""
    from .analytic import VARIABLES

    pts = [p for p in points if p.shared is not None]
    if not pts:
        raise ValueError("no compiled points to fit")
    variables = point_variables(pts, epilogue)
    truth = [p.shared for p in pts]
    lims = [tuple(limits.get(p.arch, ())) for p in pts]
    best = None
    best_key = None
    parts = None
    gemm = [c for c in candidates if isinstance(c, GemmForm)]
    if gemm and len(gemm) == len(candidates):
        found = _fast_gemm_search(gemm, variables, truth, lims)
        if found is not None:
            candidates = [found]
    for cand in candidates:
        if isinstance(cand, GemmForm):
            if parts is None:
                parts = [_gemm_parts(v) for v in variables]
            fn = (lambda form: (lambda i: _gemm_predict(form, parts[i])))(cand)
            label, text = cand.label, None
        else:
            label, text = cand
            f = compile_formula(text, VARIABLES)
            fn = (lambda f: (lambda i: f(**variables[i])))(f)
        give_up = len(pts) if best_key is None else best_key[0]
        misses = verdict = 0
        for i in range(len(pts)):
            pred = int(round(fn(i)))
            t = truth[i]
            if pred != t:
                misses += 1
                if misses > give_up:
                    break
                verdict += sum(1 for x in lims[i] if (pred > x) != (t > x))
        else:
            text_len = len(text) if text is not None else len(cand.text())
            key = (misses, verdict, text_len)
            if best_key is None or key < best_key:
                best_key, best = key, (label, text if text is not None else cand.text())
    assert best is not None
    label, text = best
    fn = compile_formula(text, VARIABLES)
    exact = verdict = worst = 0
    miss_list = []
    for p, v, lim in zip(pts, variables, lims):
        pred = int(round(fn(**v)))
        if pred == p.shared:
            exact += 1
            continue
        worst = max(worst, abs(pred - p.shared))
        verdict += sum(1 for x in lim if (pred > x) != (p.shared > x))
        if len(miss_list) < 12:
            miss_list.append((p, pred))
    if best_key is not None and best_key[0] != len(pts) - exact:  # pragma: no cover - a library bug
        raise AssertionError(f"form text and search disagree for {label}: {text}")
    first = pts[0]
    return FitResult(ARCH_FAMILIES.get(first.arch, "?"), first.path.kernel, form_dtype(first.path), label, text,
                     len(pts), exact, verdict, worst, tuple(sorted({p.arch for p in pts})), miss_list)


def form_dtype(path: Path) -> str:
    """The model's dtype key of a path's form."""
    return registry.get(path.kernel).form_dtype(path)


# The "sums" library (MLA decode's, ``family.json``'s ``calibration.library``): a form is, per
# num_stages regime, a sum of candidate tiles (``terms``: name -> formula), split at BLOCK_H 64 on
# the arch families (``split_bm_families``) whose MMA reads shared memory asynchronously from there.


def sums_library(kernel: str) -> Mapping:
    """``{"terms": {...}, "regimes": {...}, "split_bm_families": [...]}`` of a "sums" family."""
    lib = registry.get(kernel).form_library
    if lib.get("kind") != "sums":
        raise ValueError(f"kernel family {kernel} has no sums library")
    return lib


def term_sets(terms: Mapping[str, str], max_terms: int = 7) -> list[tuple[str, ...]]:
    """Subsets of ``terms`` (the candidate sums), smallest first."""
    names = list(terms)
    out: list[tuple[str, ...]] = []
    for k in range(1, max_terms + 1):
        out.extend(itertools.combinations(names, k))
    return out


def term_sum(terms: Mapping[str, str], chosen: Sequence[str]) -> str:
    return " + ".join(terms[t] for t in chosen) if chosen else "0"


def _best_subset(sets: Sequence[tuple[int, ...]], values: Sequence[Sequence[float]], truth: Sequence[int],
                 lims: Sequence[Sequence[int]]) -> tuple[int, ...] | None:
    """The subset of terms whose sums match ``truth`` most often (ties: fewest verdict errors,
    then fewest terms). numpy evaluates all subsets at once when it is installed."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with torch and triton's test extra
        np = None
    if np is not None:
        vals = np.asarray(values, dtype=np.float64)  # points x terms
        t = np.asarray(truth, dtype=np.float64)
        best_key, best = None, None
        chunk = 20000
        all_lims = sorted({x for lim in lims for x in lim})
        lim_mask = np.array([[x in lim for x in all_lims] for lim in lims], dtype=bool) if all_lims else None
        for start in range(0, len(sets), chunk):
            part = sets[start:start + chunk]
            m = np.zeros((len(part), vals.shape[1]), dtype=np.float64)
            for r, ts in enumerate(part):
                m[r, list(ts)] = 1.0
            pred = np.rint(m @ vals.T)  # subsets x points
            miss = (pred != t).sum(axis=1)
            if lim_mask is not None:
                verdict = np.zeros(len(part), dtype=np.int64)
                for j, x in enumerate(all_lims):
                    wrong = ((pred > x) != (t > x)) & lim_mask[:, j]
                    verdict += wrong.sum(axis=1)
            else:
                verdict = np.zeros(len(part), dtype=np.int64)
            sizes = m.sum(axis=1)
            order = np.lexsort((sizes, verdict, miss))
            r = int(order[0])
            key = (int(miss[r]), int(verdict[r]), int(sizes[r]))
            if best_key is None or key < best_key:
                best_key, best = key, part[r]
        return best
    best_key, best = None, None
    for ts in sets:
        misses = verdict = 0
        give_up = len(truth) if best_key is None else best_key[0]
        for vals_, t_, lim in zip(values, truth, lims):
            pred = int(round(sum(vals_[j] for j in ts)))
            if pred != t_:
                misses += 1
                if misses > give_up:
                    break
                verdict += sum(1 for x in lim if (pred > x) != (t_ > x))
        else:
            key = (misses, verdict, len(ts))
            if best_key is None or key < best_key:
                best_key, best = key, ts
    return best


def fit_sums(points: Sequence[Point], limits: Mapping[str, Sequence[int]], max_terms: int = 7,
             split_bm: bool | None = None) -> FitResult:
    """One sum of the family's terms per regime (MLA decode: num_stages 1, 2, 3+; and BLOCK_H
    below / from 64 where the arch family's MMA changes there), each chosen to match the most
    points of its regime (ties: fewest verdict errors, then fewest terms), assembled into one
    conditional formula."""
    from .analytic import VARIABLES

    pts = [p for p in points if p.shared is not None]
    lib = sums_library(pts[0].path.kernel)
    terms: Mapping[str, str] = lib["terms"]
    regimes: Mapping[str, str] = lib["regimes"]
    if split_bm is None:
        split_bm = ARCH_FAMILIES.get(pts[0].arch) in set(lib.get("split_bm_families", ()))
    variables = point_variables(pts)
    term_fns = {name: compile_formula(text, VARIABLES) for name, text in terms.items()}
    names = list(terms)
    sets = [tuple(names.index(t) for t in ts) for ts in term_sets(terms, max_terms)]
    bm_parts = (("BM < 64", "small"), ("BM >= 64", "large")) if split_bm else (("True", ""),)
    pieces: list[tuple[str, str, tuple[str, ...]]] = []
    for bm_cond, bm_name in bm_parts:
        for regime, cond in regimes.items():
            test = compile_formula(f"({cond}) and ({bm_cond})", VARIABLES)
            idx = [i for i, v in enumerate(variables) if test(**v)]
            chosen: tuple[str, ...] = ()
            if idx:
                values = [[term_fns[n](**variables[i]) for n in names] for i in idx]
                truth = [pts[i].shared for i in idx]
                lims = [tuple(limits.get(pts[i].arch, ())) for i in idx]
                best = _best_subset(sets, values, truth, lims)
                if best is not None:
                    chosen = tuple(names[j] for j in best)
            pieces.append((bm_cond, regime, chosen))
    parts = []
    conds = list(regimes.values())
    for bm_cond, _ in bm_parts:
        mine = {r: c for b, r, c in pieces if b == bm_cond}
        sums = [term_sum(terms, mine[r]) for r in regimes]
        chain = sums[-1]
        for cond, value in zip(reversed(conds[:-1]), reversed(sums[:-1])):
            chain = f"{value} if {cond} else {chain}"
        parts.append((bm_cond, f"({chain})"))
    text = parts[0][1] if len(parts) == 1 else f"({parts[0][1]} if {parts[0][0]} else {parts[1][1]})"
    label = " | ".join(f"{(b + ' ') if split_bm else ''}{r}: {'+'.join(c) or '-'}" for b, r, c in pieces)
    return fit_group(pts, [(label, text)], limits)


# ------------------------------------------------------------------------------------------------
# points from real tuning tables (the proof's second design)


def spec_point(spec: KernelSpec, arch: str) -> Point | None:
    """The :class:`Point` of a spec a table launches (None for specs the point format cannot
    express: its family's :meth:`~tilefit.kernels.KernelFamily.spec_point`)."""
    found = _spec_path(spec)
    if found is None:
        return None
    return Point(_path_of(found[0]), found[1], spec.num_warps, spec.num_stages, arch)


def spec_point_name(spec: KernelSpec) -> tuple[str, tuple[int, ...]] | None:
    """``(path name, tile)`` of :func:`spec_point` (which does not depend on the arch), without
    building the point: the engine model's key of a spec's calibration point."""
    found = _spec_path(spec)
    if found is None:
        return None
    fields_, tile = found
    name = _PATH_NAMES.get(fields_)
    if name is None:
        name = _PATH_NAMES[fields_] = _path_of(fields_).name
    return name, tile


def _spec_path(spec: KernelSpec) -> tuple[tuple, tuple[int, ...]] | None:
    """``(the fields of its Path, tile)`` of a spec's point, or None (see :func:`spec_point`)."""
    found = registry.get(spec.kernel).spec_point(spec)
    if found is None:
        return None
    path, tile = found
    bs = tuple(path["block_shape"]) if path.get("block_shape") else None
    return ((path["kernel"], path["dtype"], path.get("quant", "none"), bs, path.get("kv_dtype"),
             bool(path.get("swap_ab")), path.get("tma")), tuple(tile))


def _path_of(fields_: tuple) -> Path:
    return Path(*fields_)


_PATH_NAMES: dict[tuple, str] = {}  # the fields of a Path -> its name (see spec_point_name)


def table_points(roots: Sequence[str], archs: Sequence[str], per_arch: int, seed: int = 3) -> list[Point]:
    """Distinct kernels the tuning tables under ``roots`` launch, per arch (``per_arch`` of them,
    sampled with ``seed``; CUDA tables for CUDA archs, ROCm tables for AMD archs)."""
    from tilefit.discovery import discover
    from tilefit.tables import read_table
    from tilefit.variants import kernel_variants

    from ..kernels import launch_plan

    found = discover(list(roots))
    by_arch: dict[str, dict[tuple, Point]] = {a: {} for a in archs}
    for path, meta in found.files:
        if registry.table(meta.family) is None:
            continue
        try:
            table = read_table(path, meta=meta)
        except Exception:  # noqa: BLE001 - unreadable tables are not points
            continue
        if not isinstance(table.value, dict):
            continue
        amd_table = "AMD" in os.path.basename(path) or "MI3" in os.path.basename(path)
        for _key, entry in table.entries():
            for arch in archs:
                vendor = "AMD" if arch.startswith("gfx") else "NVIDIA"
                if (vendor == "AMD") != amd_table:
                    continue
                for variant in kernel_variants(meta, entry, arch, vendor, meta.engine):
                    try:
                        launch_plan(variant.spec)
                    except ValueError:  # a dtype path our kernels do not run (block GEMM per channel)
                        continue
                    pt = spec_point(variant.spec, arch)
                    if pt is None or not pt.path.runs_on(arch) or pt.num_warps not in (1, 2, 4, 8, 16):
                        continue
                    if ring_lower_bound(pt.path, pt.tile, pt.num_stages) > DOMAIN_BYTES:
                        continue
                    by_arch[arch].setdefault(_ident(pt), pt)
    out: list[Point] = []
    for arch in archs:
        pts = sorted(by_arch[arch].values(), key=lambda p: repr(_ident(p)))
        random.Random(f"{seed}:{arch}").shuffle(pts)
        out.extend(pts[:per_arch])
    return out


# ------------------------------------------------------------------------------------------------
# the model file


def group_points(points: Iterable[Point]) -> dict[tuple[str, str, str], list[Point]]:
    groups: dict[tuple[str, str, str], list[Point]] = {}
    for p in points:
        if p.shared is None:
            continue
        groups.setdefault((p.family, p.path.kernel, form_dtype(p.path)), []).append(p)
    return groups


def fit_all(points: Sequence[Point], epilogue: Mapping, limits: Mapping[str, Sequence[int]],
            progress: Callable[[str], None] | None = None) -> list[FitResult]:
    library = gemm_library(max_extras=3)
    results = []
    for key, pts in sorted(group_points(points).items()):
        if progress:
            progress(f"fitting {'/'.join(key)} on {len(pts)} points")
        if registry.get(key[1]).form_library.get("kind") == "sums":
            results.append(fit_sums(pts, limits))
        else:
            results.append(fit_group(pts, library, limits, epilogue))
    return results


def build_table(results: Sequence[FitResult], epilogue: Mapping, *, triton_version: str, points: int,
                seconds: float, command: str, date: str | None = None) -> dict:
    """The model file (``triton-<major>.<minor>.json``) from the chosen forms."""
    formulas: dict[str, dict] = {}
    form_status: dict[str, dict] = {}
    fits: dict[str, dict] = {}
    for r in results:
        formulas.setdefault(r.family, {}).setdefault(r.kernel, {})[r.dtype] = r.formula
        form_status.setdefault(r.family, {}).setdefault(r.kernel, {})[r.dtype] = r.status
        fits.setdefault(r.family, {}).setdefault(r.kernel, {})[r.dtype] = r.summary()
    notes: dict[str, str] = {}
    for family, kernels in formulas.items():
        statuses = [st for k in form_status[family].values() for st in k.values()]
        ok = all(st == "calibrated" for st in statuses)
        kernels["status"] = "calibrated" if ok else "uncalibrated"
        if not ok:
            bad = [f"{k}/{d} ({fits[family][k][d]['exact_rate']:.1%} exact)"
                   for k, per in form_status[family].items() for d, st in per.items() if st != "calibrated"]
            notes[family] = ("forms below 99% exact match (estimates re-checked exactly when Triton is "
                             "installed, else reported as EST001): " + ", ".join(sorted(bad)))
    families = {}
    for family in formulas:
        mine = [r for r in results if r.family == family]
        pts = sum(r.points for r in mine)
        families[family] = {"forms": len(mine), "calibrated_forms": sum(r.status == "calibrated" for r in mine),
                            "points": pts, "exact_rate": round(sum(r.exact for r in mine) / pts, 4) if pts else 0.0,
                            "status": formulas[family]["status"]}
    inherits = {a: f for a, f in ARCH_FAMILIES.items()
                if not any(a in archs for archs in CALIBRATION_ARCHS.values())}
    total = sum(r.points for r in results)
    exact = sum(r.exact for r in results)
    return {
        "format": 1,
        "triton_version": versions.major_minor(triton_version),
        "provenance": {
            "method": "tilefit calibrate smem: exact ahead-of-time compiles of the reference kernels (stopped at "
                      "shared-memory allocation), one form per (arch family, kernel, dtype path) chosen from a "
                      "library of candidate closed forms by exact matches, then verdict errors, then length",
            "triton": triton_version,
            "date": date or datetime.date.today().isoformat(),
            "command": command,
            "points": points,
            "fit_points": total,
            "exact_match_rate": round(exact / total, 4) if total else 0.0,
            "seconds": round(seconds, 1),
            "families": families,
            "calibrated_archs": {f: list(a) for f, a in CALIBRATION_ARCHS.items()},
            "inherited_archs": inherits,
            "notes": notes,
        },
        "arch_families": dict(ARCH_FAMILIES),
        "operand_bytes": {k: dict(v) for k, v in OPERAND_BYTES.items()},
        "formulas": formulas,
        "form_status": form_status,
        "fits": fits,
        "epilogue": dict(epilogue),
    }


def write_table(doc: Mapping, path: str | FsPath) -> None:
    """Indented JSON with the epilogue tables' innermost lists on one line."""
    text = json.dumps(doc, indent=1)
    # fold lists of numbers onto one line each
    text = re.sub(r"\[\s+([-0-9.,\s]+?)\s+\]", lambda m: "[" + ",".join(x.strip() for x in m.group(1).split(",")) + "]",
                  text)
    write_atomic(path, text + "\n")


def model_path(triton_version: str) -> FsPath:
    """The shared model file of a Triton release (arch families, operand bytes, epilogue tables,
    provenance); each kernel family's forms live in its folder (:func:`kernel_model_path`)."""
    return (FsPath(__file__).resolve().parent.parent / "data" / "smem_model"
            / f"triton-{versions.major_minor(triton_version)}.json")


class CalibrationError(ValueError):
    """The model cannot be written where asked (exit code 2)."""


def user_model_path(triton_version: str) -> FsPath:
    """Where ``tilefit calibrate smem`` writes the model of ``triton_version`` by default: one whole
    model file in the user data folder (:mod:`tilefit.userdata`), which the loader reads before the
    bundled model of that release."""
    from ..userdata import ENV_VAR, SMEM_MODEL, model_folder

    folder = model_folder(SMEM_MODEL)
    if folder is None:
        raise CalibrationError(f"the user data folder is turned off (${ENV_VAR} is empty); pass --out FILE")
    return folder / f"triton-{versions.major_minor(triton_version)}.json"


def _in_package(folder) -> bool:
    """Whether a kernel family's folder lies inside the installed tilefit package."""
    package = FsPath(__file__).resolve().parent.parent
    try:
        FsPath(folder).resolve().relative_to(package)
    except ValueError:
        return False
    return True


def writes_user_folder(kernels: Sequence[str] | None) -> bool:
    """Whether a default calibration of ``kernels`` (None: all) writes to the user data folder
    (families registered from outside the package keep their forms in their own folders)."""
    return kernels is None or any(_in_package(registry.get(k).folder) for k in kernels)


def _over_bundled(table: Mapping, kernels: Sequence[str]) -> dict:
    """A calibration of some kernel families laid over the bundled model of its release (the
    other families keep their bundled forms), as one whole model."""
    from .analytic import ModelError, model_table

    try:
        base = model_table(versions.major_minor(str(table["triton_version"])))
    except ModelError:
        return dict(table)
    for section in ("formulas", "form_status", "fits"):
        for family, per in (table.get(section) or {}).items():
            slot = base.setdefault(section, {}).setdefault(family, {})
            slot.update({k: v for k, v in per.items() if k in kernels})
    base["provenance"] = table.get("provenance", base.get("provenance"))
    return base


def kernel_model_path(kernel: str, triton_version: str) -> FsPath:
    """``<family folder>/smem/triton-<major>.<minor>.json``: one kernel family's forms."""
    from .analytic import kernel_forms_path

    return kernel_forms_path(registry.get(kernel), versions.major_minor(triton_version))


def write_model(table: Mapping, *, shared: bool = True) -> list[FsPath]:
    """Write a model table the way the package keeps it: the shared file (``shared``) and one
    forms file per kernel family in the table. Returns the files written."""
    from .analytic import forget_models, split_model

    shared_doc, kernel_docs = split_model(table)
    version = str(table["triton_version"])
    written = []
    if shared:
        path = model_path(version)
        write_table(shared_doc, path)
        written.append(path)
    for kernel, doc in kernel_docs.items():
        path = kernel_model_path(kernel, version)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_table(doc, path)
        written.append(path)
    forget_models()
    return written


@dataclass
class Calibration:
    table: dict
    results: list[FitResult]
    points: list[Point]
    epilogue_points: list[Point]
    path: FsPath | None = None
    written: list[FsPath] = field(default_factory=list)


def calibrate_smem(*, jobs: int | None = None, scale: float = 1.0, families: Iterable[str] | None = None,
                   kernels: Iterable[str] | None = None, cache_dir=None, out: str | FsPath | None = None,
                   write: bool = True, command: str = "", log: Callable[[str], None] | None = None,
                   package: bool = False) -> Calibration:
    """Compile the epilogue tables and the fit grid, fit every form, and write the model for the
    installed Triton: ``out`` (one file); with ``package``, the bundled data (the shared file
    ``tilefit/data/smem_model/triton-<major>.<minor>.json`` and each kernel family's
    ``smem/triton-<major>.<minor>.json``); else one whole model in the user data folder
    (:func:`user_model_path`), read before the bundled one from then on.

    ``kernels``: calibrate only these kernel families (a new family, say): their forms files are
    written, the shared file is left as it is, and its epilogue tables are reused when the
    installed Triton's model has them (else they are measured)."""
    import time

    from .exact import _triton

    _triton()  # TritonUnavailable early, with its message
    version = versions.installed_triton() or "unknown"
    log = log or (lambda msg: None)
    t0 = time.perf_counter()
    fams = list(families) if families is not None else list(CALIBRATION_ARCHS)
    kernel_list = list(kernels) if kernels is not None else None
    paths = family_paths(kernel_list) if kernel_list is not None else None
    grid = fit_grid(fams, paths=paths, scale=scale)

    def progress(what):
        last = [0.0]

        def cb(done, total):
            now = time.perf_counter()
            if done == total or now - last[0] > 10:
                last[0] = now
                log(f"{what}: {done}/{total} compiled ({now - t0:.0f} s)")
        return cb

    shipped = model_path(version)
    epi_done: list[Point] = []
    if kernel_list is not None and shipped.is_file():
        epilogue = json.loads(shipped.read_text(encoding="utf-8")).get("epilogue") or {}
        log(f"epilogue tables from {shipped.name}")
    else:
        epi_pts = [p for f in fams for a in CALIBRATION_ARCHS[f] for p in epilogue_points(a)]
        epi_done = collect(epi_pts, jobs=jobs, cache_dir=cache_dir, progress=progress("epilogue tables"))
        epilogue = epilogue_doc(epi_done)
    done = collect(grid, jobs=jobs, cache_dir=cache_dir, progress=progress("fit grid"))
    failed = sum(1 for p in done if p.shared is None)
    log(f"{len(done) - failed} points compiled, {failed} failed to compile (left out)")
    results = fit_all(done, epilogue, device_limits(), progress=log)
    table = build_table(results, epilogue, triton_version=version, points=len(done) + len(epi_done),
                        seconds=time.perf_counter() - t0, command=command)
    path = None
    written: list[FsPath] = []
    if write:
        try:
            if out:
                path = FsPath(out)
                path.parent.mkdir(parents=True, exist_ok=True)
                write_table(table, path)
                written = [path]
            elif package:
                written = write_model(table, shared=kernel_list is None)
                path = written[0] if written else None
            else:
                from .analytic import forget_models, split_model

                # a family registered from outside the package keeps its forms in its own folder
                # (the user's); the built-in ones go to the user data folder with the rest
                outside = [k for k in (kernel_list or []) if not _in_package(registry.get(k).folder)]
                if outside:
                    _shared, docs = split_model(table)
                    for kernel in outside:
                        if kernel in docs:
                            kpath = kernel_model_path(kernel, version)
                            kpath.parent.mkdir(parents=True, exist_ok=True)
                            write_table(docs[kernel], kpath)
                            written.append(kpath)
                inside = [k for k in (kernel_list or []) if k not in outside]
                if kernel_list is None or inside:
                    upath = user_model_path(version)
                    upath.parent.mkdir(parents=True, exist_ok=True)
                    write_table(_over_bundled(table, inside) if kernel_list is not None else table, upath)
                    written.insert(0, upath)
                path = written[0] if written else None
                forget_models()
        except OSError as exc:
            raise CalibrationError(f"cannot write the model: {exc.strerror or exc}: {exc.filename or ''}") from None
    return Calibration(table, results, done, epi_done, path, written)


def proof_points(*, jobs: int | None = None, scale: float = 1.0, corpus: Sequence[str] = (), per_arch: int = 100,
                 cache_dir=None, archs: Mapping[str, Sequence[str]] | None = None,
                 log: Callable[[str], None] | None = None) -> list[Point]:
    """Compile the proof set: the seeded random design of :func:`proof_grid` (without any fit-grid
    point) plus up to ``per_arch`` distinct kernels per arch from real tuning tables."""
    archs = archs or PROOF_ARCHS
    fit = {_ident(p) for p in fit_grid()}
    pts = proof_grid(scale=scale, archs=archs, exclude=fit_grid())
    if corpus:
        flat = [a for v in archs.values() for a in v]
        seen = {_ident(p) for p in pts} | fit
        pts += [p for p in table_points(corpus, flat, per_arch) if _ident(p) not in seen]
    if log:
        log(f"proof set: {len(pts)} points")
    return collect(pts, jobs=jobs, cache_dir=cache_dir)
