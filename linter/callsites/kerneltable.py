"""``[tool.tilefit.kernels."module:function"]``: what a project says its kernel runs with.

A table binds names to values for every evaluation of the kernel's launches::

    [tool.tilefit.kernels."vllm.v1.attention.ops.triton_decode_attention:_fwd_grouped_kernel_stage1"]
    k_buffer = ["bf16", "fp8e4nv"]   # the tensor the launch passes as K_Buffer: dtype variants
    "K_Buffer,V_Buffer" = ["fp8e4nv"] # parameters varied together
    kv_group_num = 16                 # a parameter the launch computes from q.shape
    IS_MLA = true                     # over the caller's default is_mla=False
    num_stages = 2                    # a launch option

A name is, in this order: a parameter of the kernel; a launch option (``num_warps``,
``num_stages``, ...); a parameter of the kernel whose name differs only in case
(``k_buffer`` for ``K_Buffer``); the name a launch of the kernel passes for a parameter
(``kv_cache`` in ``kernel[grid](q, kv_cache, ...)`` binds the parameter it is passed as). A
name that is none of these, or that launches pass for different parameters, is an error that
lists what the kernel accepts. Pointer parameters take dtypes; the others take values; a list
of several values gives one variant per value (a ``"A,B"`` key varies names together).

A table's value **overrides** what the launch gives: a default of the caller (``is_mla=False``),
a module constant, a literal, or a value computed at run time. The evaluation keeps a note of
each value it used (:func:`notes`), and the reports say which: ``IS_MLA=True
([tool.tilefit.kernels], over False: default of is_mla in decode_attention_fwd())``. The fix
search still tries smaller ``num_stages`` (or ``BLOCK_*``) than a table gives: a value the
search sets is not overridden.
"""

from __future__ import annotations

import ast
import itertools
from typing import Any, Iterable, Mapping

from tilefit.dtypes import TRITON_TYPES, triton_type

MAX_VARIANTS = 32


def launch_options() -> frozenset:
    from .sites import LAUNCH_OPTIONS

    return LAUNCH_OPTIONS


def aliases_of(sites: Iterable) -> dict[int, dict[str, set[str]]]:
    """``id(kernel) -> {name passed at a launch: {parameters it is passed as}}`` over the
    launch sites ``sites`` (``kernel[grid](q, kv_cache)``: ``kv_cache -> {K_Buffer}``)."""
    out: dict[int, dict[str, set[str]]] = {}
    for site in sites:
        names = out.setdefault(id(site.kernel), {})
        for param, expr in getattr(site, "arg_exprs", {}).items():
            if isinstance(expr, ast.Name) and expr.id != param:
                names.setdefault(expr.id, set()).add(param)
    return out


def resolve(name: str, kernel, aliases: Mapping[str, set[str]] | None = None) -> tuple[str | None, str]:
    """The parameter or launch option ``name`` binds, or ``(None, why)``."""
    params = [p.name for p in kernel.params]
    if name in params or name in launch_options():
        return name, ""
    folded = [p for p in params if p.lower() == name.lower()]
    if len(folded) == 1:
        return folded[0], ""
    passed = sorted((aliases or {}).get(name, ()))
    if len(passed) == 1:
        return passed[0], ""
    if len(passed) > 1:
        return None, (f"launches of {kernel.name} pass {name!r} as {', '.join(passed)}: name the parameter "
                      f"([tool.tilefit.kernels.\"{kernel.key}\"])")
    shown = ", ".join(params[:12]) + (", ..." if len(params) > 12 else "")
    also = f"; launches pass {', '.join(sorted(aliases))}" if aliases else ""
    return None, (f"{kernel.name} has no parameter {name!r} and no launch passes it ([tool.tilefit.kernels."
                  f"\"{kernel.key}\"]: its parameters are {shown}, or a launch option such as num_stages{also})")


def variants(kernel, info, table: Mapping[str, Any], aliases: Mapping[str, set[str]] | None = None) -> list:
    """The :class:`~tilefit.callsites.evaluate.Variant` list of a table (at most
    :data:`MAX_VARIANTS`)."""
    from .evaluate import Variant

    axes: list[list[tuple[str, tuple, tuple, str]]] = []
    for key, values in table.items():
        names = [n.strip() for n in key.split(",") if n.strip()]
        values = values if isinstance(values, list) else [values]
        axis = []
        for v in values:
            dts, vals, errors = [], [], []
            for n in names:
                target, why = resolve(n, kernel, aliases)
                if target is None:
                    errors.append(why)
                elif target in info.pointers:
                    dt = triton_type(str(v)) if isinstance(v, str) else None
                    if dt not in TRITON_TYPES:
                        errors.append(f"{v!r} is not a dtype for the pointer {target} ([tool.tilefit.kernels."
                                      f"\"{kernel.key}\"]; e.g. bf16, fp16, fp8e4nv, fp32)")
                    else:
                        dts.append((target, dt))
                else:
                    vals.append((target, v))
            label = f"{key}={v}" if len(values) > 1 else ""
            axis.append((label, tuple(dts), tuple(vals), "; ".join(errors)))
        axes.append(axis)
    out = []
    for combo in itertools.product(*axes):
        label = ", ".join(lab for lab, _, _, _ in combo if lab)
        dts = tuple(x for _, d, _, _ in combo for x in d)
        vals = tuple(x for _, _, v, _ in combo for x in v)
        error = "; ".join(e for _, _, _, e in combo if e)
        out.append(Variant(label, dts, vals, explicit=True, error=error))
        if len(out) >= MAX_VARIANTS:
            break
    return out


def _shown(value: Any) -> str:
    name = getattr(value, "name", None)
    return f"tl.{name}" if name is not None and type(value).__name__ == "TritonDType" else repr(value)


def notes(case, variant) -> tuple[str, ...]:
    """What a table's values replaced in ``case``: ``("IS_MLA=True ([tool.tilefit.kernels], over
    False: default of is_mla in f())", "kv_group_num=16 ([tool.tilefit.kernels])")``. Values the
    fix search set (``case.tried``) are the search's, not the table's."""
    out = []
    for name, value in variant.values:
        if name in case.tried:
            continue
        had = case.value(name)
        present = name in (case.options if name in launch_options() else case.given)
        text = f"{name}={value!r} ([tool.tilefit.kernels]"
        if present and had != value:
            lit = case.literals.get(name)
            via = f": {lit.via}" if lit is not None and lit.via else ""
            text += f", over {_shown(had)}{via}"
        out.append(text + ")")
    return tuple(out)


def merge_overridden(cases: list, variants: list) -> list:
    """``cases`` less those a table's values make identical to another: the arms of a launcher's
    ``num_stages = 1 if ... else 2`` both pinned by ``num_stages = 2`` are one evaluation, reported
    once. Of such a group the case whose own values the table overrides least is kept, and the
    label atoms that name an overridden value (``num_stages=1 (line 46)``) leave its label; cases
    whose other label atoms differ (another branch, a target's arm) stay apart."""
    from dataclasses import replace

    from .sites import is_option

    table = {k for variant in variants for k, _ in variant.values}
    if not table or len(cases) < 2:
        return cases

    def atoms_left(case) -> tuple:
        atoms = [a for a in case.label.split(", ") if a]
        return tuple(a for a in atoms if a.partition("=")[0] not in table or "=" not in a)

    def effective(case) -> tuple:
        out = []
        for variant in variants:
            vals = dict(variant.values)
            given = {**case.given, **{k: v for k, v in vals.items() if not is_option(case.kernel, k)}}
            options = {**case.options, **{k: v for k, v in vals.items() if is_option(case.kernel, k)}}
            reasons = sorted(k for k in case.reasons if k not in vals)
            out.append((variant.label, repr(sorted(given.items(), key=repr)), repr(sorted(options.items())),
                        tuple(reasons), repr(sorted(case.hints.items()))))
        return (atoms_left(case), tuple(out))

    def overridden(case) -> int:
        vals = {k: v for variant in variants for k, v in variant.values}
        return sum(1 for k, v in vals.items() if k in case.given and case.given[k] != v
                   or k in case.options and case.options[k] != v)

    groups: dict[tuple, list] = {}
    order: list[tuple] = []
    for case in cases:
        key = effective(case)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(case)
    out = []
    for key in order:
        group = groups[key]
        if len(group) == 1:
            out.append(group[0])
            continue
        best = min(group, key=overridden)
        out.append(replace(best, label=", ".join(key[0])))
    return out
