"""Rendering a :class:`tilefit.doctor.core.DoctorReport`: a readable text report and JSON."""

from __future__ import annotations

import json

from ..words import plural
from .core import FITS, OVERFLOW, UNCERTAIN, UNKNOWN, DoctorReport, KernelReport, Row, Section, config_text

_VERDICT = {FITS: "fits", OVERFLOW: "OVERFLOW", UNKNOWN: "unknown", UNCERTAIN: "overflow?"}


def _m(row: Row) -> str:
    return f"M {row.m_from}" if row.m_from == row.m_to else f"M {row.m_from}-{row.m_to}"


def _row_line(row: Row, vendor: str | None = None) -> str:
    src = {"file": f"file[{row.key}]", "default": "default", "fixed": "fixed"}.get(row.source, row.source)
    nbytes = f"{row.shared_bytes:>7} B" if row.shared_bytes is not None else "      ? B"
    verdict = _VERDICT.get(row.verdict, row.verdict)
    extra = ""
    if row.verdict == OVERFLOW and row.shared_bytes is not None and row.limit:
        extra = f" by {row.shared_bytes - row.limit} B"
    est = f" [{row.estimator}]" if row.estimator else ""
    line = f"      {_m(row):<13} {src:<11} {config_text(row.config, vendor):<28} {nbytes}  {verdict}{extra}{est}"
    if row.detail and row.verdict != FITS:
        line += f"  ({row.detail})"
    return line


def _lookup_lines(k: KernelReport, indent: str = "    ") -> list[str]:
    out = []
    lk = k.lookup
    if lk is None:
        return out
    if lk.name is None:
        out.append(f"{indent}table: none (no device name to build it from): the engine's defaults")
        return out
    out.append(f"{indent}table {lk.name}")
    for p in lk.probes:
        mark = "found" if p.found else "-"
        note = f" ({p.note})" if p.note else ""
        out.append(f"{indent}  {mark:<5} {p.where}{note}")
    if lk.problem:
        out.append(f"{indent}  -> the engine fails: {lk.problem}")
    elif lk.found:
        out.append(f"{indent}  -> loads {lk.path}")
    else:
        out.append(f"{indent}  -> not found: the engine's default config")
    return out


def _kernel_lines(k: KernelReport, show_lookup: bool, vendor: str | None = None) -> list[str]:
    out = [f"    {k.label}  ({k.shape})"]
    if not k.used:
        out.append(f"      not used here: {k.not_used}")
        return out
    if show_lookup:
        out.extend(_lookup_lines(k, "      "))
    if k.down_lookup is not None and k.down_lookup.found:
        out.append(f"      _down table: loads {k.down_lookup.path}")
    if k.problem:
        out.append(f"      ENGINE FAILS: {k.problem}")
    for row in k.rows:
        out.append(_row_line(row, vendor))
    for note in k.notes:
        out.append(f"      note: {note}")
    return out


def _section_lines(s: Section) -> list[str]:
    out = [f"{s.profile.label} on {s.target.describe()}"]
    if s.moe is not None:
        out.append(f"  MoE as {s.profile.engine} runs it: {s.moe.describe()}"
                   + (f"; device name in file names: {s.device_name}" if s.device_name else ""))
    out.append(f"  tables from: {s.source.label}")
    for note in s.notes:
        out.append(f"  note: {note}")
    shown = set()
    for k in s.kernels:
        key = id(k.lookup) if k.lookup is not None else None
        show = key is not None and key not in shown
        if key is not None:
            shown.add(key)
        out.extend(_kernel_lines(k, show, s.target.device.vendor))
    failing = [k for k in s.kernels if k.fails]
    if failing:
        # the engine raises before launching anything: not an OutOfResources verdict
        out.append("  VERDICT: the engine fails before launching the kernel (not a shared-memory problem):")
        out.extend(f"    - {k.label}: {k.problem}" for k in failing)
    bad = [k for k in s.kernels if k.overflows]
    if bad:
        worst = []
        for k in bad:
            rows = [r for r in k.rows if r.verdict == OVERFLOW]
            r = max(rows, key=lambda r: r.shared_bytes or 0)
            need = f"needs {r.shared_bytes} B > {r.limit} B" if r.shared_bytes is not None else r.detail
            ms = ", ".join(_m(x) for x in rows[:4]) + (" ..." if len(rows) > 4 else "")
            worst.append(f"{k.label} {need} at {ms}")
        out.append("  VERDICT: OutOfResources (shared memory) -- the server crashes when it launches:")
        out.extend(f"    - {w}" for w in worst)
    elif not failing:
        unknown = [k for k in s.kernels if k.used and any(r.verdict in (UNKNOWN, UNCERTAIN) for r in k.rows)]
        if unknown:
            out.append("  VERDICT: no overflow found, but not every kernel could be judged: "
                       + ", ".join(k.label for k in unknown))
        else:
            out.append("  VERDICT: fits" + ("" if any(k.used for k in s.kernels) else " (no Triton kernel of this model "
                                                                                    "runs here)"))
    return out


def _ranges(values) -> str:
    out, start, prev = [], None, None
    for v in list(values) + [None]:
        if v is not None and prev is not None and v == prev + 1:
            prev = v
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = v
    return ",".join(out)


def render_text(report: DoctorReport) -> str:
    m = report.model
    o = report.options
    lines = [f"tilefit doctor: {m.architecture or m.model_type or 'model'}  ({m.source})"]
    if m.is_moe:
        shared = f" + {m.n_shared_experts} shared" if m.n_shared_experts else ""
        lines.append(f"  MoE:         {m.num_experts} experts{shared}, top-{m.top_k}, expert intermediate "
                     f"{m.moe_intermediate_size}, hidden {m.hidden_size}")
    else:
        lines.append("  MoE:         none")
    if m.is_mla:
        heads = (f"{m.num_attention_heads} heads" if m.num_attention_heads else
                 "heads not in the config (16 assumed; --shape heads=N)")
        lines.append(f"  MLA:         kv_lora_rank {m.kv_lora_rank}, qk_rope_head_dim {m.qk_rope_head_dim}, {heads}")
    lines.append(f"  weights:     {m.quant.describe()}; activations {m.activation_dtype}")
    lines.append(f"  parallelism: TP {o.parallel.tp}, EP {o.parallel.ep} (MoE TP {o.parallel.moe_tp})")
    tv = o.triton_version or "unknown"
    lines.append(f"  Triton:      {tv} ({o.triton_version_origin})")
    exact = ("exact compiles available" if report.exact_available else
             "no exact compiles (--estimator analytic)" if report.estimator_mode == "analytic" else
             "no exact compiles (Triton not installed)")
    lines.append(f"  estimator:   {report.estimator_mode} ({exact})")
    bs = o.batch_sizes
    lines.append(f"  batch sizes: {'1-4096' if not bs else _ranges(bs)}  (w/s marked * are Triton's launch defaults)")
    for note in list(m.notes) + report.notes:
        lines.append(f"  note: {note}")
    for s in report.sections:
        lines.append("")
        lines.extend(_section_lines(s))
    lines.append("")
    if report.written:
        lines.append("Written:")
        exports = []
        for w in report.written:
            status = "passes tilefit check" if w.check_exit == 0 else f"tilefit check exit {w.check_exit}"
            ver = {True: ", verified", False: ", VERIFICATION FAILED", None: ""}[w.verified]
            lines.append(f"  {w.path}")
            lines.append(f"    {w.engine} on {w.target}: {plural(w.entries, 'entry', 'entries')}, {w.changed} changed; "
                         f"{status}{ver}")
            for n in w.notes:
                lines.append(f"    note: {n}")
            for msg in w.check_messages:
                lines.append(f"    check: {msg}")
            if w.export and w.export not in exports:
                exports.append(w.export)
        if exports:
            lines.append("Before starting the server:")
            lines.extend(f"  {e}" for e in exports)
    for p in report.write_skipped:
        lines.append(f"Not written: {p}")
    for p in report.write_problems:
        lines.append(f"write problem: {p}")
    bad = [s for s in report.sections if s.overflows]
    failing = [s for s in report.sections if s.fails]
    n = len(report.sections)
    if bad:
        lines.append(f"Result: {len(bad)} of {plural(n, 'engine/target combination')} "
                     f"overflow{'s' if len(bad) == 1 else ''} shared memory.")
        tables = [k for s in bad for k in s.kernels if k.overflows and k.role != "mla_decode"]
        fixed = [k for s in bad for k in s.kernels if k.overflows and k.role == "mla_decode"]
        if tables and not report.written:
            lines.append("  `tilefit doctor ... --write DIR` writes fitting tables where the engine reads them.")
        if fixed:
            lines.append("  MLA decode's launch parameters are fixed in the engine's code: no table changes them "
                         "(see the kernel's notes for what would).")
    if failing:
        lines.append(f"Result: the engine fails before launching in {len(failing)} of "
                     f"{plural(n, 'engine/target combination')} (see the VERDICT lines).")
    if not bad and not failing:
        lines.append(f"Result: no shared-memory overflow in {plural(n, 'engine/target combination')}.")
    return "\n".join(lines) + "\n"


def render_json(report: DoctorReport) -> str:
    return json.dumps(report.to_json(), indent=2, default=str) + "\n"
