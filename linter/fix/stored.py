"""A table's fix plans as JSON data, and back: what the result cache keeps beside a file's
diagnostics, so a warm run of a format that reads the plans (``full``'s hints, the ``html``
report) gets them without planning again.

A record holds, per planned entry, every field of its :class:`~tilefit.fix.planner.EntryPlan`
but the path, the key and the :class:`~tilefit.model.Fix` (the cached diagnostics carry the fix;
the plan is bound to the fix its diagnostics share), plus the fix's title to check that pairing,
and the reasons of the entries without a plan. It is read back only under the run key it was
written with (:func:`tilefit.resultcache.run_key` with the planner: its settings, the targets,
the performance model's and the calibrations' files, tilefit's code), so it is the plan that run
would make. A record that does not match its diagnostics is refused (:class:`StoredPlanError`):
the caller checks the file again.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from tilefit.jsonpos import parse_pointer
from tilefit.model import Applicability, Diagnostic

from .planner import FIXABLE, EntryPlan, FitGroup, Need, TablePlan

VERSION = 1
_APPLICABILITY = {int(a): a for a in Applicability}


class StoredPlanError(ValueError):
    """A stored record that does not fit the diagnostics it was stored with."""


def _entry(value):
    return None if value is None else dict(value)


def plan_record(plan: EntryPlan) -> dict:
    """``plan`` as JSON data (without its path, key and fix)."""
    return {
        "title": plan.fix.title,
        "original": dict(plan.original), "entry": dict(plan.entry), "changes": dict(plan.changes),
        "applicability": int(plan.applicability),
        "needs": [[n.group.arch, n.group.vendor, list(n.group.devices), n.group.limit, n.group.max_threads,
                   n.group.warp_size, n.before, n.after] for n in plan.needs],
        "depth": plan.depth,
        "predicted": {dev: dict(row) for dev, row in plan.predicted.items()},
        "naive": _entry(plan.naive), "hidden_unsafe": _entry(plan.hidden_unsafe),
        "shape_model": plan.shape_model, "device": plan.device, "reasons": dict(plan.reasons),
        "source": plan.source, "engine_default": _entry(plan.engine_default),
    }


def table_record(plan: TablePlan) -> dict:
    return {"version": VERSION, "plans": {key: plan_record(p) for key, p in plan.plans.items()},
            "skipped": dict(plan.skipped)}


_NEEDS: dict[tuple, Need] = {}  # a stored need's values -> its Need (frozen: one object serves every plan)


def _need_of(arch, vendor, devices, limit, threads, warp, before, after) -> Need:
    """The :class:`Need` of a stored need's values: thousands of a run's plans share a few."""
    try:
        figures = (limit, threads, warp, before, after)
        # the figures' types too: 1, 1.0 and true are one dict key
        key = (arch, vendor, tuple(devices), figures, tuple(map(type, figures)))
        hit = _NEEDS.get(key)
    except TypeError:  # an unhashable value: built as it is, not memoised
        return Need(FitGroup(arch, vendor, tuple(devices), limit, threads, warp), before, after)
    if hit is None:
        hit = _NEEDS[key] = Need(FitGroup(arch, vendor, key[2], limit, threads, warp), before, after)
    return hit


def _plan_of(record: Mapping, path: str, key: str, fix) -> EntryPlan:
    if record["title"] != fix.title:
        raise StoredPlanError(f"{key}: the stored plan is not the fix of its diagnostics")
    needs = tuple(_need_of(*need) for need in record["needs"])
    return EntryPlan(path=path, key=key, original=dict(record["original"]), entry=dict(record["entry"]),
                     changes=dict(record["changes"]), applicability=_APPLICABILITY[record["applicability"]],
                     fix=fix, needs=needs, depth=record["depth"],
                     predicted={dev: dict(row) for dev, row in record["predicted"].items()},
                     naive=_entry(record["naive"]), hidden_unsafe=_entry(record["hidden_unsafe"]),
                     shape_model=record["shape_model"], device=record["device"], reasons=dict(record["reasons"]),
                     source=record["source"], engine_default=_entry(record["engine_default"]))


def table_plan_of(record, path: str, diagnostics: Sequence[Diagnostic]) -> TablePlan:
    """The :class:`TablePlan` a record stored for ``path``, each plan bound to the fix its
    diagnostics share (in the diagnostics' order, as the planner makes it). Raises
    :class:`StoredPlanError` when the record is damaged or does not fit the diagnostics (an entry
    they do not name, a plan whose entry has no fix or another one)."""
    if type(record) is not dict or record.get("version") != VERSION:
        raise StoredPlanError("no stored plans of this version")
    try:
        stored, skipped = record["plans"], record["skipped"]
        if type(stored) is not dict or type(skipped) is not dict:
            raise StoredPlanError("damaged record")
        fixes: dict[str, object] = {}
        mixed: set[str] = set()  # entries whose fixable diagnostics carry different fixes
        keys: list[str] = []
        for d in diagnostics:
            parts = parse_pointer(d.pointer)
            if d.code not in FIXABLE or not parts:
                continue
            key = parts[0]
            if key not in fixes:
                keys.append(key)
                fixes[key] = d.fix
            elif fixes[key] is not d.fix:
                mixed.add(key)
        if not set(stored) <= set(keys) or not set(skipped) <= set(keys) or set(stored) & set(skipped):
            raise StoredPlanError("the stored plans name entries the diagnostics do not")
        out = TablePlan(path)
        for key in keys:
            fix = fixes[key]
            if key in stored:
                if fix is None or key in mixed:
                    raise StoredPlanError(f"{key}: a stored plan for an entry without its one fix")
                out.plans[key] = _plan_of(stored[key], path, key, fix)
            elif key in skipped:
                if type(skipped[key]) is not str:
                    raise StoredPlanError(f"{key}: damaged reason")
                out.skipped[key] = skipped[key]
        return out
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, StoredPlanError):
            raise
        raise StoredPlanError(f"damaged record: {type(exc).__name__}: {exc}") from None
