"""``tilefit probe``: the shared memory of a kernel over a sweep, per arch, and which devices fit.

The five-minute diagnosis without a server: build the kernel specialisations of a sweep
(:func:`build_points`), compile each for each arch ahead of time (exact, cached, parallel; the
analytic model when Triton is missing, labelled as such), and judge every point against the
device database's per-block limits. Optionally compile the engine's own kernel next to ours
(:mod:`tilefit.smem.engine_kernels`) and launch each point on the local GPU
(:func:`launch_point`).

Nothing here imports triton or torch at import time.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from ..dtypes import PATHS as DTYPE_PATHS
from ..kernels import registry
from ..kernels.spec import KernelSpec

# sweepable launch options -> canonical name (tile constexprs: each family's ``probe.sweep``)
LAUNCH_SWEEPS = {
    "num_stages": "num_stages", "s": "num_stages", "stages": "num_stages",
    "num_warps": "num_warps", "w": "num_warps", "warps": "num_warps",
}
LAUNCH_SHORT = {"num_stages": "num_stages", "num_warps": "num_warps"}


def sweep_names(kernel: str | None = None) -> dict[str, str]:
    """Sweepable names -> canonical name: the launch options and the tile constexprs of
    ``kernel`` (of every family when None)."""
    out = dict(LAUNCH_SWEEPS)
    for fam in (registry.families() if kernel is None else [registry.get(kernel)]):
        out.update((fam.probe_data.get("sweep") or {}))
        out.update((name.lower(), name) for name in fam.tile_names)
    return out


def short_label(kernel: str, name: str) -> str:
    labels = registry.get(kernel).probe_data.get("labels") or {}
    return LAUNCH_SHORT.get(name) or labels.get(name, name)


class ProbeError(ValueError):
    """A bad probe request (exit code 2)."""


def parse_values(text: str) -> list[int]:
    """``"1..5"`` -> [1, 2, 3, 4, 5]; ``"16,32..64"`` -> [16, 32, 64] (a range of powers of two
    when both ends are powers of two larger than 8, else of integers)."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)\s*\.\.\s*(\d+)", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise ProbeError(f"empty range {part!r}")
            pow2 = lo >= 16 and lo & (lo - 1) == 0 and hi & (hi - 1) == 0
            if pow2:
                v = lo
                while v <= hi:
                    out.append(v)
                    v *= 2
            else:
                out.extend(range(lo, hi + 1))
        elif part.isdigit():
            out.append(int(part))
        else:
            raise ProbeError(f"not a number or range: {part!r}")
    if not out:
        raise ProbeError(f"no values in {text!r}")
    return list(dict.fromkeys(out))


def parse_sweep(items: Iterable[str], kernel: str | None = None) -> dict[str, list[int]]:
    names = sweep_names(kernel)
    sweeps: dict[str, list[int]] = {}
    for item in items:
        if "=" not in item:
            raise ProbeError(f"--sweep takes NAME=VALUES (num_stages=1..5), got {item!r}")
        name, values = item.split("=", 1)
        key = names.get(name.strip().lower()) or names.get(name.strip())
        if key is None:
            raise ProbeError(f"cannot sweep {name!r}; choose from {', '.join(sorted(set(names.values())))}")
        sweeps[key] = parse_values(values)
    return sweeps


WARPS = (1, 2, 4, 8, 16, 32)


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def parse_tile(kernel: str, text: str) -> list[int]:
    """``--tile``: every block size of the kernel family (a power of two, at least 16: ``tl.dot``'s
    smallest), then its group size where it has one (GROUP_SIZE_M, optional, at least 1)."""
    fam = registry.find(kernel)
    if fam is None:
        raise ProbeError(f"unknown kernel {kernel!r}; known: {', '.join(registry.names())}")
    names = tuple(fam.tile_names)
    group = fam.group_name
    wanted = ",".join(names) + (f"[,{group}]" if group else "")
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise ProbeError(f"--tile {text!r}: takes integers {wanted} for {kernel}") from None
    if not len(names) <= len(values) <= len(names) + (1 if group else 0):
        raise ProbeError(f"--tile {text!r}: {kernel} takes {wanted} ({len(values)} value"
                         f"{'s' if len(values) != 1 else ''} given)")
    for name, v in zip(names, values):
        if not _pow2(v) or v < 16:
            raise ProbeError(f"--tile: {name}={v} must be a power of two of at least 16")
    if len(values) > len(names) and values[-1] < 1:
        raise ProbeError(f"--tile: {group}={values[-1]} must be at least 1")
    return values


def validate_request(req: "ProbeRequest") -> None:
    """num_warps powers of two up to 32, num_stages of at least 1, swept block sizes like --tile."""
    warps = list(req.warps) + list(req.sweeps.get("num_warps", []))
    for w in warps:
        if w not in WARPS:
            raise ProbeError(f"num_warps={w}: Triton takes a power of two from 1 to 32")
    for st in list(req.stages) + list(req.sweeps.get("num_stages", [])):
        if st < 1:
            raise ProbeError(f"num_stages={st}: must be at least 1")
    for name, values in req.sweeps.items():
        if name.startswith("BLOCK"):
            for v in values:
                if not _pow2(v) or v < 16:
                    raise ProbeError(f"--sweep {name}={v}: a block size must be a power of two of at least 16")


def split_list(values: Iterable[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out.extend(p.strip() for p in str(v).split(",") if p.strip())
    return out


@dataclass
class ProbePoint:
    spec: KernelSpec
    arch: str
    labels: dict  # the swept and varied values that name this point
    shared: int | None = None
    source: str = ""  # "exact", "analytic (calibrated)", ...
    error: str | None = None  # one line, for tables
    full_error: str | None = None  # the compiler's whole message
    engine: dict | None = None
    launch: dict | None = None

    def to_json(self, devices: Sequence) -> dict:
        t = self.spec.tile_dict
        out = {"kernel": self.spec.kernel, "dtype": self.spec.dtype, "quant": self.spec.quant,
               "block_shape": list(self.spec.block_shape) if self.spec.block_shape else None,
               "kv_dtype": self.spec.kv_dtype, "tile": t, "num_warps": self.spec.num_warps,
               "num_stages": self.spec.num_stages, "swap_ab": self.spec.swap_ab, "arch": self.arch,
               "shared_bytes": self.shared, "estimator": self.source, "error": self.error,
               "fits": {d.key: (None if self.shared is None else self.shared <= d.smem_per_block_optin)
                        for d in devices if d.arch == self.arch}}
        if self.engine is not None:
            out["engine"] = self.engine
        if self.launch is not None:
            out["launch"] = self.launch
        return out


@dataclass
class ProbeRequest:
    kernel: str
    dtypes: list[str] = field(default_factory=list)
    kv_dtypes: list[str] = field(default_factory=list)
    quant: str | None = None
    block_shape: tuple[int, int] | None = None
    tile: list[int] = field(default_factory=list)
    warps: list[int] = field(default_factory=list)
    stages: list[int] = field(default_factory=list)
    sweeps: dict[str, list[int]] = field(default_factory=dict)
    archs: list[str] = field(default_factory=list)
    swap_ab: bool = False
    heads: tuple[int, int] = (576, 512)  # MLA decode: (Lk, Lv)


def build_points(req: ProbeRequest) -> list[ProbePoint]:
    """Every (spec, arch) of the request, with the labels that tell the points apart (the spec of
    each from its kernel family's :meth:`~tilefit.kernels.KernelFamily.probe_spec`)."""
    fam = registry.find(req.kernel)
    if fam is None:
        raise ProbeError(f"unknown kernel {req.kernel!r}; known: {', '.join(registry.names())}")
    by_query = fam.dtype_kind == "query"  # MLA decode: the query's dtype x the KV cache's
    # --warps/--stages with several values sweep too (before the explicit sweeps: the last swept
    # name makes the table's columns); with one value they are fixed
    sweeps: dict[str, list[int]] = {}
    fixed: dict[str, int] = {}
    for name, values in (("num_warps", req.warps), ("num_stages", req.stages)):
        if values and name not in req.sweeps:
            if len(values) > 1:
                sweeps[name] = list(values)
            else:
                fixed[name] = values[0]
    sweeps.update(req.sweeps)
    names = fam.tile_names
    probe = fam.probe_data
    defaults = list(probe.get("tile_defaults") or [64] * len(names))
    if by_query:
        dtypes = req.dtypes or list(probe.get("dtypes") or ["bf16"])
        kvs = req.kv_dtypes or list(probe.get("kv_dtypes") or ["bf16"])
        for option, given, known in (("--dtype", dtypes, fam.dtypes), ("--kv-dtype", kvs, fam.kv_dtypes)):
            for d in given:
                if known and d not in known:
                    raise ProbeError(f"{option} {d!r}: {req.kernel} takes {', '.join(known)}")
        variants = [(d, kv) for d in dtypes for kv in kvs]
    else:
        dtypes = req.dtypes or list(probe.get("dtypes") or ["bf16"])
        for d in dtypes:
            if d not in DTYPE_PATHS:
                raise ProbeError(f"unknown dtype path {d!r}; known: {', '.join(DTYPE_PATHS)}")
        variants = [(d, None) for d in dtypes]
    tile = list(req.tile) if req.tile else []
    has_group = fam.group_name is not None
    if len(tile) > len(names) + (1 if has_group else 0):
        raise ProbeError(f"--tile takes {','.join(names)} for {req.kernel}")
    base = dict(zip(names, tile + defaults[len(tile):]))
    group = tile[len(names)] if has_group and len(tile) == len(names) + 1 else 1
    for k in sweeps:
        if k not in ("num_warps", "num_stages") and k not in names:
            raise ProbeError(f"{req.kernel} has no {k} to sweep")
    sweep_keys = list(sweeps)
    combos = list(itertools.product(*(sweeps[k] for k in sweep_keys))) if sweep_keys else [()]
    archs = req.archs or ["sm_89"]
    points: list[ProbePoint] = []
    multi_variant = len(variants) > 1
    for arch in archs:
        for dtype, kv in variants:
            for combo in combos:
                values = dict(zip(sweep_keys, combo))
                t = dict(base)
                t.update({k: v for k, v in values.items() if k in names})
                warps = values.get("num_warps", fixed.get("num_warps", 4))
                stages = values.get("num_stages", fixed.get("num_stages", 2 if arch.startswith("gfx") else 3))
                labels = {short_label(req.kernel, k): v for k, v in values.items()}
                if multi_variant:
                    labels = {("kv" if by_query else "dtype"): (kv if by_query else dtype), **labels}
                spec = fam.probe_spec(dtype=dtype, kv_dtype=kv, tile=t, group=group, num_warps=warps,
                                      num_stages=stages, quant=req.quant, block_shape=req.block_shape,
                                      swap_ab=req.swap_ab, heads=req.heads)
                points.append(ProbePoint(spec, arch, labels))
    return points


# ------------------------------------------------------------------------------------------------
# estimating


def estimate_points(points: Sequence[ProbePoint], mode: str = "auto", jobs: int | None = None,
                    triton_version: str | None = None, progress=None) -> str:
    """Fill in ``shared``/``source``/``error``. ``mode``: ``exact`` (needs Triton), ``analytic``,
    or ``auto`` (exact when Triton is installed). ``progress``: a :class:`tilefit.progress.Progress`
    told of every compiled (or cached) point. Returns the mode used."""
    from .. import versions

    if any(p.spec.engine for p in points):
        raise ValueError("points of an engine's kernel are estimated by tilefit.estimate (probe --engine)")
    if mode == "auto":
        mode = "exact" if versions.installed_triton() is not None else "analytic"
    if mode == "exact":
        from ..kernels import launch_plan
        from .cache import ExactEstimator

        est = ExactEstimator()
        items = []
        for p in points:
            try:
                launch_plan(p.spec)
            except ValueError as exc:
                p.error = str(exc)
                continue
            items.append((p.spec, p.arch))
        if progress is not None:
            progress.phase("compiling", total=len(set(items)), compiles=True)
        results = est.many(items, jobs=jobs, progress=progress.update if progress is not None else None)
        for p in points:
            if p.error:
                continue
            r = results[(p.spec, p.arch)]
            if r.error is None:
                p.shared, p.source = int(r.shared_bytes), "exact"
            else:
                p.error = _first_line(r.error)
                p.full_error = r.error.strip() or None
                p.source = "exact"
        return mode
    from .analytic import ModelError, load_model

    model = load_model(triton_version)
    for p in points:
        try:
            est = model.estimate(p.spec, p.arch)
        except ModelError as exc:
            p.error = str(exc)
            continue
        p.shared, p.source = est.shared_bytes, f"analytic ({est.status})"
    return mode


def _first_line(text: str) -> str:
    """The line of a compiler message that says what went wrong: the last one naming an error
    (Triton's ``CompilationError: at 1:0:`` header only says where)."""
    for line in reversed(text.splitlines()):
        low = line.lower()
        if "error" in low and len(line) < 300 and not re.match(r"\s*compilationerror: at \d+:\d+:?\s*$", low):
            return line.strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else text)[:300]


def compare_engine(points: Sequence[ProbePoint], source: str) -> str:
    """Compile the engine's kernel for every point; returns a description of what was found."""
    from .engine_kernels import EngineKernels

    ek = EngineKernels(source)
    described = {}
    for p in points:
        if p.spec.kernel not in described:
            described[p.spec.kernel] = ek.describe(p.spec.kernel)
        r = ek.compile(p.spec, p.arch)
        p.engine = r.to_json()
    return "; ".join(described.values())


# ------------------------------------------------------------------------------------------------
# launching on the local GPU


def local_gpu_arch() -> str | None:
    """``sm_XY`` / ``gfxNNN`` of the local GPU, None without one (or without torch)."""
    try:
        import torch
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        if getattr(torch.version, "hip", None):
            name = torch.cuda.get_device_properties(0).gcnArchName
            return name.split(":")[0]
        major, minor = torch.cuda.get_device_capability(0)
        return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 - a broken driver is "no GPU"
        return None


def launch_case(spec: KernelSpec) -> dict:
    """The numerical-check case (its family's ``check.py``) that launches ``spec`` with real tensors."""
    return registry.get(spec.kernel).launch_case(spec)


_OOR = re.compile(r"Required:\s*(\d+)")


def launch_point(spec: KernelSpec) -> dict:
    """Launch ``spec``'s reference kernel on the local GPU: ``{"outcome": "ok" | "OutOfResources"
    | "error", "required": bytes, "limit": bytes, "detail": ...}``."""
    from tilefit.kernels.checks import run_case

    result = run_case(launch_case(spec), device="cuda")
    if result.get("error"):
        msg = result["error"]
        if "OutOfResources" in msg or "out of resource" in msg:
            m = _OOR.search(msg)
            lim = re.search(r"Hardware limit:\s*(\d+)", msg)
            return {"outcome": "OutOfResources", "required": int(m.group(1)) if m else None,
                    "limit": int(lim.group(1)) if lim else None, "detail": msg[-300:]}
        return {"outcome": "error", "detail": msg[-300:]}
    return {"outcome": "ok", "numerics_ok": bool(result.get("ok")), "max_rel_err": result.get("err")}


# ------------------------------------------------------------------------------------------------
# devices


def arch_devices(db, archs: Sequence[str], targets: Sequence[str] = ()) -> dict[str, list]:
    """Per arch, the cards of the database (or of ``targets``) with a known per-block limit, by
    limit; within a limit the targets in the order given, else the best-known cards first."""
    if targets:
        pool = []
        for t in targets:
            pool.extend(db.resolve_target(t))
    else:
        from tilefit.devicerank import known_first

        pool = known_first(db.devices)
    out: dict[str, list] = {a: [] for a in archs}
    seen = set()
    for d in pool:
        if d.arch in out and d.smem_per_block_optin and d.key not in seen and (d.is_card or targets):
            seen.add(d.key)
            out[d.arch].append(d)
    for a in out:
        out[a].sort(key=lambda d: d.smem_per_block_optin)  # stable: the order above within a limit
    return out


def limit_groups(devices: Sequence) -> list[tuple[int, list]]:
    groups: dict[int, list] = {}
    for d in devices:
        groups.setdefault(int(d.smem_per_block_optin), []).append(d)
    return sorted(groups.items())


def short_name(dev) -> str:
    name = dev.name or dev.key
    for prefix in ("NVIDIA GeForce ", "NVIDIA ", "AMD Instinct ", "AMD Radeon ", "AMD "):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


# ------------------------------------------------------------------------------------------------
# rendering


def _fmt_labels(labels: Mapping) -> str:
    return " ".join(f"{k}={v}" for k, v in labels.items())


def render_text(points: Sequence[ProbePoint], devices: Mapping[str, list], req: ProbeRequest, mode: str,
                triton: str | None, engine_desc: str | None = None, launched: str | None = None) -> str:
    lines: list[str] = []
    first = points[0].spec
    what = registry.get(first.kernel).title(first)
    swept = [k for k in points[0].labels]
    fixed = []
    if "num_warps" not in swept:
        fixed.append(f"num_warps={first.num_warps}")
    if "num_stages" not in swept:
        fixed.append(f"num_stages={first.num_stages}")
    from .. import versions

    why = "--estimator analytic" if versions.installed_triton() else "Triton not installed"
    if mode == "engine":
        how = "the engine's kernel: its compiles and the closed forms proven on them (sources below)"
    else:
        how = "exact compiles" if mode == "exact" else f"ANALYTIC MODEL ({why}: closed forms, not compiles)"
        # these are not the figures a runtime error of an engine prints: say whose kernel, and how to get those
        engines = registry.get(first.kernel).engine_launchers()
        how += " of tilefit's reference kernel" + (
            f" (the engine's own: --engine {'|'.join(sorted(engines))})" if engines else "")
    lines.append(f"{what}{', ' + ', '.join(fixed) if fixed else ''}")
    lines.append(f"shared memory per block in bytes, Triton {triton or '?'}, {how}")
    lines.append("")
    # pivot: rows = arch x (non-column labels), columns = the last swept label
    col_key = swept[-1] if swept else None
    row_keys = swept[:-1] if swept else []
    cols = list(dict.fromkeys(p.labels.get(col_key) for p in points)) if col_key else [None]
    rows: dict[tuple, dict] = {}
    for p in points:
        rk = (p.arch,) + tuple(p.labels.get(k) for k in row_keys)
        rows.setdefault(rk, {})[p.labels.get(col_key) if col_key else None] = p
    head = ["arch"] + row_keys + ([f"{col_key}={c}" for c in cols] if col_key else ["bytes"])
    table = [head]
    for rk, cells in rows.items():
        arch = rk[0]
        lims = [lim for lim, _ in limit_groups(devices.get(arch, []))]
        row = [arch] + [str(v) for v in rk[1:]]
        for c in cols:
            p = cells.get(c)
            if p is None:
                row.append("")
            elif p.shared is None:
                row.append("failed")
            else:
                mark = "*" if lims and p.shared > lims[0] else ""
                row.append(f"{p.shared}{mark}")
        table.append(row)
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        lines.append("  ".join(c.rjust(w) if i >= 1 + len(row_keys) else c.ljust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    if any(p.shared is not None and devices.get(p.arch) and p.shared > limit_groups(devices[p.arch])[0][0]
           for p in points):
        lines.append("* more than the smallest per-block limit of that arch's devices")
    lines.append("")
    lines.append("fits (per-block opt-in limit):")
    for arch in dict.fromkeys(p.arch for p in points):
        groups = limit_groups(devices.get(arch, []))
        if not groups:
            lines.append(f"  {arch}: no device of the database with a known limit")
            continue
        mine = [p for p in points if p.arch == arch]
        for lim, devs in groups:
            names = ", ".join(short_name(d) for d in devs[:5]) + (f", +{len(devs) - 5}" if len(devs) > 5 else "")
            lines.append(f"  {arch} {lim} B ({names}):")
            by_row: dict[tuple, list[ProbePoint]] = {}
            for p in mine:
                by_row.setdefault(tuple((k, p.labels.get(k)) for k in row_keys), []).append(p)
            for rk, ps in by_row.items():
                prefix = " ".join(f"{k}={v}" for k, v in rk)
                fit = [p for p in ps if p.shared is not None and p.shared <= lim]
                over = [p for p in ps if p.shared is not None and p.shared > lim]

                def vals(sel):
                    if col_key is None:
                        return "yes" if sel else ""
                    return f"{col_key} " + ", ".join(str(p.labels.get(col_key)) for p in sel)
                parts = []
                if col_key is None:
                    parts.append("fits" if fit else "overflows" if over else "not compiled")
                else:
                    parts.append(f"fits {vals(fit)}" if fit else "fits none")
                    if over:
                        parts.append(f"overflows {vals(over)}")
                lines.append(f"    {(prefix + ': ') if prefix else ''}{'; '.join(parts)}")
    if mode == "engine":
        lines.append("")
        lines.append("figures from:")
        by_source: dict[str, list[str]] = {}
        for p in points:
            if p.shared is not None:
                by_source.setdefault(p.source, []).append(p.arch)
        for src, archs in by_source.items():
            lines.append(f"  {src}")
    failed = [p for p in points if p.shared is None]
    if failed:
        lines.append("")
        lines.append("did not compile:")
        for p in failed[:12]:
            lines.append(f"  {p.arch} {_fmt_labels(p.labels)}: {p.error}")
    if engine_desc is not None:
        lines.append("")
        lines.append(f"engine kernel: {engine_desc}")
        diff = [p for p in points if p.engine and p.engine.get("shared_bytes") is not None and p.shared is not None
                and p.engine["shared_bytes"] != p.shared]
        same = [p for p in points if p.engine and p.engine.get("shared_bytes") == p.shared and p.shared is not None]
        bad = [p for p in points if p.engine and p.engine.get("shared_bytes") is None]
        lines.append(f"  {len(same)} points equal, {len(diff)} differ, {len(bad)} not compiled")
        for p in diff:
            e = p.engine["shared_bytes"]
            lines.append(f"  {p.arch} {_fmt_labels(p.labels) or ''}: ours {p.shared}, engine {e} "
                         f"({e - p.shared:+d})")
        for p in bad[:6]:
            lines.append(f"  {p.arch} {_fmt_labels(p.labels) or ''}: {p.engine.get('error')}")
        guessed = next((p.engine.get("guessed") for p in points if p.engine and p.engine.get("guessed")), None)
        dropped = next((p.engine.get("dropped") for p in points if p.engine and p.engine.get("dropped")), None)
        if guessed:
            lines.append(f"  parameters our launch does not pass, guessed: {', '.join(guessed)}")
        if dropped:
            lines.append(f"  our arguments the engine kernel lacks, dropped: {', '.join(dropped)}")
    if launched is not None:
        lines.append("")
        lines.append(f"launched on the local GPU ({launched}):")
        for p in points:
            if p.launch is None:
                continue
            r = p.launch
            got = r["outcome"]
            if got == "OutOfResources":
                got += f" (Required: {r.get('required')}, Hardware limit: {r.get('limit')})"
            lines.append(f"  {p.arch} {_fmt_labels(p.labels)}: predicted {p.shared}, launch {got}")
    return "\n".join(lines) + "\n"
