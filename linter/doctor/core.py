"""``tilefit doctor``'s engine: model shape + engine profile + targets -> verdict per kernel and
batch size.

For each (engine profile, target device) the doctor:

1. names the tables the engine will ask for on that device (the runtime's device name in the
   engine's spelling; vLLM's H200 fold; SGLang's ``_down``, ``per_channel_quant`` and spaced
   ``block_shape``);
2. searches for them the way the engine does (:mod:`tilefit.doctor.lookup`);
3. for every batch size M (1..4096 by default) takes the entry the engine picks (nearest key,
   ties to file order) or the engine's default config (the profile's cases), applies the launch
   adjustments (:func:`tilefit.variants.kernel_variants`: Triton defaults, vLLM's BLOCK_SIZE_K
   clamp and sm_90 swap, SGLang forcing the down GEMM's BLOCK_SIZE_M to the up GEMM's), and
   estimates the shared memory with :class:`tilefit.estimate.Estimator`;
4. groups consecutive batch sizes with the same config and verdict into rows.

Nothing here prints; :mod:`tilefit.doctor.report` renders a :class:`DoctorReport`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from tilefit.dtypes import file_dtype_of
from tilefit.estimate import Estimator, EstimatorUnavailable
from tilefit.families import TableMeta
from tilefit import dtypes
from tilefit.kernels import KernelSpec, make_spec
from tilefit.kernels.mla_decode.family import block_sizes as mla_block_sizes
from tilefit.serving.naming import device_file_name, gemm_file_name, moe_file_name
from tilefit.serving.profiles import Profile, first_case, full_env
from tilefit.variants import TILE_KEYS, effective_launch, kernel_variants

from .kernels import MoeShape, Parallel, dense_gemms, moe_shape
from .lookup import Lookup, PackageSource, nearest_key, package_source, search_gemm, search_moe
from .model import ModelShape

DEFAULT_BATCH_RANGE = (1, 4096)

FITS, OVERFLOW, UNKNOWN, UNCERTAIN = "fits", "overflow", "unknown", "uncertain"
WRITE_FAILED = "cannot write "  # how a --write problem that is an OS error starts


@dataclass(frozen=True)
class Target:
    """One device to judge: its limits (a device-database record) and the name the runtime reports."""

    device: Any  # tilefit.device_db.Device
    runtime_name: str | None  # torch/NVML name; None for an architecture entry
    origin: str = "--target"

    @property
    def key(self) -> str:
        return self.device.key

    @property
    def limit(self) -> int | None:
        return self.device.smem_per_block_optin

    def describe(self) -> str:
        d = self.device
        what = d.name if d.kind == "card" else f"any {d.arch} GPU"
        limit = f"{d.smem_per_block_optin} B per block" if d.smem_per_block_optin else "limit unknown"
        return f"{what} ({d.key}, {d.arch}, {limit})"


@dataclass
class Row:
    """Batch sizes m_from..m_to get the same config and the same verdict."""

    m_from: int
    m_to: int
    source: str  # "file", "default", "fixed" (launch parameters fixed in the engine's code)
    config: dict
    verdict: str
    shared_bytes: int | None = None
    limit: int | None = None
    estimator: str | None = None
    status: str | None = None
    key: int | None = None  # file key picked
    case: str | None = None  # default case
    detail: str = ""

    def same(self, other: "Row") -> bool:
        return (self.source, self.config, self.verdict, self.shared_bytes, self.key, self.case, self.detail) == \
            (other.source, other.config, other.verdict, other.shared_bytes, other.key, other.case, other.detail)

    def to_json(self) -> dict:
        return {"batch_sizes": [self.m_from, self.m_to], "source": self.source, "file_key": self.key,
                "default_case": self.case, "config": self.config, "verdict": self.verdict,
                "shared_bytes": self.shared_bytes, "limit_bytes": self.limit, "estimator": self.estimator,
                "estimate_status": self.status, "detail": self.detail or None}


@dataclass
class KernelReport:
    role: str  # "moe_up", "moe_down", "block_gemm", "mla_decode"
    label: str
    kernel: str
    shape: str
    used: bool = True
    not_used: str | None = None
    lookup: Lookup | None = None
    down_lookup: Lookup | None = None  # SGLang's _down table search (moe_down)
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem: str | None = None  # the engine fails before launching (unreadable table ...)

    @property
    def overflows(self) -> bool:
        """A launch needs more shared memory than the target has (OutOfResources)."""
        return self.used and any(r.verdict == OVERFLOW for r in self.rows)

    @property
    def fails(self) -> bool:
        """The engine fails before launching this kernel (its lookup raises: an unreadable
        table, an override folder without ``configs/``): not a shared-memory verdict."""
        return self.used and self.problem is not None

    @property
    def worst(self) -> Row | None:
        rows = [r for r in self.rows if r.shared_bytes is not None]
        return max(rows, key=lambda r: r.shared_bytes - (r.limit or 0)) if rows else None

    def to_json(self) -> dict:
        return {"role": self.role, "label": self.label, "kernel": self.kernel, "shape": self.shape,
                "used": self.used, "not_used_reason": self.not_used,
                "lookup": self.lookup.to_json() if self.lookup else None,
                "down_lookup": self.down_lookup.to_json() if self.down_lookup else None,
                "problem": self.problem, "overflows": self.overflows, "fails": self.fails, "notes": self.notes,
                "rows": [r.to_json() for r in self.rows]}


@dataclass
class Section:
    """One engine profile on one target."""

    profile: Profile
    target: Target
    source: PackageSource
    device_name: str | None  # the engine's spelling (MoE)
    moe: MoeShape | None
    kernels: list[KernelReport] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def overflows(self) -> bool:
        return any(k.overflows for k in self.kernels)

    @property
    def fails(self) -> bool:
        return any(k.fails for k in self.kernels)

    def kernel(self, role: str) -> KernelReport | None:
        return next((k for k in self.kernels if k.role == role), None)

    def to_json(self) -> dict:
        return {"engine": self.profile.engine, "engine_version": self.profile.version, "profile": self.profile.name,
                "target": self.target.key, "device": self.target.device.name, "arch": self.target.device.arch,
                "limit_bytes": self.target.limit, "runtime_device_name": self.target.runtime_name,
                "config_device_name": self.device_name, "tables_from": self.source.label,
                "moe_shape": vars(self.moe) if self.moe else None, "overflows": self.overflows, "fails": self.fails,
                "notes": self.notes, "kernels": [k.to_json() for k in self.kernels]}


@dataclass
class Options:
    parallel: Parallel = field(default_factory=Parallel)
    batch_sizes: Sequence[int] | None = None  # None: 1..4096
    kv_cache_dtype: str | None = None  # Triton name (bf16, fp16, fp8e4nv, fp8e5) or None: the model's
    triton_version: str | None = None
    triton_version_origin: str = ""
    engine_path: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    shared_expert_fusion: str = "auto"  # auto, on, off
    force_triton: bool = False  # judge Triton kernels even where the engine uses another backend
    engine_functions: Mapping[str, Any] = field(default_factory=dict)  # engine -> EngineFunctions (--allow-import)
    auto_detect_engine: bool = True


# --------------------------------------------------------------------------------------------
# estimating


class Judge:
    """Estimates shared memory with memoisation and turns it into a verdict."""

    def __init__(self, estimator: Estimator, triton_version: str | None = None):
        self.estimator = estimator
        self._analytic = Estimator("analytic", triton_version=triton_version)

    def judge(self, specs: Sequence[KernelSpec], target: Target) -> tuple[str, int | None, str | None, str | None, str]:
        """(verdict, bytes, estimator, status, detail) of the worst variant."""
        limit = target.limit
        arch = target.device.arch
        worst = None
        errors = []
        for spec in specs:
            try:
                est = self.estimator.estimate(spec, arch, limit)
            except EstimatorUnavailable as exc:
                errors.append(str(exc))
                continue
            if worst is None or est.shared_bytes > worst.shared_bytes:
                worst = est
        if worst is None:
            return UNKNOWN, None, None, None, "; ".join(dict.fromkeys(errors)) or "no launchable kernel"
        if limit is None:
            return UNKNOWN, worst.shared_bytes, worst.estimator, worst.status, "the device's limit is unknown"
        if worst.status == "uncalibrated":
            # decided when the form's calibration error bound keeps it on one side of the limit
            if worst.usable and worst.certainly_over(limit):
                verdict = OVERFLOW
            elif worst.usable and worst.certainly_fits(limit):
                verdict = FITS
            else:
                verdict = UNCERTAIN
            return verdict, worst.shared_bytes, worst.estimator, worst.status, \
                "uncalibrated closed form for this arch family" if verdict == UNCERTAIN else ""
        return (OVERFLOW if worst.shared_bytes > limit else FITS), worst.shared_bytes, worst.estimator, worst.status, ""

    def fits_everywhere(self, specs: Sequence[KernelSpec], targets: Sequence[Target]) -> bool:
        """Strict test for configs the doctor writes: fits under the doctor's estimator and under
        the closed form alone (what ``tilefit check`` uses when it cannot compile)."""
        for target in targets:
            if any(self.estimator.compile_failure(spec, target.device.arch) for spec in specs):
                return False  # the engine's kernel does not compile it there: never written
            verdict = self.judge(specs, target)[0]
            if verdict != FITS:
                return False
            if target.limit is not None:
                for spec in specs:
                    try:
                        est = self._analytic.estimate(spec, target.device.arch)
                    except EstimatorUnavailable:
                        continue
                    if est.status != "uncalibrated" and est.shared_bytes > target.limit:
                        return False
        return True


def make_estimator(mode: str = "auto", triton_version: str | None = None) -> Estimator:
    """The project's estimator; when its exact path is not wired up but Triton is installed,
    hand it our exact compile function."""
    est = Estimator(mode, triton_version=triton_version)
    if mode != "analytic" and not est.exact_available():
        from tilefit import versions

        if versions.installed_triton() is not None:
            try:
                from tilefit.smem.exact import exact_shared_bytes
            except ImportError:
                return est
            est = Estimator(mode, triton_version=triton_version, exact=exact_shared_bytes)
    return est


# --------------------------------------------------------------------------------------------
# configs -> specs


def config_text(cfg: Mapping, vendor: str | None = None) -> str:
    """``128x256x128 G32 w8 s4``; warps/stages the entry leaves out show Triton's default with '*'."""
    if "BLOCK_SIZE_M" in cfg:
        parts = [f"{cfg.get('BLOCK_SIZE_M')}x{cfg.get('BLOCK_SIZE_N')}x{cfg.get('BLOCK_SIZE_K')}"]
        if "GROUP_SIZE_M" in cfg:
            parts.append(f"G{cfg['GROUP_SIZE_M']}")
    else:
        parts = [f"BLOCK_N={cfg.get('BLOCK_N')} BLOCK_H={cfg.get('BLOCK_H')}"]
    warps, stages = effective_launch(cfg, vendor or "NVIDIA")
    parts.append(f"w{warps}" + ("" if "num_warps" in cfg else "*"))
    parts.append(f"s{stages}" + ("" if "num_stages" in cfg else "*"))
    if cfg.get("USE_TMA") is True:
        parts.append("TMA")
    return " ".join(parts)


def _meta(family: str, dtype: str, quant, block: tuple[int, int] | None, down: bool = False) -> TableMeta:
    return TableMeta(family=family, stem="", dtype=file_dtype_of(dtype), block_shape=block,
                     per_channel_quant=quant.scheme == "per_channel", down=down)


def registry_engines(kernel: str) -> tuple[str, ...]:
    """The engines whose launch of ``kernel`` is modelled (their own kernel answers for them)."""
    from tilefit.kernels import registry

    fam = registry.find(kernel)
    return tuple(fam.engine_launchers()) if fam is not None else ()


def moe_specs(model: ModelShape, entry: Mapping, target: Target, engine: str,
              down: bool = False) -> tuple[KernelSpec, ...]:
    """The kernels an entry launches; ``down``: the entry is a ``_down`` table's (SGLang's
    ``USE_TMA`` there reads A and B through TMA, in the gate/up GEMM only B)."""
    quant = model.quant
    dtype = quant.dtype if quant.is_quantised else model.activation_dtype
    meta = _meta("fused_moe", dtype, quant, quant.block, down)
    variants = kernel_variants(meta, entry, target.device.arch, target.device.vendor, engine)
    specs = []
    for v in variants:
        spec = v.spec
        if quant.scheme == "group":  # the group-quantised kernel, with the checkpoint's group size
            if spec.quant != "group":
                continue
            spec = spec.with_(block_shape=(0, quant.group_size))
        elif spec.quant == "group":
            continue
        specs.append(spec)
    return tuple(specs)


def gemm_specs(model: ModelShape, entry: Mapping, target: Target, engine: str) -> tuple[KernelSpec, ...]:
    meta = TableMeta(family="w8a8_gemm", stem="", dtype="fp8_w8a8", block_shape=model.quant.block)
    return tuple(v.spec for v in kernel_variants(meta, entry, target.device.arch, target.device.vendor, engine))


# --------------------------------------------------------------------------------------------
# the doctor


def _env_for(model: ModelShape, target: Target, M: int, E: int, N: int, K: int, top_k: int) -> dict:
    q = model.quant
    block = q.block or (0, 0)
    return full_env({"M": M, "E": E, "N": N, "K": K, "TOPK": top_k, "BN_Q": block[0], "BK_Q": block[1],
            "GROUP": q.group_size or 0, "FP8": int(q.dtype == "fp8_w8a8"), "INT8": int(q.dtype == "int8_w8a8"),
            "WNA16": int(q.scheme == "group"), "BLOCK": int(q.block is not None),
            "PER_CHANNEL": int(q.scheme == "per_channel"), "HIP": int(target.device.vendor == "AMD"),
            "GFX1250": int(target.device.arch == "gfx1250"), "SMEM": target.limit or 0})


def batch_list(options: Options) -> list[int]:
    if options.batch_sizes:
        return sorted(set(options.batch_sizes))
    lo, hi = DEFAULT_BATCH_RANGE
    return list(range(lo, hi + 1))


def batch_ranges(values: Sequence[int]) -> list[list[int]]:
    """[1, 2, 3, 8] -> [[1, 3], [8, 8]]."""
    out: list[list[int]] = []
    for v in values:
        if out and v == out[-1][1] + 1:
            out[-1][1] = v
        else:
            out.append([v, v])
    return out


def _append(rows: list[Row], m: int, row: Row) -> None:
    """Extend the last row when ``row`` is equal and follows it in the judged batch sizes (rows
    are appended in batch-size order, so the last row always ends at the previous size)."""
    if rows and rows[-1].same(row):
        rows[-1].m_to = m
    else:
        rows.append(row)


class RowBuilder:
    """Rows over the judged batch sizes: a new row is built (and judged) only when what the
    engine picks changes; equal neighbouring rows are merged."""

    def __init__(self, make: Callable[[int, tuple], Row]):
        self.rows: list[Row] = []
        self._make = make
        self._last: tuple | None = None

    def add(self, m: int, pick: tuple) -> None:
        if self.rows and pick == self._last:
            self.rows[-1].m_to = m
            return
        self._last = pick
        _append(self.rows, m, self._make(m, pick))


def _sorted_configs(cfg: Mapping) -> dict:
    order = list(TILE_KEYS) + ["GROUP_SIZE_M", "num_warps", "num_stages"]
    out = {k: cfg[k] for k in order if k in cfg}
    out.update({k: v for k, v in cfg.items() if k not in out})
    return out


class Doctor:
    def __init__(self, model: ModelShape, estimator: Estimator, options: Options | None = None):
        self.model = model
        self.options = options or Options()
        self.judge = Judge(estimator, self.options.triton_version)
        self.estimator = estimator
        self._memo: dict[tuple, tuple] = {}
        self._defaults: dict[tuple, tuple] = {}
        self._envs: dict[tuple, dict] = {}

    # -- public ------------------------------------------------------------------------------
    def run(self, profiles: Sequence[Profile], targets: Sequence[Target]) -> list[Section]:
        return [self.section(p, t) for p in profiles for t in targets]

    def section(self, profile: Profile, target: Target, env: Mapping[str, str] | None = None) -> Section:
        options = self.options
        source = package_source(profile, options.engine_path, options.auto_detect_engine)
        moe = moe_shape(self.model, profile, target.device, options.parallel, options.shared_expert_fusion)
        name = None
        if target.runtime_name:
            name = device_file_name(target.runtime_name, profile, bool(profile.moe.get("h200_fold")))
        section = Section(profile, target, source, name, moe)
        if target.runtime_name is None:
            section.notes.append(f"{target.key} is an architecture, not a card: it has no device name, so no "
                                 "device-specific table can match; the engine's default configs are judged "
                                 "(name a card, e.g. --target rtx5090, to check tuned files)")
        if moe and moe.fusion_note:
            section.notes.append(moe.fusion_note)
        env = options.env if env is None else env
        if moe is not None:
            section.kernels.extend(self._moe(profile, target, source, name, moe, env))
        if self.model.quant.block is not None and self.model.quant.dtype == "fp8_w8a8" and not self.model.quant.unsupported:
            section.kernels.extend(self._gemms(profile, target, source, moe))
        if self.model.is_mla:
            section.kernels.append(self._mla(profile, target))
        return section

    # -- fused MoE ---------------------------------------------------------------------------
    def moe_not_used(self, profile: Profile, target: Target) -> str | None:
        q = self.model.quant
        if q.unsupported:
            return f"{q.unsupported}: the engine does not use the Triton fused-MoE tables"
        if self.options.force_triton:
            return None
        dev = target.device
        marlin = profile.marlin
        if dev.vendor == "NVIDIA":
            cc = tuple(dev.compute_capability or (0, 0))
            if q.scheme == "group" and q.method not in ("moe_wna16", "--dtype") and cc >= tuple(marlin.get("weight_only_min_cc", (8, 0))):
                return (f"{q.method} weight-only experts run {profile.engine}'s Marlin MoE kernels on {dev.arch}, "
                        "not the Triton table (--force-triton to judge the Triton kernel anyway)")
            if q.dtype == "fp8_w8a8" and "fp8e4nv" not in (dev.triton_fp8_dtypes or ()):
                return (f"Triton has no fp8e4nv dot on {dev.arch}: {profile.engine} runs fp8 experts through its "
                        "weight-only fp8 (Marlin) path there, not the Triton table")
        return None

    def _moe(self, profile: Profile, target: Target, source: PackageSource, device_name: str | None,
             moe: MoeShape, env: Mapping[str, str]) -> list[KernelReport]:
        q = self.model.quant
        model = self.model
        rules = profile.moe
        dtype = q.dtype if q.is_quantised else model.activation_dtype
        dtype_name = rules.get("dtype_names", {}).get(dtype)
        up = KernelReport("moe_up", "fused MoE gate/up GEMM (w1)", "fused_moe_wna16" if q.scheme == "group" else "fused_moe",
                          f"N={2 * moe.N}, K={moe.K}")
        down = KernelReport("moe_down", "fused MoE down GEMM (w2)", up.kernel, f"N={moe.K}, K={moe.N}")
        reason = self.moe_not_used(profile, target)
        if reason:
            for k in (up, down):
                k.used, k.not_used = False, reason
            return [up, down]
        triton = self.options.triton_version or profile.assumed_triton_version
        funcs = self._funcs(profile)
        if device_name is not None:
            name = moe_file_name(profile, moe.E, moe.N, device_name, dtype_name, q.block, q.scheme == "per_channel")
            if funcs is not None and target.origin == "local":
                name = funcs.moe_file_name(moe, q, dtype_name, name)
            up.lookup = search_moe(profile, name, source, env, triton)
            if rules.get("down_tables"):
                down_name = name[: -len(".json")] + "_down.json"
                down.down_lookup = search_moe(profile, down_name, source, env, triton)
                if not down.down_lookup.found and not down.down_lookup.problem:
                    down.notes.append(f"no {down_name}: the down GEMM reuses the gate/up table's entry")
            down.lookup = up.lookup
        else:
            up.lookup = down.lookup = Lookup(None)
        for k in (up, down):
            if k.lookup.problem:
                k.problem = k.lookup.problem
        if down.down_lookup is not None and down.down_lookup.problem:
            down.problem = down.down_lookup.problem
        if up.problem:
            return [up, down]

        up_table = up.lookup.table
        up_keys = list(up_table) if up_table else []
        down_table = down.down_lookup.table if down.down_lookup is not None and down.down_lookup.found else None
        down_keys = list(down_table) if down_table else []
        drop = set(rules.get("drop_keys", []))
        force_bm = bool(rules.get("down_forces_up_block_m"))
        down_detail = "_down table; BLOCK_SIZE_M forced to the gate/up entry's" if force_bm else "_down table"

        def strip(cfg):
            return {k: v for k, v in cfg.items() if k not in drop} if isinstance(cfg, dict) and drop else cfg

        def make(m, pick, detail="", kind="moe"):
            src, key, case, cfg = pick
            return self._row(m, src, cfg, key, case, target, profile, kind, detail=detail)

        ups = RowBuilder(make)
        downs = RowBuilder(lambda m, pick: make(m, pick, down_detail, "moe_down") if down_table is not None
                           else make(m, pick))
        for m in batch_list(self.options):
            # judged with the whole entry: the keys the launcher pops (SGLang's USE_TMA) choose its kernel
            pick = self._up_pick(profile, target, moe, up_table, up_keys, m, lambda cfg: cfg)
            ups.add(m, pick)
            if down_table is None:
                # the down GEMM launches the gate/up config the engine already popped its keys from
                downs.add(m, pick[:3] + (strip(pick[3]),))
                continue
            dkey = nearest_key(down_keys, m)
            dcfg = down_table[dkey]
            up_cfg = pick[3]
            if force_bm and isinstance(dcfg, dict) and isinstance(up_cfg, dict) and "BLOCK_SIZE_M" in up_cfg:
                dcfg = {**dcfg, "BLOCK_SIZE_M": up_cfg["BLOCK_SIZE_M"]}
            downs.add(m, ("file", dkey, None, dcfg))
        up.rows, down.rows = ups.rows, downs.rows
        return [up, down]

    def _up_pick(self, profile: Profile, target: Target, moe: MoeShape, up_table, up_keys, m: int, strip) -> tuple:
        """The gate/up entry the engine launches at batch size ``m``: ("file", key, None, cfg) from
        its table (nearest key), else ("default", None, case, cfg) of its default-config rule."""
        if up_table is not None:
            key = nearest_key(up_keys, m)
            return ("file", key, None, strip(up_table[key]))
        case, cfg = self._moe_default(profile, target, moe, m)
        return ("default", None, case, cfg)

    def moe_launch_configs(self, profile: Profile, target: Target,
                           env: Mapping[str, str] | None = None) -> tuple[str | None, list[tuple[int, tuple]]]:
        """(the table's file name, or None; [(M, pick)] for every batch size of the options): the
        gate/up configs the engine's fused-MoE launcher gets on ``target``, found as the report
        finds them (same names, folders, nearest key and default rule), without estimating.
        ``pick`` is :meth:`_up_pick`'s; ``name`` is None when no table was found (default rule)."""
        options = self.options
        source = package_source(profile, options.engine_path, options.auto_detect_engine)
        moe = moe_shape(self.model, profile, target.device, options.parallel, options.shared_expert_fusion)
        if moe is None or self.moe_not_used(profile, target):
            return None, []
        env = options.env if env is None else env
        q = self.model.quant
        dtype = q.dtype if q.is_quantised else self.model.activation_dtype
        dtype_name = profile.moe.get("dtype_names", {}).get(dtype)
        table = None
        name = None
        if target.runtime_name:
            device_name = device_file_name(target.runtime_name, profile, bool(profile.moe.get("h200_fold")))
            name = moe_file_name(profile, moe.E, moe.N, device_name, dtype_name, q.block, q.scheme == "per_channel")
            found = search_moe(profile, name, source, env, self.options.triton_version or
                               profile.assumed_triton_version)
            table = found.table if found.found and not found.problem else None
        drop = set(profile.moe.get("drop_keys", []))

        def strip(cfg):
            return {k: v for k, v in cfg.items() if k not in drop} if isinstance(cfg, dict) and drop else cfg

        keys = list(table) if table else []
        picks = [(m, self._up_pick(profile, target, moe, table, keys, m, strip)) for m in batch_list(options)]
        return (name if table is not None else None), picks

    def _funcs(self, profile: Profile):
        funcs = (self.options.engine_functions or {}).get(profile.engine)
        return funcs if funcs is not None and funcs.ok else None

    def _moe_default(self, profile: Profile, target: Target, moe: MoeShape, m: int) -> tuple[str, dict]:
        funcs = self._funcs(profile)
        if funcs is not None:
            got = funcs.moe_default(m, moe, self.model.quant)
            if got is not None:
                return "engine's get_default_config (--allow-import)", got
        return self._default(profile.moe.defaults, self._env(target, m, moe.E, moe.N, moe.K, moe.top_k))

    def _env(self, target: Target, m: int, E: int, N: int, K: int, top_k: int) -> dict:
        """The formula environment at batch size ``m`` (the rest is built once per target and shape)."""
        key = (target.key, target.limit, E, N, K, top_k)
        base = self._envs.get(key)
        if base is None:
            base = self._envs[key] = _env_for(self.model, target, 0, E, N, K, top_k)
        env = dict(base)
        env["M"] = m
        return env

    def _default(self, cases, env: Mapping) -> tuple[str, dict]:
        """The first matching default case (memoised: many batch sizes share an environment
        up to M, and most cases do not read M at all)."""
        key = (id(cases), tuple(env.values()))
        hit = self._defaults.get(key)
        if hit is None:
            case, cfg = first_case(cases, env)
            hit = self._defaults[key] = (case.case, cfg)
        return hit[0], dict(hit[1])

    # -- block GEMM --------------------------------------------------------------------------
    def _gemms(self, profile: Profile, target: Target, source: PackageSource, moe: MoeShape | None) -> list[KernelReport]:
        q = self.model.quant
        rules = profile.block_gemm
        out = []
        gemms = dense_gemms(self.model, self.options.parallel, moe.fused_shared if moe else 0)
        reason = None
        dev = target.device
        if not self.options.force_triton:
            if dev.vendor == "NVIDIA" and "fp8e4nv" not in (dev.triton_fp8_dtypes or ()):
                reason = f"Triton has no fp8e4nv dot on {dev.arch}: the engine does not run the Triton block-fp8 GEMM there"
            elif dev.arch not in rules.get("triton_archs", []):
                reason = (f"{profile.engine} runs {rules.get('other_backend', 'another kernel')} on {dev.arch} "
                          "(--force-triton to judge the Triton kernel anyway)")
        name_dev = device_file_name(target.runtime_name, profile, bool(rules.get("h200_fold"))) if target.runtime_name else None
        for g in gemms:
            k = KernelReport("block_gemm", f"block-fp8 GEMM {g.label}", "block_gemm", f"N={g.N}, K={g.K}")
            if reason:
                k.used, k.not_used = False, reason
                out.append(k)
                continue
            if name_dev is not None:
                k.lookup = search_gemm(profile, gemm_file_name(profile, g.N, g.K, name_dev, q.block), source)
            else:
                k.lookup = Lookup(None)
            if k.lookup.problem:
                k.problem = k.lookup.problem
                out.append(k)
                continue
            table = k.lookup.table
            keys = list(table) if table else []

            def make(m, pick):
                src, key, case, cfg = pick
                if cfg is None:
                    return Row(m, m, "file", {}, FITS, key=key,
                               detail="null entry: the engine keeps its non-Triton kernel here")
                return self._row(m, src, self._gemm_adjust(profile, target, cfg), key, case, target, profile, "gemm")

            rows = RowBuilder(make)
            for m in batch_list(self.options):
                if table is not None:
                    key = nearest_key(keys, m)
                    rows.add(m, ("file", key, None, table[key]))
                else:
                    case, cfg = self._default(rules.defaults, self._env(target, m, 0, g.N, g.K, 0))
                    rows.add(m, ("default", None, case, cfg))
            k.rows = rows.rows
            out.append(k)
        return out

    def _gemm_adjust(self, profile: Profile, target: Target, cfg: Any) -> Any:
        """SGLang's fp8 loader raises BLOCK_SIZE_K to block_k where the profile says so."""
        form = profile.block_gemm.bk_raise
        if form is None or not isinstance(cfg, dict) or not isinstance(cfg.get("BLOCK_SIZE_K"), int):
            return cfg
        env = _env_for(self.model, target, 0, 0, 0, 0, 0)
        env["BK"] = cfg["BLOCK_SIZE_K"]
        bk = int(form(env))
        return cfg if bk == cfg["BLOCK_SIZE_K"] else {**cfg, "BLOCK_SIZE_K": bk}

    # -- MLA decode --------------------------------------------------------------------------
    def kv_dtype(self) -> tuple[str, str]:
        """(Triton dtype of the KV cache, where it came from)."""
        if self.options.kv_cache_dtype:
            return self.options.kv_cache_dtype, "--kv-cache-dtype"
        if self.model.kv_cache_dtype:
            return self.model.kv_cache_dtype, "the checkpoint's KV-cache scheme"
        act = self.model.activation_dtype if self.model.activation_dtype in ("bf16", "fp16") else "bf16"
        return act, "auto (the model dtype)"

    def mla_spec(self, profile: Profile, target: Target, kv: str) -> tuple[dict, KernelSpec]:
        model = self.model
        lk = model.kv_lora_rank + model.qk_rope_head_dim
        lv = model.kv_lora_rank
        blocks = mla_block_sizes(lk, lv)
        env = {"LK": lk, "BLOCK_DMODEL": blocks["BLOCK_DMODEL"], "HIP": int(target.device.vendor == "AMD")}
        params = profile.mla_params(env)
        heads = max((model.num_attention_heads or 16) // self.options.parallel.tp, 1)
        tile = {"BLOCK_N": params["BLOCK_N"], "BLOCK_H": params["BLOCK_H"],
                "BLOCK_DMODEL": blocks["BLOCK_DMODEL"], "BLOCK_DPE": blocks["BLOCK_DPE"]}
        act = model.activation_dtype if model.activation_dtype in ("bf16", "fp16") else "bf16"
        spec = make_spec("mla_decode", act, tile, num_warps=params["num_warps"], num_stages=params["num_stages"],
                         kv_dtype=kv, problem={"Lk": lk, "Lv": lv, "num_heads": heads, "num_kv_heads": 1},
                         engine=profile.engine if profile.engine in registry_engines("mla_decode") else None)
        cfg = {**tile, "num_warps": params["num_warps"], "num_stages": params["num_stages"]}
        return cfg, spec

    def _mla(self, profile: Profile, target: Target) -> KernelReport:
        model = self.model
        kv, kv_from = self.kv_dtype()
        lk = model.kv_lora_rank + model.qk_rope_head_dim
        k = KernelReport("mla_decode", f"MLA decode (Triton {profile.mla.get('kernel', 'grouped decode, stage 1')})",
                         "mla_decode", f"Lk={lk}, Lv={model.kv_lora_rank}, KV cache {kv} ({kv_from})")
        dev = target.device
        if not self.options.force_triton and dev.arch not in profile.mla.get("triton_archs", []):
            k.used = False
            k.not_used = (f"{profile.engine}'s default MLA backend on {dev.arch} is {profile.mla.get('other_backend', 'not Triton')} "
                          "(--force-triton to judge the Triton kernel anyway)")
            return k
        cfg, spec = self.mla_spec(profile, target, kv)
        verdict, nbytes, est, status, detail = self.judge.judge((spec,), target)
        m_to = batch_list(self.options)[-1]
        k.rows.append(Row(batch_list(self.options)[0], m_to, "fixed", cfg, verdict, nbytes, target.limit, est, status,
                          detail=detail or "launch parameters fixed in the engine's code, for every batch size"))
        if verdict == OVERFLOW:
            k.notes.extend(self._mla_remedies(profile, target, spec, kv))
        return k

    def _mla_remedies(self, profile: Profile, target: Target, spec: KernelSpec, kv: str) -> list[str]:
        """What would make an overflowing MLA decode fit, with its cost: its launch parameters are
        fixed in the engine's code, so no table (and no ``--write``) changes them."""
        notes = ["no tuning table sets this kernel's launch parameters: `--write` cannot fix it"]
        act = self.model.activation_dtype if self.model.activation_dtype in ("bf16", "fp16") else "bf16"
        if kv.startswith("fp8"):
            other, flag = act, "auto"
            cost = "twice the KV-cache memory of fp8, so about half as many tokens fit"
        else:
            other, flag = "fp8e4nv", "fp8_e4m3"
            cost = "half the KV-cache memory; the latent cache is stored in fp8 e4m3 (a small accuracy cost)"
        dev = target.device
        if dtypes.missing_fp8_type("fp8_w8a8" if other.startswith("fp8") else act, dev.triton_fp8_dtypes):
            notes.append(f"an fp8 KV cache is no way out on {dev.arch}: Triton has no {other} there")
        else:
            _cfg, alt = self.mla_spec(profile, target, other)
            v2, b2, e2, _, _ = self.judge.judge((alt,), target)
            notes.append(f"with --kv-cache-dtype {flag} ({other} KV cache) it needs {b2 if b2 is not None else '?'} B "
                         f"of {target.limit} ({v2}, {e2}); cost: {cost}")
        stages = spec.num_stages
        if stages and stages > 1:
            v3, b3, e3, _, _ = self.judge.judge((spec.with_(num_stages=1),), target)
            notes.append(f"with num_stages=1 instead of {stages} (an engine patch, as proposed in vllm-project/vllm "
                         f"PR#54013) it needs {b3 if b3 is not None else '?'} B ({v3}, {e3}); cost: one KV block in "
                         "flight instead of two, less overlap of loads with math (decode attention is memory-bound; "
                         "not measured here)")
        return notes

    # -- rows --------------------------------------------------------------------------------
    def specs_for(self, kind: str, cfg: Mapping, target: Target, profile: Profile) -> tuple[KernelSpec, ...]:
        if kind in ("moe", "moe_down"):
            return moe_specs(self.model, cfg, target, profile.engine, down=kind == "moe_down")
        return gemm_specs(self.model, cfg, target, profile.engine)

    def _row(self, m: int, source: str, cfg: Any, key: int | None, case: str | None, target: Target,
             profile: Profile, kind: str, detail: str = "") -> Row:
        if not isinstance(cfg, dict):
            return Row(m, m, source, {"value": cfg}, OVERFLOW, key=key, case=case, limit=target.limit,
                       detail=f"entry is {type(cfg).__name__}, not an object: the launch fails")
        frozen = (kind, tuple(sorted((k, repr(v)) for k, v in cfg.items())), target.device.arch,
                  target.device.vendor, target.limit, profile.engine)
        hit = self._memo.get(frozen)
        if hit is None:
            specs = self.specs_for(kind, cfg, target, profile)
            if not specs:
                hit = (UNKNOWN, None, None, None, "entry is not launchable as written (missing or invalid tile sizes)")
            else:
                hit = self.judge.judge(specs, target)
            self._memo[frozen] = hit
        verdict, nbytes, est, status, jdetail = hit
        return Row(m, m, source, _sorted_configs(cfg), verdict, nbytes, target.limit, est, status, key, case,
                   "; ".join(x for x in (detail, jdetail) if x))


# --------------------------------------------------------------------------------------------
# the whole report


@dataclass
class Written:
    engine: str
    target: str
    path: str
    name: str
    export: str | None
    entries: int
    changed: int
    check_exit: int | None = None
    check_messages: list[str] = field(default_factory=list)
    verified: bool | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(vars(self))


@dataclass
class DoctorReport:
    model: ModelShape
    options: Options
    estimator_mode: str
    exact_available: bool
    sections: list[Section]
    notes: list[str] = field(default_factory=list)
    written: list[Written] = field(default_factory=list)
    write_problems: list[str] = field(default_factory=list)
    write_skipped: list[str] = field(default_factory=list)  # --write: tables left out, nothing to change

    @property
    def overflows(self) -> bool:
        return any(s.overflows for s in self.sections)

    @property
    def exit_code(self) -> int:
        if any(p.startswith(WRITE_FAILED) for p in self.write_problems):
            return 2  # the folder or a file could not be written (an OS error, not a verdict)
        if self.write_problems or any(w.check_exit not in (0, None) for w in self.written):
            return 1
        return 1 if self.overflows or any(s.fails for s in self.sections) else 0

    def to_json(self) -> dict:
        o = self.options
        return {
            "model": self.model.to_json(),
            "parallel": {"tp_size": o.parallel.tp, "ep_size": o.parallel.ep, "moe_tp_size": o.parallel.moe_tp},
            "triton_version": o.triton_version, "triton_version_from": o.triton_version_origin,
            "estimator": self.estimator_mode, "exact_estimator_available": self.exact_available,
            "batch_sizes": batch_ranges(batch_list(o)),
            "overflows": self.overflows, "exit_code": self.exit_code, "notes": self.notes,
            "sections": [s.to_json() for s in self.sections],
            "written": [w.to_json() for w in self.written], "write_problems": self.write_problems,
            "write_skipped": self.write_skipped,
        }

