"""``tilefit calibrate smem --engine``: the shared-memory model of the engines' own kernels.

Our reference kernels are not the engines' kernels (vLLM's MLA decode needs 102400 B where ours
needs 120832), so the figures tilefit prints come from compiles of the engine's kernel: taken
from the engine's release by AST (:mod:`tilefit.smem.engine_kernels`, the wheel fetched with pip
and read from its zip), launched as the engine's launcher launches it (``kernels/<family>/
engines.py``), compiled ahead of time for every arch. What is stored is data only -- closed
forms, the compiled points and their provenance -- in each kernel family's folder::

    kernels/<family>/smem/<engine>-<version>/triton-<X.Y>.json     forms, proofs, failures, provenance
    kernels/<family>/smem/<engine>-<version>/points-triton-<X.Y>.json   every compiled point

How a form is chosen, per (arch family, kernel, dtype path):

1. **Held-out points first.** The proof design is compiled first: the distinct kernels the
   engine's own tuning tables launch on each arch (``--corpus``: each file's own device and the
   consumer cards), plus a seeded random grid (seed 2) over the family's tile space.
2. **The reference kernel's form, if it holds.** Where the form calibrated on our reference
   kernel (the shipped ``triton-<X.Y>`` model) matches every proof point of the engine's kernel
   exactly, it is the engine's form: it was not chosen on any of these points, so all of them
   are held out.
3. **Else a fit on the engine's own points.** A stratified fit design (seed 1, disjoint from the
   proof design) is compiled and the candidate library searched on it (``calibrate.fit_group`` /
   ``fit_sums``: most exact matches, then fewest verdict errors, then the shortest form); the
   chosen form is then checked on the proof points, which it never saw.

4. **A second round where a form is not proven** (:func:`second_round`): the group is fitted
   again on every point the first round compiled for it (its first held-out points become fit
   points) and proven on a fresh held-out design -- the next real-table kernels and a grid drawn
   with seed 3 -- that no choice saw; a miss on any compiled point (the fit points too) leaves the
   arch unproven.

A form is **proven** on an arch when it matches every proof point of that arch exactly and no
verdict against a device limit differs. Compile failures are facts of the same calibration: a
point that does not compile is stored with the compiler's words, and per (arch, dtype path) the
simplest threshold rule that separates the failing points from the compiling ones
(:func:`failure_rule`) is stored when one exists.

**Other Triton releases** (:func:`probe_version`): a probe set drawn from the calibrated
release's proof points is compiled with the installed Triton; a group whose probe gives the
same bytes (and the same failures) reuses the calibrated forms, which the file records with the
probe's figures (``reused``); a group that differs is calibrated afresh for this release.

Nothing here imports triton at module level.
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Callable, Iterable, Mapping, Sequence

from .. import versions
from ..atomicfile import write_atomic
from ..kernels import registry
from . import calibrate as cal
from . import engine_files as files
from .calibrate import ARCH_FAMILIES, Path, Point

FORMAT = 1

# The archs the engine calibration proves forms on, by arch family (the first one also carries
# the fit design when a fit is needed). gfx1250 (cdna5) is calibrated with Triton 3.9 only, for
# the kernels the engines run there (SGLang's _w8a8_block_fp8_matmul_gfx1250, one stage).
ENGINE_ARCHS: Mapping[str, tuple[str, ...]] = {
    "mma_v2": ("sm_89", "sm_80", "sm_86", "sm_120", "sm_87"),
    "mma_v2_sm121": ("sm_121",),
    "wgmma": ("sm_90",),
    "tcgen05": ("sm_100", "sm_110"),
    "tcgen05_sm103": ("sm_103",),
    "cdna3": ("gfx942", "gfx90a"),
    "cdna4": ("gfx950",),
    "rdna": ("gfx1100", "gfx1201", "gfx1151"),
    "cdna5": ("gfx1250",),
}
ALL_ARCHS = tuple(a for archs in ENGINE_ARCHS.values() for a in archs)

# points per (path, arch): real-table kernels (at most), grid points of the proof design, fit
# design points for the first arch of a family / for the others
TABLE_PER = 12
GRID_PER = 4
FIT_PER = {"main": 16, "other": 4}


def compile_release() -> str:
    """The Triton release the compiles are made with (the installed one, or that of the interpreter
    ``--triton-python`` names: :mod:`tilefit.smem.interpreter`); TritonUnavailable when this process
    has no Triton to load the engine's kernels with or the compiles' Triton is older than 3.4."""
    from .exact import MIN_TRITON, TritonUnavailable, _triton
    from .interpreter import compile_triton_version

    _triton()
    found = compile_triton_version() or "unknown"
    if versions.release(found, 2) < MIN_TRITON:
        raise TritonUnavailable(f"the engine calibration needs Triton >= 3.4 (the compiles' Triton is {found})")
    return found


def design_sizes(scale: float = 1.0) -> dict[str, int]:
    """Points per (path, arch) of each design at ``scale``: real-table kernels, proof grid, fit
    design on an arch family's first arch and on the others (at least 1, 2 on a first arch)."""
    return {"table": max(1, round(TABLE_PER * scale)), "grid": max(1, round(GRID_PER * scale)),
            "fit_main": max(2, round(FIT_PER["main"] * scale)), "fit_other": max(1, round(FIT_PER["other"] * scale))}


# ------------------------------------------------------------------------------------------------
# what the engine launches


def engine_paths(engine: str, kernel: str) -> list[Path]:
    """The dtype paths the engine launches ``kernel`` on: the family's calibration paths that the
    engine's launcher accepts, plus the engine's own (SGLang's TMA launches of the fused MoE)."""
    fam = registry.get(kernel)
    out = []
    for p in fam.calibration_paths():
        path = Path.from_json(p)
        out.append(path)
    if kernel == "fused_moe" and engine == "sglang":
        out += [Path(kernel, "bf16", tma="b"), Path(kernel, "bf16", tma="ab"),
                Path(kernel, "fp8_w8a8", "block", (128, 128), tma="b"),
                Path(kernel, "fp8_w8a8", "block", (128, 128), tma="ab")]
    keep = []
    for path in out:
        spec = _probe_spec(path)
        try:
            fam.engine_launch(engine, spec, "sm_89" if not path.swap_ab else "sm_90")
        except ValueError:
            continue
        keep.append(path)
    return keep


def _probe_spec(path: Path):
    fam = registry.get(path.kernel)
    cols = fam.point_columns
    tile = (64, 64, 64) if cols[:3] == ("BM", "BN", "BK") else (32, 16, 576, 512)
    return fam.point_spec(path, tile, 4, 2)


def runs_on(engine: str, path: Path, arch: str) -> bool:
    """Whether ``engine`` launches ``path``'s kernel on ``arch``: the dtype's hardware support, the
    swap (sm_90 only), TMA (CUDA only), and the engines' MLA decode, which runs the Triton kernel
    only where no other backend takes it (the engine profile's ``triton_archs``)."""
    if not path.runs_on(arch):
        return False
    if path.tma and not arch.startswith("sm_"):
        return False
    if path.tma and arch.startswith("sm_") and int("".join(c for c in arch[3:] if c.isdigit())) < 90:
        # host tensor descriptors lower to TMA on sm_90+; SGLang's tuned TMA tables are Hopper/Blackwell
        return False
    if path.kernel == "mla_decode":
        from ..serving.profiles import find_profile

        try:
            archs = find_profile(engine)[0].mla.get("triton_archs")
        except Exception:  # noqa: BLE001 - no profile: every arch
            archs = None
        if archs and arch not in archs and not arch.startswith("gfx"):
            return False
    return True


# SGLang launches its fused MoE kernel through host tensor descriptors (USE_TMA) wherever Triton
# has TensorDescriptor (support_tensor_descriptor() is an import check, not an arch check); on the
# mma.sync archs without a TMA unit Triton lowers the descriptors to pointer loads, so the kernel
# is another one there, with forms of each arch's own (``engine_candidates`` keyed by the arch)
TMA_WITHOUT_UNIT = ("sm_80", "sm_86", "sm_87", "sm_89")


def runs_on_arch(engine: str, path: Path, arch: str) -> bool:
    """:func:`runs_on`, plus SGLang's TMA launches on the archs without a TMA unit
    (:data:`TMA_WITHOUT_UNIT`): the groups of an arch's own forms, which the arch family's
    calibration leaves out."""
    if path.tma and engine == "sglang" and arch in TMA_WITHOUT_UNIT and path.kernel == "fused_moe":
        return path.runs_on(arch)
    return runs_on(engine, path, arch)


def in_group(p: Point, key: tuple[str, str, str]) -> bool:
    """Whether ``p`` belongs to the group ``key``: an arch family's (``mma_v2``), or an arch's own
    (``sm_89``: the form the model reads for that arch before its family's)."""
    if key[0] in ARCH_FAMILIES:
        return (p.arch, p.path.kernel, cal.form_dtype(p.path)) == key
    return group_key(p) == key and not (p.path.tma and p.arch in TMA_WITHOUT_UNIT)


# ------------------------------------------------------------------------------------------------
# the points the corpus touches


def table_points(items: Iterable, engine: str, kernel: str) -> dict[tuple[Path, str], list[Point]]:
    """The points of the touched ``(spec, arch)`` items that are ``engine``'s ``kernel``, by (path, arch)."""
    out: dict[tuple[Path, str], dict] = {}
    for spec, arch in items:
        if spec.kernel != kernel or spec.engine != engine or arch not in ALL_ARCHS:
            continue
        pt = cal.spec_point(spec.reference, arch)
        if pt is None or pt.num_warps not in (1, 2, 4, 8, 16):
            continue
        if cal.ring_lower_bound(pt.path, pt.tile, pt.num_stages) > cal.DOMAIN_BYTES:
            continue
        out.setdefault((pt.path, arch), {})[cal._ident(pt)] = pt
    return {k: sorted(v.values(), key=lambda p: repr(cal._ident(p))) for k, v in out.items()}


def launch_points(engine: str, kernel: str, archs: Sequence[str]) -> dict[tuple[Path, str], list[Point]]:
    """Kernels the engines launch with parameters fixed in code (no table): MLA decode stage 1 with
    the engines' tile (BLOCK_N 32, BLOCK_H 16, 4 warps) at 1-4 stages (the engines launch 2, 1 on
    ROCm; the published MLA table has 1-4), for DeepSeek's 576/512 and the 288/256 heads, bf16 and
    fp8 caches -- what the doctor judges."""
    if kernel != "mla_decode":
        return {}
    out: dict[tuple[Path, str], list[Point]] = {}
    for kv in ("bf16", "fp8"):
        path = Path("mla_decode", kv, kv_dtype=kv)
        for arch in archs:
            if not runs_on(engine, path, arch):
                continue
            block_n = 16 if arch.startswith("gfx") else 32
            pts = [Point(path, (block_n, 16, lk, lv), 4, s, arch) for (lk, lv) in ((576, 512), (288, 256))
                   for s in (1, 2, 3, 4)]
            out[(path, arch)] = pts
    return out


# ------------------------------------------------------------------------------------------------
# designs


@dataclass(frozen=True)
class Designed:
    point: Point
    design: str  # "table", "grid" (the proof design), "fit", "probe"


def proof_design(engine: str, kernel: str, paths: Sequence[Path], tables: Mapping, archs: Sequence[str],
                 table_per: int = TABLE_PER, grid_per: int = GRID_PER) -> list[Designed]:
    out: list[Designed] = []
    for path, arch in itertools.product(paths, archs):
        if not runs_on(engine, path, arch):
            continue
        taken = set()
        real = list(tables.get((path, arch), ()))
        random.Random(f"table:{engine}:{path.name}:{arch}").shuffle(real)
        for p in real[:table_per]:
            taken.add(cal._ident(p))
            out.append(Designed(p, "table"))
        rng = random.Random(f"2:{engine}:{path.name}:{arch}")
        for p in points_for(path, arch, grid_per * 3, rng, engine):
            if len([d for d in out if d.point.path == path and d.point.arch == arch and d.design == "grid"]) >= grid_per:
                break
            if cal._ident(p) not in taken:
                taken.add(cal._ident(p))
                out.append(Designed(p, "grid"))
    return out


def points_for(path: Path, arch: str, n: int, rng: random.Random, engine: str | None = None) -> list[Point]:
    """``n`` points of the family's pool for ``engine`` (``engine_calibration_points``) for ``path``
    on ``arch``, stratified like the reference calibration's designs."""
    fam = registry.get(path.kernel)
    pool = [(t, w, s) for t, w, s in fam.engine_calibration_points(engine)
            if cal._applies(path, t) and cal.ring_lower_bound(path, t, s) <= cal.DOMAIN_BYTES]
    picked = cal._stratified(rng, pool, n, fam.calibration_strata())
    return [Point(path, tuple(t), w, s, arch) for t, w, s in picked]


def fit_design(engine: str, path: Path, arch: str, n: int, exclude: Iterable[Point]) -> list[Designed]:
    taken = {cal._ident(p) for p in exclude}
    rng = random.Random(f"1:{engine}:{path.name}:{arch}")
    return [Designed(p, "fit") for p in points_for(path, arch, n + len(taken) // 4, rng, engine)
            if cal._ident(p) not in taken][:n]


# ------------------------------------------------------------------------------------------------
# compiling


def compile_points(ek, designed: Sequence[Designed], jobs: int | None = None,
                   progress: Callable[[int, int], None] | None = None) -> list[Designed]:
    """Compile every point with the engine's kernel (cached); fills ``shared`` or ``error``."""
    items = [(d.point.spec(), d.point.arch) for d in designed]
    results = ek.many(items, jobs=jobs, progress=progress)
    out = []
    for d, item in zip(designed, items):
        r = results[item]
        p = d.point
        if r.error is None:
            out.append(Designed(Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, int(r.shared_bytes)), d.design))
        elif r.failed_to_compile:
            out.append(Designed(Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, None, r.error), d.design))
        else:  # our setup failed, not the compiler: not a fact about the kernel
            out.append(Designed(Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, None,
                                      "setup: " + (r.error or "?")), d.design))
    return out


# ------------------------------------------------------------------------------------------------
# forms


def reference_forms(triton_version: str) -> dict[tuple[str, str, str], str]:
    """The reference kernels' forms of the shipped model nearest ``triton_version``."""
    from .analytic import load_model

    model = load_model(triton_version)
    return dict(model.texts)


def shipped_epilogue(triton_version: str) -> dict:
    from .analytic import model_table, pick_version

    return model_table(pick_version(triton_version)).get("epilogue") or {}


def evaluate(text: str, points: Sequence[Point], epilogue: Mapping) -> list[int]:
    from ..formula import compile_formula
    from .analytic import VARIABLES

    fn = compile_formula(text, VARIABLES)
    variables = cal.point_variables(points, epilogue)
    return [int(round(fn(**v))) for v in variables]


@dataclass
class Proof:
    points: int = 0
    exact: int = 0
    verdict_errors: int = 0
    max_error: int = 0

    @property
    def proven(self) -> bool:
        return self.points > 0 and self.exact == self.points and not self.verdict_errors

    def to_json(self) -> dict:
        return {"points": self.points, "exact": self.exact, "verdict_errors": self.verdict_errors,
                "max_error": self.max_error}



def hold_strictly(proofs: dict[str, Proof], more: Mapping[str, Proof], only_misses: bool = False) -> None:
    """Count the misses of ``more`` (a proof per arch on points outside the held-out tally) into
    ``proofs`` as held-out points missed: a miss on any compiled point leaves its arch unproven.
    ``only_misses``: an arch ``more`` has no miss on gets no entry."""
    for arch, pr in more.items():
        if only_misses and pr.exact >= pr.points:
            continue
        held = proofs.setdefault(arch, Proof())
        held.points += pr.points - pr.exact
        held.max_error = max(held.max_error, pr.max_error)
        held.verdict_errors += pr.verdict_errors

def prove(text: str, points: Sequence[Point], epilogue: Mapping, limits: Mapping[str, Sequence[int]]) -> dict[str, Proof]:
    """Per arch: how the form does on the compiled ``points``."""
    ok = [p for p in points if p.shared is not None]
    preds = evaluate(text, ok, epilogue) if ok else []
    out: dict[str, Proof] = {}
    for p, pred in zip(ok, preds):
        pr = out.setdefault(p.arch, Proof())
        pr.points += 1
        if pred == p.shared:
            pr.exact += 1
        else:
            pr.max_error = max(pr.max_error, abs(pred - p.shared))
            pr.verdict_errors += sum(1 for x in limits.get(p.arch, ()) if (pred > x) != (p.shared > x))
    return out


@dataclass
class GroupResult:
    family: str  # arch family
    kernel: str
    dtype: str  # the form's dtype key
    formula: str
    origin: str  # "reference" (the reference kernel's form held) or "fit"
    proofs: dict[str, Proof]
    fit: dict | None = None  # the fit's summary when fitted
    misses: list = field(default_factory=list)

    def proven_archs(self) -> list[str]:
        return sorted(a for a, p in self.proofs.items() if p.proven)


def group_key(p: Point) -> tuple[str, str, str]:
    return (ARCH_FAMILIES.get(p.arch, "?"), p.path.kernel, cal.form_dtype(p.path))


def choose_forms(proof: Sequence[Point], fit_points: Mapping[tuple, Sequence[Point]], reference: Mapping,
                 epilogue: Mapping, limits: Mapping) -> tuple[dict[tuple, GroupResult], list[tuple]]:
    """Per group: the reference form if it holds on every proof point, else the fit's (when the
    group has fit points). Returns the results and the groups that still need a fit design."""
    groups: dict[tuple, list[Point]] = {}
    for p in proof:
        if p.shared is not None:
            groups.setdefault(group_key(p), []).append(p)
    results: dict[tuple, GroupResult] = {}
    need_fit: list[tuple] = []
    for key, pts in sorted(groups.items()):
        ref = reference.get(key)
        if ref is not None:
            proofs = prove(ref, pts, epilogue, limits)
            if all(pr.proven for pr in proofs.values()):
                results[key] = GroupResult(*key, ref, "reference", proofs)
                continue
        fits = [p for p in fit_points.get(key, ()) if p.shared is not None]
        if not fits:
            need_fit.append(key)
            if ref is not None:  # keep the reference form (unproven) until a fit replaces it
                results[key] = GroupResult(*key, ref, "reference", prove(ref, pts, epilogue, limits))
            continue
        if registry.get(key[1]).form_library.get("kind") == "sums":
            fitted = cal.fit_sums(fits, limits)
        else:
            fitted = cal.fit_group(fits, _library(), limits, epilogue)
        candidates = [(fitted.formula, "fit", fitted.summary())]
        if ref is not None:
            candidates.append((ref, "reference", None))
        best = None
        for text, origin, summary in candidates:
            proofs = prove(text, pts, epilogue, limits)
            on_fit = prove(text, fits, epilogue, limits)
            score = (sum(pr.exact for pr in proofs.values()) + sum(pr.exact for pr in on_fit.values()),
                     -sum(pr.verdict_errors for pr in proofs.values()))
            if best is None or score > best[0]:
                best = (score, GroupResult(*key, text, origin, proofs, summary))
        results[key] = best[1]
        # an arch the family's form does not hold on gets its own form where its own fit points
        # give one that holds on its held-out points (sm_120 is not sm_89 for every kernel)
        for arch, pr in sorted(best[1].proofs.items()):
            if pr.proven:
                continue
            own_fit = [p for p in fits if p.arch == arch]
            own = [p for p in pts if p.arch == arch]
            if len(own_fit) < 4:
                continue
            if registry.get(key[1]).form_library.get("kind") == "sums":
                f = cal.fit_sums(own_fit, limits)
            else:
                f = cal.fit_group(own_fit, _library(), limits, epilogue)
            proofs = prove(f.formula, own, epilogue, limits)
            if proofs.get(arch) and proofs[arch].proven:
                results[(arch, key[1], key[2])] = GroupResult(arch, key[1], key[2], f.formula, "fit", proofs,
                                                              f.summary())
    return results, need_fit


_LIB = None


def _library():
    global _LIB
    if _LIB is None:
        _LIB = cal.gemm_library(max_extras=3)
    return _LIB


# ------------------------------------------------------------------------------------------------
# compile failures


def failure_rule(points: Sequence[Point]) -> str | None:
    """The simplest rule over (BM, BN, BK, W, S) -- a conjunction of at most three thresholds --
    true on every point that failed to compile and false on every point that compiled; None when
    nothing failed or no such rule exists (the failures are then kept as a list only)."""
    failed = [p for p in points if p.shared is None and p.error and not p.error.startswith("setup")]
    fine = [p for p in points if p.shared is not None]
    if not failed:
        return None
    names = ("BM", "BN", "BK", "W", "S")

    def vals(p: Point) -> tuple:
        t = p.tile
        return (t[0], t[1], t[2], p.num_warps, p.num_stages) if len(t) == 3 else (t[1], t[0], t[2], p.num_warps,
                                                                                 p.num_stages)

    fv = [vals(p) for p in failed]
    ok = [vals(p) for p in fine]
    conds = []
    for i, n in enumerate(names):
        for v in sorted({x[i] for x in fv + ok}):
            conds.append((f"{n} >= {v}", lambda x, i=i, v=v: x[i] >= v))
            conds.append((f"{n} <= {v}", lambda x, i=i, v=v: x[i] <= v))
    # relations between tile sides (Triton 3.6's pipeliner fails on BLOCK_SIZE_N == BLOCK_SIZE_K at BM 256)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        a, b = names[i], names[j]
        conds.append((f"{a} == {b}", lambda x, i=i, j=j: x[i] == x[j]))
        conds.append((f"{a} < {b}", lambda x, i=i, j=j: x[i] < x[j]))
        conds.append((f"{a} > {b}", lambda x, i=i, j=j: x[i] > x[j]))
    # only conditions every failure meets
    conds = [c for c in conds if all(c[1](x) for x in fv)]
    for k in (1, 2, 3):
        best = None
        for combo in itertools.combinations(conds, k):
            if any(all(c[1](x) for c in combo) for x in ok):
                continue
            text = " and ".join(c[0] for c in combo)
            if best is None or len(text) < len(best):
                best = text
        if best is not None:
            return best
    return None


# ------------------------------------------------------------------------------------------------
# files


def forms_path(kernel: str, engine: str, version: str, triton: str, package: bool | None = None) -> FsPath:
    """The release's forms file: where it is read from (``package`` None: the user data folder's
    when it has one, else the package's), or where a calibration writes it (``package`` True: the
    package's, False: the user data folder's) -- :mod:`tilefit.smem.engine_files`."""
    return _folder(kernel, engine, version, triton, package) / files.forms_name(triton)


def points_path(kernel: str, engine: str, version: str, triton: str, package: bool | None = None) -> FsPath:
    return _folder(kernel, engine, version, triton, package) / files.points_name(triton)


def _folder(kernel: str, engine: str, version: str, triton: str, package: bool | None) -> FsPath:
    if package is None:
        return files.stored_dir(kernel, engine, version, triton)
    return files.write_dir(kernel, engine, version, package)


def dump_points(designed: Sequence[Designed], *, kernel: str, engine: str, engine_version: str,
                triton_version: str) -> dict:
    """Compact: paths and error texts once, one row per point ``[path, arch, *tile, num_warps,
    num_stages, shared or null, design, error index or null]``."""
    paths: list[Path] = []
    index: dict[Path, int] = {}
    errors: list[str] = []
    rows = []
    for d in designed:
        p = d.point
        if p.error and p.error.startswith("setup"):
            continue
        if p.path not in index:
            index[p.path] = len(paths)
            paths.append(p.path)
        err = None
        if p.shared is None:
            text = p.error or "?"
            if text not in errors:
                errors.append(text)
            err = errors.index(text)
        rows.append([index[p.path], p.arch, *p.tile, p.num_warps, p.num_stages, p.shared, d.design, err])
    rows.sort(key=lambda r: (r[0], r[1], r[2:]) if True else r)
    return {"format": FORMAT, "kernel": kernel, "engine": engine, "engine_version": engine_version,
            "triton_version": triton_version,
            "columns": "path, arch, tile (GEMM: BM BN BK; MLA decode: BLOCK_N BLOCK_H Lk Lv), num_warps, num_stages, "
                       "shared bytes (null: does not compile), design (table/grid: held out; fit; probe), error",
            "paths": [p.to_json() for p in paths], "errors": errors, "points": rows}



def write_calibration(doc, everything, kernel: str, engine: str, engine_version: str, triton_version: str,
                       package: bool = False) -> list:
    """Write a calibration's forms and compiled points (the user data folder's engine folder, the
    package's with ``package``); the paths written."""
    fp = forms_path(kernel, engine, engine_version, triton_version, package)
    pp = points_path(kernel, engine, engine_version, triton_version, package)
    write_forms(doc, fp)
    write_points(dump_points(everything, kernel=kernel, engine=engine, engine_version=engine_version,
                             triton_version=triton_version), pp)
    from . import engine_model

    engine_model.forget()  # the model lists and reads the calibrations anew
    return [fp, pp]

def load_points(doc_or_path) -> list[Designed]:
    if isinstance(doc_or_path, (str, FsPath)):
        doc = json.loads(FsPath(doc_or_path).read_text(encoding="utf-8"))
    else:
        doc = doc_or_path
    paths = [Path.from_json(p) for p in doc["paths"]]
    errors = doc.get("errors") or []
    out = []
    for row in doc["points"]:
        point, rest = cal.decode_row(paths, row)
        if len(rest) != 2 or (rest[1] is not None and not (isinstance(rest[1], int) and 0 <= rest[1] < len(errors))):
            raise ValueError(f"engine points row {row!r}: ends with [design, error index or null]")
        design, err = rest
        if err is not None:
            point = Point(point.path, point.tile, point.num_warps, point.num_stages, point.arch, None, errors[err])
        out.append(Designed(point, design))
    return out


def write_points(doc: Mapping, path: FsPath) -> None:
    """:func:`tilefit.smem.calibrate.write_points` (one point per line), its folder made first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cal.write_points(doc, path)


def write_forms(doc: Mapping, path: FsPath) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(doc, indent=1) + "\n")


def forms_doc(results: Mapping[tuple, GroupResult], failures: Mapping, *, kernel: str, provenance: Mapping,
              triton_version: str, reused: Mapping | None = None) -> dict:
    formulas: dict[str, dict] = {}
    proven: dict[str, dict] = {}
    origin: dict[str, dict] = {}
    fits: dict[str, dict] = {}
    for (family, k, dtype), r in sorted(results.items()):
        if r.origin.startswith("reused:"):
            continue  # answered with the base release's own forms and proofs (the loader reads them there)
        formulas.setdefault(family, {})[dtype] = r.formula
        proven.setdefault(family, {})[dtype] = {a: pr.to_json() for a, pr in sorted(r.proofs.items())}
        origin.setdefault(family, {})[dtype] = r.origin
        if r.fit:
            fits.setdefault(family, {})[dtype] = r.fit
    doc = {"format": FORMAT, "kernel": kernel, "engine": provenance.get("engine"),
           "engine_version": provenance.get("engine_version"), "triton_version": versions.major_minor(triton_version),
           "provenance": dict(provenance), "formulas": formulas, "proofs": proven, "origin": origin, "fits": fits,
           "failures": failures}
    if reused:
        doc["reused"] = dict(reused)
    return doc


# ------------------------------------------------------------------------------------------------
# the whole calibration


@dataclass
class KernelCalibration:
    kernel: str
    results: dict
    points: list[Designed]
    failures: dict
    doc: dict
    written: list[FsPath] = field(default_factory=list)


def failures_of(points: Sequence[Point]) -> dict:
    """``{arch: {path name: {"points": [[*tile, w, s, error index]], "rule": text or null}}}``"""
    out: dict[str, dict] = {}
    by: dict[tuple, list[Point]] = {}
    for p in points:
        by.setdefault((p.arch, p.path.name), []).append(p)
    for (arch, name), pts in sorted(by.items()):
        bad = [p for p in pts if p.shared is None and p.error and not p.error.startswith("setup")]
        if not bad:
            continue
        errors = sorted({p.error for p in bad})
        out.setdefault(arch, {})[name] = {
            "path": bad[0].path.to_json(),
            "errors": errors,
            "points": [[*p.tile, p.num_warps, p.num_stages, errors.index(p.error)] for p in bad],
            "rule": failure_rule(pts)}
    return out


def calibrate_engine(source: str, *, kernels: Iterable[str] | None = None,
                     archs: Sequence[str] | None = None, jobs: int | None = None, cache_dir=None,
                     write: bool = True, command: str = "", log: Callable[[str], None] | None = None,
                     progress_factory=None, items: Iterable | None = None,
                     scale: float = 1.0, rounds: int = 2, extend: bool = False,
                     package: bool = False) -> list[KernelCalibration]:
    """Calibrate the shared-memory forms of the engine ``source`` (``vllm==0.33.0``, a wheel, a
    tree) for the installed Triton; see the module docstring. ``items``: the ``(spec, arch)``
    pairs a check of the engine's tuning tables estimates (:func:`tilefit.app.touched_items`),
    whose kernels join the held-out design. ``scale`` multiplies the design's sizes per (path,
    arch) (:func:`design_sizes`; recorded in the provenance); ``rounds=2`` gives a group whose
    form is not proven a second round (:func:`second_round`). ``extend``: ``archs`` are added to
    the stored calibration of this engine release and Triton release, whose compiled points are
    kept (:mod:`tilefit.smem.engine_extend`). Written to the user data folder, or with
    ``package`` to the package's data (:mod:`tilefit.smem.engine_files`)."""
    from .engine_kernels import EngineKernels
    from .engine_source import open_source

    log = log or (lambda m: None)
    triton_version = compile_release()
    tree = open_source(source, cache_dir, log)
    if tree.engine is None:
        raise ValueError(f"{source}: cannot tell which engine this is (name a wheel or a vllm/sglang tree)")
    engine, engine_version = tree.engine, tree.version or "unknown"
    ek = EngineKernels(source, cache_dir=cache_dir, engine=engine, tree=tree)
    archs = list(archs or ALL_ARCHS)
    limits = cal.device_limits()
    reference = reference_forms(triton_version)
    epilogue = shipped_epilogue(triton_version)
    items = list(items or ())
    out = []
    for kernel in (list(kernels) if kernels else registry.names()):
        fam = registry.get(kernel)
        if engine not in fam.engine_launchers():
            continue
        stored = _stored_calibration(kernel, engine, engine_version, triton_version, archs, package) if extend else None
        if extend and stored is None:
            log(f"{engine} {engine_version} {kernel}: no stored calibration for Triton "
                f"{versions.major_minor(triton_version)} to extend; skipped")
            continue
        paths = engine_paths(engine, kernel)
        tables = table_points(items, engine, kernel)
        for extra_points in launch_points(engine, kernel, archs).items():
            tables.setdefault(extra_points[0], []).extend(extra_points[1])
        paths += [p for p in sorted({p for p, _a in tables}, key=lambda p: p.name) if p not in paths]
        sizes = design_sizes(scale)
        proof = proof_design(engine, kernel, paths, tables, archs, sizes["table"], sizes["grid"])
        t0 = time.perf_counter()
        log(f"{engine} {engine_version} {kernel}: {len(proof)} held-out points on {len(archs)} archs")
        done = compile_points(ek, proof, jobs, progress_factory(f"{kernel}: held-out points", len(proof))
                              if progress_factory else None)
        proof_pts = [d.point for d in done]
        results, need = choose_forms(proof_pts, {}, reference, epilogue, limits)
        fit_done: list[Designed] = []
        if need:
            fit_req = []
            for key in need:
                fam_archs = [a for a in ENGINE_ARCHS.get(key[0], ()) if a in archs]
                for i, arch in enumerate(fam_archs):
                    for path in paths:
                        if cal.form_dtype(path) != key[2] or not runs_on(engine, path, arch):
                            continue
                        n = sizes["fit_main" if i == 0 else "fit_other"]
                        fit_req += fit_design(engine, path, arch, n, proof_pts)
            log(f"{kernel}: the reference forms do not hold for {len(need)} groups; fitting on {len(fit_req)} points")
            fit_done = compile_points(ek, fit_req, jobs, progress_factory(f"{kernel}: fit points", len(fit_req))
                                      if progress_factory else None)
            fit_by: dict[tuple, list[Point]] = {}
            for d in fit_done:
                fit_by.setdefault(group_key(d.point), []).append(d.point)
            results, _ = choose_forms(proof_pts, fit_by, reference, epilogue, limits)
        everything = done + fit_done
        if rounds >= 2:
            results, everything = second_round(ek, engine, kernel, paths, tables, archs, sizes, results, everything,
                                               reference, epilogue, limits, jobs, log, progress_factory)
        if stored is not None:
            from . import engine_extend

            old_doc, old_points = stored
            results, how = engine_extend.merge(engine_extend.stored_results(old_doc, kernel), results,
                                               [d.point for d in everything], archs, epilogue, limits)
            record = engine_extend.extension_record(archs, command, time.perf_counter() - t0, everything, how)
            everything = engine_extend.merged_points(old_points, everything)
            prov = dict(old_doc.get("provenance") or {})
            prov["archs"] = list(prov.get("archs") or ()) + list(archs)
            prov["extensions"] = list(prov.get("extensions") or ()) + [record]
            prov["points"] = len(everything)
            prov["compiled"] = sum(1 for d in everything if d.point.shared is not None)
            prov["failed"] = prov["points"] - prov["compiled"]
            for line in sorted(how.items()):
                log(f"{kernel}: {line[0]}: {line[1]}")
        else:
            prov = _provenance(ek, fam, paths, archs, triton_version, command, time.perf_counter() - t0, everything)
            prov["design"] = dict(sizes, rounds=rounds)
        failures = failures_of([d.point for d in everything])
        doc = forms_doc(results, failures, kernel=kernel, provenance=prov, triton_version=triton_version)
        kc = KernelCalibration(kernel, results, everything, failures, doc)
        if write:
            kc.written = write_calibration(doc, everything, kernel, engine, engine_version, triton_version, package)
        out.append(kc)
    from .analytic import forget_models

    forget_models()
    return out


def read_from(package: bool) -> bool | None:
    """Where a step that changes a stored calibration reads it: the place it writes to (the
    package's data with ``package``), else wherever the model reads it (the user's first)."""
    return True if package else None


def _stored_calibration(kernel: str, engine: str, engine_version: str, triton_version: str,
                        archs: Sequence[str], package: bool = False) -> tuple[dict, list[Designed]] | None:
    """The stored forms file and points of the calibration ``--extend`` adds ``archs`` to; None
    when there is none. Refused for a release that reuses another's forms, and for an arch the
    stored calibration covers already (extending never recompiles a stored arch)."""
    fp = forms_path(kernel, engine, engine_version, triton_version, read_from(package))
    pp = points_path(kernel, engine, engine_version, triton_version, read_from(package))
    if not fp.is_file() or not pp.is_file():
        return None
    doc = json.loads(fp.read_text(encoding="utf-8"))
    if doc.get("reused"):
        raise ValueError(f"{fp} reuses the forms of Triton {doc['reused'].get('from')}: extend that release")
    have = set((doc.get("provenance") or {}).get("archs") or ())
    again = sorted(set(archs) & have)
    if again:
        raise ValueError(f"{fp} covers {', '.join(again)} already; --extend adds archs it does not cover")
    return doc, load_points(pp)


def unproven_groups(results: Mapping[tuple, GroupResult]) -> list[tuple]:
    """The (arch family, kernel, dtype) groups whose form misses on some arch that has no proven
    form of its own."""
    own = {(k[0], k[2]) for k, r in results.items() if k[0] not in ENGINE_ARCHS and r.proofs.get(k[0], Proof()).proven}
    out = []
    for key, r in sorted(results.items()):
        if key[0] not in ENGINE_ARCHS:
            continue
        if any(not pr.proven and (a, key[2]) not in own for a, pr in r.proofs.items()):
            out.append(key)
    return out


def second_design(engine: str, paths: Sequence[Path], tables: Mapping, archs: Sequence[str], sizes: Mapping,
                  groups: set, taken: set, seed: int = 3) -> list[Designed]:
    """A fresh held-out design for ``groups``: per (path, arch), the next real-table kernels in the
    first round's seeded order and a grid drawn with another seed (3), none compiled before."""
    out: list[Designed] = []
    for path, arch in itertools.product(paths, archs):
        own = (arch, path.kernel, cal.form_dtype(path)) in groups and runs_on_arch(engine, path, arch)
        if not own and ((ARCH_FAMILIES.get(arch), path.kernel, cal.form_dtype(path)) not in groups
                        or not runs_on(engine, path, arch)):
            continue
        real = list(tables.get((path, arch), ()))
        random.Random(f"table:{engine}:{path.name}:{arch}").shuffle(real)
        n = 0
        for p in real:
            if n >= sizes["table"]:
                break
            if cal._ident(p) not in taken:
                taken.add(cal._ident(p))
                out.append(Designed(p, "table"))
                n += 1
        rng = random.Random(f"{seed}:{engine}:{path.name}:{arch}")
        n = 0
        for p in points_for(path, arch, sizes["grid"] * 4, rng, engine):
            if n >= sizes["grid"]:
                break
            if cal._ident(p) not in taken:
                taken.add(cal._ident(p))
                out.append(Designed(p, "grid"))
                n += 1
    return out


def second_round(ek, engine, kernel, paths, tables, archs, sizes, results, everything, reference, epilogue,
                 limits, jobs, log, progress_factory):
    """A group whose form is not proven after the first round is fitted again on every point the
    first round compiled for it (its held-out points become fit points: the points file says
    ``fit``) and proven on a fresh held-out design (:func:`second_design`) that no choice saw."""
    want = set(unproven_groups(results))
    if not want:
        return results, everything
    taken = {cal._ident(d.point) for d in everything}
    design2 = second_design(engine, paths, tables, archs, sizes, want, taken)
    log(f"{kernel}: {len(want)} groups not proven; round 2 on {len(design2)} fresh held-out points")
    done2 = compile_points(ek, design2, jobs, progress_factory(f"{kernel}: round 2 held-out points", len(design2))
                           if progress_factory else None)
    kept = []
    fit_by: dict[tuple, list[Point]] = {}
    for d in everything:
        if group_key(d.point) in want:
            d = Designed(d.point, "fit")
            fit_by.setdefault(group_key(d.point), []).append(d.point)
        kept.append(d)
    # the reference form is a candidate only where it is exact on every point the first round compiled
    ref2 = {k: v for k, v in reference.items()
            if k not in want or all(pr.proven for pr in prove(v, fit_by.get(k, ()), epilogue, limits).values())}
    fresh, _ = choose_forms([d.point for d in done2], fit_by, ref2, epilogue, limits)
    out = {k: v for k, v in results.items() if (ARCH_FAMILIES.get(k[0], k[0]), k[1], k[2]) not in want}
    for k, v in fresh.items():
        group = (ARCH_FAMILIES.get(k[0], k[0]), k[1], k[2])
        if group not in want:
            continue
        v.origin = f"{v.origin}:round2"
        # strict: a miss on any compiled point of an arch (the fit points too) leaves it unproven
        own = [p for p in fit_by.get(group, ()) if k[0] not in ENGINE_ARCHS and p.arch == k[0] or k[0] in ENGINE_ARCHS]
        hold_strictly(v.proofs, prove(v.formula, own, epilogue, limits))
        out[k] = v
    for k in want:  # a group the fresh design has no compiled point of keeps its first-round form
        if k not in out and k in results:
            out[k] = results[k]
    return out, kept + done2


def _provenance(ek, fam, paths, archs, triton_version, command, seconds, points) -> dict:
    kernels: dict[str, dict] = {}
    for path in paths:
        spec = _probe_spec(path)
        arch = "sm_90" if path.swap_ab or path.tma else "sm_89"
        try:
            prov = ek.provenance(spec, arch)
        except Exception:  # noqa: BLE001 - a path the engine does not launch here
            continue
        kernels.setdefault(prov["kernel"], {k: prov[k] for k in ("file", "file_sha256", "helpers", "scratch_sha256")})
    tree = ek.tree
    compiled = [d for d in points if d.point.shared is not None]
    return {
        "method": "tilefit calibrate smem --engine: the engine's @triton.jit kernel taken from its release by AST "
                  "(never imported), launched as the engine's launcher launches it, compiled ahead of time "
                  "(stopped at shared-memory allocation); per group the reference kernel's form if it matches every "
                  "held-out point exactly, else the candidate library fitted on a separate design",
        "engine": tree.engine, "engine_version": tree.version, "wheel": os.path.basename(tree.wheel) if tree.wheel else None,
        "wheel_sha256": tree.wheel_sha256, "kernels": kernels, "triton": triton_version,
        "date": datetime.date.today().isoformat(), "command": command, "archs": list(archs),
        "points": len(points), "compiled": len(compiled), "failed": len(points) - len(compiled),
        "seconds": round(seconds, 1)}


# ------------------------------------------------------------------------------------------------
# other Triton releases: a probe, then reuse or a fresh calibration


PROBE_PER = 4  # probe points per (path, arch), besides the points that did not compile
# Tiles compilers fail on more often than others (the 256-row tile with 4 warps: Triton 3.4 and 3.6
# fail to verify the pipelined IR of vLLM's and SGLang's fused MoE at BN == BK): each version's
# probe compiles them on the first arch of each arch family, so failures that come and go with a
# release are found.
RISK_TILES = ((256, 64, 64), (256, 128, 128), (256, 256, 256), (256, 64, 128), (256, 128, 64))
RISK_LAUNCH = ((4, 2), (4, 3), (8, 3))


def risk_points(base: Sequence[Designed]) -> list[Designed]:
    """Per GEMM path and arch family: the :data:`RISK_TILES` on its first arch."""
    out = []
    seen = set()
    for d in base:
        p = d.point
        fam = ARCH_FAMILIES.get(p.arch)
        if len(p.tile) != 3 or (p.path, fam) in seen:
            continue
        first = next((a for a in ENGINE_ARCHS.get(fam or "", ()) if any(
            x.point.arch == a and x.point.path == p.path for x in base)), None)
        if first is None:
            continue
        seen.add((p.path, fam))
        for tile in RISK_TILES:
            if not cal._applies(p.path, tile):
                continue
            for w, stages in RISK_LAUNCH:
                if cal.ring_lower_bound(p.path, tile, stages) > cal.DOMAIN_BYTES:
                    continue
                out.append(Designed(Point(p.path, tile, w, stages, first), "probe"))
    return out


def probe_design(base: Sequence[Designed], per: int = PROBE_PER) -> list[Designed]:
    """From a calibrated release's points: per (path, arch) up to ``per`` held-out points spread
    over num_stages (real-table kernels first), and every point that did not compile there."""
    by: dict[tuple, list[Designed]] = {}
    for d in base:
        if d.design in ("table", "grid", "probe"):
            by.setdefault((d.point.path, d.point.arch), []).append(d)
    out: list[Designed] = []
    for key, ds in sorted(by.items(), key=lambda kv: (kv[0][0].name, kv[0][1])):
        failed = [d for d in ds if d.point.shared is None]
        fine = sorted((d for d in ds if d.point.shared is not None),
                      key=lambda d: (d.design != "table", repr(cal._ident(d.point))))
        random.Random(f"probe:{key[0].name}:{key[1]}").shuffle(fine)
        picked: list[Designed] = []
        stages = set()
        for d in fine:  # one per num_stages first, then the rest
            if d.point.num_stages not in stages and len(picked) < per:
                stages.add(d.point.num_stages)
                picked.append(d)
        for d in fine:
            if len(picked) >= per:
                break
            if d not in picked:
                picked.append(d)
        for d in picked + failed:
            p = d.point
            out.append(Designed(Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch), "probe"))
    return out


def probe_set(base: Sequence[Designed], scale: float = 1.0,
              risk_share: float | None = None) -> tuple[list[Designed], list[Designed]]:
    """``(probe, risk)``: the points a probe of another release compiles -- :func:`probe_design`
    with ``PROBE_PER * scale`` points per (path, arch), and the seeded ``risk_share`` (default:
    ``scale``, at most 1) of the :func:`risk_points` it does not already hold. Deterministic: a
    smaller scale's set is a subset of a larger one's."""
    probe = probe_design(base, max(1, round(PROBE_PER * scale)))
    share = min(scale, 1.0) if risk_share is None else risk_share
    known = {cal._ident(d.point) for d in probe}
    risky = [d for d in risk_points(base) if cal._ident(d.point) not in known]
    if share < 1:
        risky = [d for d in risky if random.Random(f"risk:{repr(cal._ident(d.point))}").random() < share]
    return probe, risky


def base_failure(doc: Mapping, p: Point) -> bool:
    """Whether the forms file ``doc`` knows ``p`` not to compile (a stored point or its rule)."""
    rec = (doc.get("failures") or {}).get(p.arch, {}).get(p.path.name)
    if not rec:
        return False
    if any(tuple(r[:-1]) == (*p.tile, p.num_warps, p.num_stages) for r in rec.get("points", ())):
        return True
    rule = rec.get("rule")
    if rule:
        from ..formula import compile_formula

        t = p.tile
        return bool(compile_formula(rule, ("BM", "BN", "BK", "W", "S"))(BM=t[0], BN=t[1], BK=t[2], W=p.num_warps,
                                                                        S=p.num_stages))
    return False


def _base_text(doc: Mapping, p: Point) -> str | None:
    """The form of the calibration ``doc`` that answers ``p``: its arch's own, else its family's."""
    forms = doc.get("formulas") or {}
    dtype = cal.form_dtype(p.path)
    return (forms.get(p.arch) or {}).get(dtype) or (forms.get(ARCH_FAMILIES.get(p.arch, "")) or {}).get(dtype)


def base_point(p: Point, base_by: Mapping, base_doc: Mapping, epilogue: Mapping) -> Point | None:
    """What the base release says of probe point ``p``: its compile when it made one, else (a risk
    tile it never compiled) a failure when its failures cover ``p`` or its form's bytes; None when
    it has no form for ``p``'s group."""
    hit = base_by.get(cal._ident(p))
    if hit is not None:
        return hit
    text = _base_text(base_doc, p)
    if text is None:
        return None
    if base_failure(base_doc, p):
        return Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, None, "base release: does not compile")
    return Point(p.path, p.tile, p.num_warps, p.num_stages, p.arch, evaluate(text, [p], epilogue)[0])


def compare_probe(pairs: Sequence[tuple[Point, Point]], base_doc: Mapping, epilogue: Mapping) -> dict:
    """A group's probe record: ``pairs`` of (this release's compile, the base release's point).

    Bytes are compared wherever this release compiles: with the base release's compile, or --
    where the base release did not compile the point -- with the base form's bytes. A point this
    release does not compile is a fact of this release (its ``failures``), not a byte difference.
    ``identical``: the points whose bytes agree; the group reuses the base forms only when every
    compared point agrees (and at least one was compared)."""
    compared = identical = failed = new_failures = 0
    max_diff = 0
    archs = set()
    for x, b in pairs:
        if x.shared is None:
            failed += 1
            new_failures += b.shared is not None
            continue
        compared += 1
        archs.add(x.arch)
        want = b.shared
        if want is None:
            text = _base_text(base_doc, x)
            want = evaluate(text, [x], epilogue)[0] if text else None
        if want == x.shared:
            identical += 1
        else:
            max_diff = max(max_diff, abs(x.shared - want) if want is not None else x.shared)
    rec = {"points": compared, "identical": identical, "archs": sorted(archs)}
    if failed:
        rec["do_not_compile"] = failed
        rec["newly_failing"] = new_failures
    if identical < compared:
        rec["max_difference"] = max_diff
    return rec


MIN_RULE_POINTS = 3  # failing probe points of an (arch, path) a failure rule is drawn from, at least
MIN_PROBE_POINTS = 2  # compared points a group's probe needs before it may reuse another release's forms


def reuses(rec: Mapping) -> bool:
    """Whether a group's probe record proves the base release's bytes: every compared point
    identical, and at least :data:`MIN_PROBE_POINTS` of them."""
    return rec["points"] >= MIN_PROBE_POINTS and rec["identical"] == rec["points"]


def probe_version(source: str, from_version: str, *, kernels: Iterable[str] | None = None,
                  archs: Sequence[str] | None = None, jobs: int | None = None, cache_dir=None, write: bool = True,
                  command: str = "", log: Callable[[str], None] | None = None, progress_factory=None,
                  items: Iterable | None = None, scale: float = 1.0,
                  risk_share: float | None = None, fresh: bool = True, package: bool = False,
                  extend: bool = False) -> list[KernelCalibration]:
    """Prove, group by group, that the installed Triton gives the bytes of the calibration for
    Triton ``from_version``; reuse its forms where it does, calibrate afresh where it does not.
    ``extend``: probe ``archs`` only and merge them into the release's stored probe record (its
    points and groups kept: :mod:`tilefit.smem.engine_probe_merge`); needs ``fresh=False``.
    ``scale`` < 1 shrinks the probe (points per path and arch, a seeded share of the risk
    points) and the fresh designs; the provenance records it. ``fresh=False``: the groups that
    differ are not calibrated afresh -- the file holds the reused groups and the probe's record of
    the others, which the loader answers with another release's forms, marked not proven."""
    from .engine_kernels import EngineKernels
    from .engine_source import open_source

    log = log or (lambda m: None)
    triton_version = compile_release()
    base_v = versions.major_minor(from_version)
    if base_v == versions.major_minor(triton_version):
        raise ValueError(f"--probe-from {from_version} is the release the compiles are made with")
    tree = open_source(source, cache_dir, log)
    if tree.engine is None:
        raise ValueError(f"{source}: cannot tell which engine this is (name a wheel or a vllm/sglang tree)")
    engine, engine_version = tree.engine, tree.version or "unknown"
    if extend and (fresh or not archs):
        raise ValueError("--extend with --probe-from adds the --arch archs to a release's probe record: give --arch "
                         "and --no-fresh")
    ek = EngineKernels(source, cache_dir=cache_dir, engine=engine, tree=tree)
    limits = cal.device_limits()
    out = []
    for kernel in (list(kernels) if kernels else registry.names()):
        fp = forms_path(kernel, engine, engine_version, base_v, read_from(package))
        pp = points_path(kernel, engine, engine_version, base_v, read_from(package))
        if not fp.is_file() or not pp.is_file():
            continue
        base_doc = json.loads(fp.read_text(encoding="utf-8"))
        if base_doc.get("reused"):
            raise ValueError(f"{fp}: Triton {base_v} reuses other forms itself; probe from a calibrated release")
        stored = _stored_probe(kernel, engine, engine_version, triton_version, base_v, archs, package, log) \
            if extend else None
        if extend and stored is None:
            continue
        all_base = load_points(pp)
        base_pts = [d for d in all_base if not archs or d.point.arch in archs]
        if extend and not base_pts:
            log(f"{kernel}: Triton {base_v}'s calibration has no point on {', '.join(archs)}; skipped")
            continue
        probe, risky = probe_set(base_pts, scale, risk_share)
        t0 = time.perf_counter()
        log(f"{engine} {engine_version} {kernel}: probing Triton {triton_version} against {base_v} "
            f"on {len(probe)} points")
        done = compile_points(ek, probe + risky, jobs, progress_factory(f"{kernel}: probe", len(probe) + len(risky))
                              if progress_factory else None)
        base_by = {cal._ident(d.point): d.point for d in base_pts}
        # the risk tiles were not compiled by the base release's design: a risk point is compared
        # with the base release's form (or its failures), see base_point
        base_forms_doc = json.loads(fp.read_text(encoding="utf-8"))
        base_epilogue = shipped_epilogue(base_v)
        groups: dict[tuple, list[tuple[Point, Point]]] = {}
        for d in done:
            if d.point.error and d.point.error.startswith("setup"):
                continue
            b = base_point(d.point, base_by, base_forms_doc, base_epilogue)
            if b is not None:
                groups.setdefault(group_key(d.point), []).append((d.point, b))
        records = {k: compare_probe(pairs, base_forms_doc, base_epilogue) for k, pairs in groups.items()}
        same = {k for k, rec in records.items() if reuses(rec)}
        differ = sorted(set(groups) - same)
        reused_groups = {f"{k[0]}/{k[2]}": records[k] for k in sorted(same)}
        differing = {f"{k[0]}/{k[2]}": records[k] for k in differ}
        if extend:
            from . import engine_extend, engine_probe_merge as pm

            stored_doc, stored_pts = stored
            merged = engine_extend.merged_points(stored_pts, done)
            base_all = {cal._ident(d.point): d.point for d in all_base}
            pairs = pm.probe_pairs(merged, base_all, base_forms_doc, base_epilogue)
            reused_groups, differing = pm.records(pairs, stored_doc.get("reused"), archs, base_forms_doc,
                                                  base_epilogue)
            same = {(k.split("/", 1)[0], kernel, k.split("/", 1)[1]) for k in reused_groups}
            differ = sorted((k.split("/", 1)[0], kernel, k.split("/", 1)[1]) for k in differing)
        log(f"{kernel}: {len(same)} groups give identical bytes, {len(differ)} differ")
        results: dict[tuple, GroupResult] = {}
        base_forms = base_doc.get("formulas") or {}
        base_origin = base_doc.get("origin") or {}
        for key in same:
            family, _k, dtype = key
            text = base_forms.get(family, {}).get(dtype)
            if text is None:
                continue
            proofs = {a: Proof(**pr) for a, pr in (base_doc.get("proofs", {}).get(family, {}).get(dtype) or {}).items()}
            results[key] = GroupResult(family, kernel, dtype, text, "reused:" + base_origin.get(family, {}).get(dtype, ""),
                                       proofs)
        same_fd = {(k[0], k[2]) for k in same}
        for where, per in base_forms.items():  # an arch's own forms go with its family's group
            if where in ARCH_FAMILIES:
                for dtype, text in per.items():
                    if (ARCH_FAMILIES[where], dtype) in same_fd:
                        proofs = {a: Proof(**pr) for a, pr in
                                  (base_doc.get("proofs", {}).get(where, {}).get(dtype) or {}).items()}
                        results[(where, kernel, dtype)] = GroupResult(where, kernel, dtype, text, "reused:fit", proofs)
        fresh_points: list[Designed] = []
        if differ and fresh:
            # a fresh calibration of the groups that differ, on the base release's held-out design
            want = {(k[0], k[2]) for k in differ}
            redo = [Designed(Point(d.point.path, d.point.tile, d.point.num_warps, d.point.num_stages, d.point.arch),
                             d.design) for d in base_pts if d.design in ("table", "grid")
                    and (ARCH_FAMILIES.get(d.point.arch), cal.form_dtype(d.point.path)) in want]
            log(f"{kernel}: calibrating {len(differ)} groups afresh on {len(redo)} held-out points")
            redone = compile_points(ek, redo, jobs, progress_factory(f"{kernel}: fresh held-out points", len(redo))
                                    if progress_factory else None)
            reference = reference_forms(triton_version)
            epilogue = shipped_epilogue(triton_version)
            proof_pts = [d.point for d in redone]
            fresh, need = choose_forms(proof_pts, {}, reference, epilogue, limits)
            fit_done: list[Designed] = []
            if need:
                paths = sorted({d.point.path for d in redo}, key=lambda p: p.name)
                fit_req = []
                for key in need:
                    fam_archs = [a for a in ENGINE_ARCHS.get(key[0], ()) if not archs or a in archs]
                    for i, arch in enumerate(fam_archs):
                        for path in paths:
                            if cal.form_dtype(path) != key[2] or not runs_on(engine, path, arch):
                                continue
                            fit_req += fit_design(engine, path, arch,
                                                  design_sizes(scale)["fit_main" if i == 0 else "fit_other"],
                                                  proof_pts)
                fit_done = compile_points(ek, fit_req, jobs, progress_factory(f"{kernel}: fit points", len(fit_req))
                                          if progress_factory else None)
                fit_by: dict[tuple, list[Point]] = {}
                for d in fit_done:
                    fit_by.setdefault(group_key(d.point), []).append(d.point)
                fresh, _ = choose_forms(proof_pts, fit_by, reference, epilogue, limits)
            differ_fd = {(k[0], k[2]) for k in differ}
            results.update({k: v for k, v in fresh.items()
                            if (ARCH_FAMILIES.get(k[0], k[0]), k[2]) in differ_fd})
            fresh_points = redone + fit_done
        everything = done + fresh_points
        failures = failures_of([d.point for d in everything])
        for per in failures.values():  # a probe's few failures are facts; a rule drawn from one or two is a guess
            for rec_ in per.values():
                if len(rec_["points"]) < MIN_RULE_POINTS:
                    rec_["rule"] = None
        if extend:
            stored_doc, stored_pts = stored
            design = dict(design_sizes(scale), probe_per=max(1, round(PROBE_PER * scale)),
                          risk_share=min(scale, 1.0) if risk_share is None else risk_share)
            doc = json.loads(json.dumps(stored_doc))
            old_rec = doc.get("reused") or {}
            moved = pm.changes(old_rec, reused_groups, differing)
            doc["reused"] = dict(old_rec, groups=reused_groups, differing=differing)
            doc["failures"] = pm.merge_failures(doc.get("failures") or {}, failures)
            doc["provenance"].setdefault("probe_extensions", []).append(pm.extension_record(
                archs, triton_version, command, time.perf_counter() - t0, done, design, moved))
            everything = engine_extend.merged_points(stored_pts, done)
            log(f"{kernel}: merged into Triton {versions.major_minor(triton_version)}'s probe record: "
                + ("; ".join(f"{k.replace('_', ' ')} {', '.join(v)}" for k, v in moved.items()) or "no group changed"))
            kc = KernelCalibration(kernel, results, everything, doc.get("failures") or {}, doc)
            if write:
                kc.written = write_calibration(doc, everything, kernel, engine, engine_version, triton_version,
                                               package)
            out.append(kc)
            continue
        prov = _provenance(ek, registry.get(kernel), [], archs or ALL_ARCHS, triton_version, command,
                           time.perf_counter() - t0, everything)
        prov["kernels"] = base_doc.get("provenance", {}).get("kernels", {})
        prov["design"] = dict(design_sizes(scale), probe_per=max(1, round(PROBE_PER * scale)),
                              risk_share=min(scale, 1.0) if risk_share is None else risk_share)
        reused = {"from": base_v, "min_points": MIN_PROBE_POINTS, "groups": reused_groups, "differing": differing,
                  "note": f"groups in 'groups' gave the bytes of Triton {base_v} on every probe point this release "
                          f"compiles (points it does not compile are its own failures) and use its forms; the "
                          + ("others were calibrated afresh" if fresh else
                             "others ('differing') have no form of their own for this release")}
        doc = forms_doc(results, failures, kernel=kernel, provenance=prov, triton_version=triton_version,
                        reused=reused)
        kc = KernelCalibration(kernel, results, everything, failures, doc)
        if write:
            kc.written = write_calibration(doc, everything, kernel, engine, engine_version, triton_version, package)
        out.append(kc)
    from .analytic import forget_models

    forget_models()
    return out


def _stored_probe(kernel: str, engine: str, engine_version: str, triton_version: str, base_v: str,
                  archs: Sequence[str], package: bool, log: Callable[[str], None]):
    """``(forms doc, points)`` of the release's stored probe record from ``base_v``, for ``--extend``;
    None (logged) when it has none; ValueError when ``archs`` were probed already."""
    from .engine_probe_merge import probed_archs

    rel = versions.major_minor(triton_version)
    fp = forms_path(kernel, engine, engine_version, rel, read_from(package))
    pp = points_path(kernel, engine, engine_version, rel, read_from(package))
    if not fp.is_file() or not pp.is_file():
        log(f"{kernel}: no probe record of Triton {rel} to extend; skipped")
        return None
    doc = json.loads(fp.read_text(encoding="utf-8"))
    rec = doc.get("reused") or {}
    if not rec.get("min_points") or rec.get("from") != base_v or doc.get("formulas"):
        log(f"{kernel}: Triton {rel}'s file is not a probe record from {base_v} (a calibration of its own: "
            f"extend it with --extend without --probe-from); skipped")
        return None
    again = sorted(set(archs) & probed_archs(doc))
    if again:
        raise ValueError(f"{fp}: {', '.join(again)} probed already; --extend adds archs the record has not probed")
    return doc, load_points(pp)


# ------------------------------------------------------------------------------------------------
# a refit from the stored points (no compile)


def in_launch_space(engine: str, p: Point) -> bool:
    """Whether ``engine`` launches ``p``'s tile and launch options: a family whose engines hard-code
    them (``calibration.engine_space.<engine>``: vLLM's MLA decode always runs 4 warps) proves its
    forms on what the engine launches; any point of a family without one."""
    fam = registry.get(p.path.kernel)
    if not (fam.calibration.get("engine_space") or {}).get(engine):
        return True
    return (tuple(p.tile), p.num_warps, p.num_stages) in {(tuple(t), w, s) for t, w, s in fam.engine_calibration_points(engine)}


def refit_engine(kernel: str, engine: str, engine_version: str, triton: str, *, write: bool = True,
                 command: str = "", package: bool = False) -> KernelCalibration:
    """Choose the forms again from the compiled points of a calibration (``points-triton-X.Y.json``)
    without compiling anything: the held-out design (table, grid) proves, the fit design fits, as in
    :func:`calibrate_engine`. For a change of the form search; the provenance of the compiles is
    kept and the refit is recorded."""
    fp = forms_path(kernel, engine, engine_version, triton, read_from(package))
    pp = points_path(kernel, engine, engine_version, triton, read_from(package))
    if not pp.is_file():
        raise ValueError(f"no compiled points of {engine} {engine_version} {kernel} for Triton {triton} ({pp})")
    old = json.loads(fp.read_text(encoding="utf-8")) if fp.is_file() else {}
    if old.get("reused"):
        raise ValueError(f"{fp} reuses the forms of Triton {old['reused'].get('from')}: refit that release")
    triton_version = (old.get("provenance") or {}).get("triton") or triton
    designed = load_points(pp)
    # fitted on every compile of the engine's kernel, proven on the held-out points it launches
    proof_pts = [d.point for d in designed if d.design in ("table", "grid") and in_launch_space(engine, d.point)]
    fit_by: dict[tuple, list[Point]] = {}
    for d in designed:
        if d.design == "fit":
            fit_by.setdefault(group_key(d.point), []).append(d.point)
    limits = cal.device_limits()
    results, _need = choose_forms(proof_pts, fit_by, reference_forms(triton_version), shipped_epilogue(triton_version),
                                  limits)
    failures = failures_of([d.point for d in designed])
    prov = dict(old.get("provenance") or {})
    prov["refit"] = {"date": datetime.date.today().isoformat(), "command": command,
                     "note": "forms chosen again from the stored compiled points; nothing compiled"}
    doc = forms_doc(results, failures, kernel=kernel, provenance=prov, triton_version=triton_version)
    kc = KernelCalibration(kernel, results, designed, failures, doc)
    if write:  # the points go along: a forms file is read with the points beside it
        kc.written = write_calibration(doc, designed, kernel, engine, engine_version, triton_version, package)
    from .analytic import forget_models

    forget_models()
    return kc


# ------------------------------------------------------------------------------------------------
# written candidates, proven on a fresh design


def engine_candidates(kernel: str, engine: str) -> dict[tuple[str, str, str], str]:
    """The family's hand-written forms for ``engine`` (``calibration.engine_candidates``):
    ``{(arch family, kernel, dtype key): form}``. A key may name several arch families at once
    (``"sm_80,sm_86"``: the same forms for each); one (family, dtype key) written twice is an
    error in the data file."""
    per = ((registry.get(kernel).calibration.get("engine_candidates") or {}).get(engine)) or {}
    out: dict[tuple[str, str, str], str] = {}
    for fams, forms in per.items():
        for fam in (f.strip() for f in fams.split(",")):
            for dtype, text in forms.items():
                if (fam, kernel, dtype) in out:
                    raise ValueError(f"{kernel} family.json: engine_candidates.{engine} writes {fam} {dtype} twice")
                out[(fam, kernel, dtype)] = text
    return out


def engine_witnesses(kernel: str, engine: str, archs: Sequence[str], taken: set) -> list[Designed]:
    """The family's witness points for ``engine`` (``calibration.engine_witnesses``): compiles a
    written candidate was made from (a counter-example to the shipped form), of ``archs``, not yet
    stored. A candidate round compiles them beside its fresh design and counts them as points seen
    before (design ``fit``: strict, never held out), so a form that misses one is not proven there."""
    out = []
    for w in ((registry.get(kernel).calibration.get("engine_witnesses") or {}).get(engine)) or []:
        for arch in w["archs"]:
            if arch not in archs:
                continue
            pt = Point(Path.from_json(w["path"]), tuple(w["tile"]), w["num_warps"], w["num_stages"], arch)
            if cal._ident(pt) not in taken:
                out.append(Designed(pt, "fit"))
    return out


def candidate_round(source: str, kernel: str, *, archs: Sequence[str] | None = None, jobs: int | None = None,
                    cache_dir=None, items: Iterable | None = None, scale: float = 1.0, write: bool = True,
                    command: str = "", log: Callable[[str], None] | None = None,
                    progress_factory=None, package: bool = False) -> KernelCalibration:
    """Prove the family's written candidate forms (:func:`engine_candidates`) for the installed
    Triton's calibration of ``source``'s ``kernel``: a fresh held-out design (the next real-table
    kernels and a grid of seed 4) of the groups with a candidate is compiled -- none of its points
    was seen when the candidates were written -- and a candidate replaces the group's form where
    it is exact on every fresh point and on every point compiled before; the others keep theirs."""
    from .engine_kernels import EngineKernels
    from .engine_source import open_source

    log = log or (lambda m: None)
    triton_version = compile_release()
    tree = open_source(source, cache_dir, log)
    engine, engine_version = tree.engine, tree.version or "unknown"
    ek = EngineKernels(source, cache_dir=cache_dir, engine=engine, tree=tree)
    fp = forms_path(kernel, engine, engine_version, triton_version, read_from(package))
    pp = points_path(kernel, engine, engine_version, triton_version, read_from(package))
    if not fp.is_file() or not pp.is_file():
        raise ValueError(f"no calibration of {engine} {engine_version} {kernel} for Triton "
                         f"{versions.major_minor(triton_version)} to prove candidates on ({fp})")
    doc = json.loads(fp.read_text(encoding="utf-8"))
    before = load_points(pp)
    cands = engine_candidates(kernel, engine)
    archs = list(archs or doc.get("provenance", {}).get("archs") or ALL_ARCHS)
    limits = cal.device_limits()
    epilogue = shipped_epilogue(triton_version)
    sizes = design_sizes(scale)
    paths = engine_paths(engine, kernel)
    tables = table_points(items or (), engine, kernel)
    paths += [p for p in sorted({p for p, _a in tables}, key=lambda p: p.name) if p not in paths]
    taken = {cal._ident(d.point) for d in before}
    design = second_design(engine, paths, tables, archs, sizes, set(cands), taken, seed=4)
    witnesses = engine_witnesses(kernel, engine, archs, taken)
    log(f"{kernel}: {len(cands)} written candidates; {len(design)} fresh held-out points"
        + (f", {len(witnesses)} witness points" if witnesses else ""))
    done = compile_points(ek, design + witnesses, jobs,
                          progress_factory(f"{kernel}: candidates' held-out points", len(design) + len(witnesses))
                          if progress_factory else None)
    done, witnessed = done[:len(design)], done[len(design):]
    before = before + witnessed  # seen when the candidates were written: counted strictly, stored as fit points
    results: dict[tuple, GroupResult] = {}
    for family, per in (doc.get("formulas") or {}).items():
        for dtype, text in per.items():
            proofs = {a: Proof(**pr) for a, pr in (doc.get("proofs", {}).get(family, {}).get(dtype) or {}).items()}
            results[(family, kernel, dtype)] = GroupResult(family, kernel, dtype, text,
                                                           (doc.get("origin") or {}).get(family, {}).get(dtype, "?"),
                                                           proofs, (doc.get("fits") or {}).get(family, {}).get(dtype))
    fresh = [d.point for d in done if d.point.shared is not None]
    old = [d.point for d in before if d.point.shared is not None]
    unheld = {cal._ident(d.point) for d in before if d.design not in ("table", "grid")}  # not in the held-out tally
    taken_over = {}
    for key, text in sorted(cands.items()):
        pts = [p for p in fresh if in_group(p, key)]
        seen = [p for p in old if in_group(p, key)]
        if not pts:
            continue
        proofs = prove(text, pts, epilogue, limits)
        hold_strictly(proofs, prove(text, seen, epilogue, limits))
        n_new = sum(pr.proven for pr in proofs.values())
        cur = results.get(key)
        # the current form is held to the fresh points too: an arch it misses there is not proven
        cur_fresh = prove(cur.formula, pts, epilogue, limits) if cur else {}
        # ... and to the points seen before, as the candidate is (a witness it misses unproves the arch)
        cur_seen = prove(cur.formula, [p for p in seen if cal._ident(p) in unheld and p.arch in archs], epilogue,
                         limits) if cur else {}
        n_cur = sum(pr.proven and (a not in cur_fresh or cur_fresh[a].proven)
                    and (a not in cur_seen or cur_seen[a].exact == cur_seen[a].points)
                    for a, pr in cur.proofs.items()) if cur else -1
        if n_new > max(n_cur, 0 if key[0] in ARCH_FAMILIES else -1):  # an arch's own form only where proven
            results[key] = GroupResult(*key, text, "candidate", proofs)
            taken_over[f"{key[0]}/{key[2]}"] = {"proven_on": sorted(a for a, pr in proofs.items() if pr.proven),
                                               "held_out": len(pts), "compiled_before": len(seen),
                                               **({"replaced": cur.formula} if cur else {})}
        elif cur is not None:  # the current form keeps its place, with the fresh points in its proofs
            for arch, pr in cur_fresh.items():
                held = cur.proofs.setdefault(arch, Proof())
                held.points += pr.points
                held.exact += pr.exact
                held.max_error = max(held.max_error, pr.max_error)
                held.verdict_errors += pr.verdict_errors
            hold_strictly(cur.proofs, cur_seen, only_misses=True)  # strict, as the candidate
        log(f"{key[0]} {key[2]}: candidate proven on {sorted(a for a, pr in proofs.items() if pr.proven) or '-'}"
            f" ({len(pts)} fresh points){'; taken' if f'{key[0]}/{key[2]}' in taken_over else ''}")
    everything = before + done
    failures = failures_of([d.point for d in everything])
    prov = dict(doc.get("provenance") or {})
    if prov.get("candidates"):  # an earlier round's record stays (its groups keep their forms)
        prov["earlier_candidates"] = [*prov.get("earlier_candidates", []), prov["candidates"]]
    prov["candidates"] = {"date": datetime.date.today().isoformat(), "command": command, "groups": taken_over,
                          "held_out_points": len(design),
                          "note": "written forms (the family's calibration.engine_candidates) proven on a fresh "
                                  "held-out design of seed 4 and exact on every point compiled before"}
    prov["points"] = len(everything)
    prov["compiled"] = sum(1 for d in everything if d.point.shared is not None)
    prov["failed"] = prov["points"] - prov["compiled"]
    out = forms_doc(results, failures, kernel=kernel, provenance=prov, triton_version=triton_version)
    kc = KernelCalibration(kernel, results, everything, failures, out)
    if write:
        kc.written = write_calibration(out, everything, kernel, engine, engine_version, triton_version, package)
        if taken_over:  # the releases that reuse these forms were counted against the old ones
            from .engine_recount import recount

            recount(kernel, engine, engine_version, versions.major_minor(triton_version), package=package, log=log)
    from .analytic import forget_models

    forget_models()
    return kc
