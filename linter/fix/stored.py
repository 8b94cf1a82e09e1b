"""A table's fix plans as JSON data, and back: what the result cache keeps beside a file's
diagnostics, so a warm run of a format that reads the plans (``full``'s hints, the ``html``
report) gets them without planning again.

A record holds, per planned entry, every field of its :class:`~tilefit.fix.planner.EntryPlan`
but the path, the key and the :class:`~tilefit.model.Fix` (the cached diagnostics carry the fix;
the plan is bound to the fix its diagnostics share), plus the fix's title to check that pairing,
and the reasons of the entries without a plan. The target groups a plan's needs name (arch,
vendor, devices, limits: the same for every plan of a table) are kept once per record
(``groups``), each need as [group index, bytes before, bytes after] (version 2: half the bytes
of version 1, which wrote each group out in every need of every plan). It is read back only under the run key it was
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

VERSION = 2
_APPLICABILITY = {int(a): a for a in Applicability}


class StoredPlanError(ValueError):
    """A stored record that does not fit the diagnostics it was stored with."""


def _entry(value):
    return None if value is None else dict(value)


def _group_record(group: FitGroup) -> list:
    return [group.arch, group.vendor, list(group.devices), group.limit, group.max_threads, group.warp_size]


def plan_record(plan: EntryPlan, groups: list | None = None) -> dict:
    """``plan`` as JSON data (without its path, key and fix). ``groups``: the record's list of
    target groups (:func:`_group_record`), which the needs index (extended with the plan's new
    ones); None: a list of the plan's own."""
    groups = [] if groups is None else groups
    needs = []
    for n in plan.needs:
        g = _group_record(n.group)
        try:
            i = groups.index(g)
        except ValueError:
            i = len(groups)
            groups.append(g)
        needs.append([i, n.before, n.after])
    return {
        "title": plan.fix.title,
        "original": dict(plan.original), "entry": dict(plan.entry), "changes": dict(plan.changes),
        "applicability": int(plan.applicability),
        "needs": needs,
        "depth": plan.depth,
        "predicted": {dev: dict(row) for dev, row in plan.predicted.items()},
        "naive": _entry(plan.naive), "hidden_unsafe": _entry(plan.hidden_unsafe),
        "shape_model": plan.shape_model, "device": plan.device, "reasons": dict(plan.reasons),
        "source": plan.source, "engine_default": _entry(plan.engine_default),
    }


def table_record(plan: TablePlan) -> dict:
    groups: list = []
    plans = {key: plan_record(p, groups) for key, p in plan.plans.items()}
    return {"version": VERSION, "groups": groups, "plans": plans, "skipped": dict(plan.skipped)}


_GROUPS: dict[tuple, FitGroup] = {}  # a stored group's values -> its FitGroup (frozen: one serves every plan)
_NEEDS: dict[tuple, Need] = {}  # (group, the figures and their types) -> its Need, likewise


def _group_of(arch, vendor, devices, limit, threads, warp) -> FitGroup:
    """The :class:`FitGroup` of a stored group's values: thousands of a run's plans share a few."""
    try:
        figures = (limit, threads, warp)
        # the figures' types too: 1, 1.0 and true are one dict key
        key = (arch, vendor, tuple(devices), figures, tuple(map(type, figures)))
        hit = _GROUPS.get(key)
    except TypeError:  # an unhashable value: built as it is, not memoised
        return FitGroup(arch, vendor, tuple(devices), limit, threads, warp)
    if hit is None:
        hit = _GROUPS[key] = FitGroup(arch, vendor, key[2], limit, threads, warp)
    return hit


def _need_of(group: FitGroup, before, after) -> Need:
    try:
        key = (id(group), before, after, type(before), type(after))
        hit = _NEEDS.get(key)
    except TypeError:  # an unhashable value: built as it is, not memoised
        return Need(group, before, after)
    if hit is None or hit.group is not group:
        hit = _NEEDS[key] = Need(group, before, after)
    return hit


def _plan_of(record: Mapping, path: str, key: str, fix, groups: Sequence[FitGroup]) -> EntryPlan:
    if record["title"] != fix.title:
        raise StoredPlanError(f"{key}: the stored plan is not the fix of its diagnostics")
    needs = []
    for i, before, after in record["needs"]:
        if type(i) is not int or i < 0:
            raise StoredPlanError(f"{key}: damaged need")
        needs.append(_need_of(groups[i], before, after))
    needs = tuple(needs)
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
        if type(stored) is not dict or type(skipped) is not dict or type(record["groups"]) is not list:
            raise StoredPlanError("damaged record")
        groups = [_group_of(*g) for g in record["groups"]]
        fixes, mixed = _entry_fixes(diagnostics)
        keys = list(fixes)
        if not set(stored) <= set(keys) or not set(skipped) <= set(keys) or set(stored) & set(skipped):
            raise StoredPlanError("the stored plans name entries the diagnostics do not")
        out = TablePlan(path)
        for key in keys:
            fix = fixes[key]
            if key in stored:
                if fix is None or key in mixed:
                    raise StoredPlanError(f"{key}: a stored plan for an entry without its one fix")
                out.plans[key] = _plan_of(stored[key], path, key, fix, groups)
            elif key in skipped:
                if type(skipped[key]) is not str:
                    raise StoredPlanError(f"{key}: damaged reason")
                out.skipped[key] = skipped[key]
        return out
    except (LookupError, TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, StoredPlanError):
            raise
        raise StoredPlanError(f"damaged record: {type(exc).__name__}: {exc}") from None


# -- the plans' summary: what a kept report needs of them ------------------------------------------
# A warm ``full`` report (or a kept ``html`` page) needs of the plans only how many entries have a
# faster unsafe fix (the summary's hint, FixPlanner.faster_unsafe). The result cache keeps that
# beside the results in a small record per file (``<key>.summary.json``), so such a run does not
# read the whole plans file; the plans are read only when something asks for a plan.
SUMMARY_VERSION = 1


def summary_record(record) -> dict | None:
    """The summary of a :func:`table_record`: the entries whose plan has a faster unsafe
    alternative (``faster``, in the record's order); None for no record (nothing planned)."""
    if record is None:
        return None
    return {"version": SUMMARY_VERSION,
            "faster": [key for key, p in record["plans"].items() if p["hidden_unsafe"] is not None]}


def faster_fixes_of(summary, diagnostics: Sequence[Diagnostic]) -> list:
    """The fixes (of ``diagnostics``) of the entries a :func:`summary_record` names, as
    :func:`table_plan_of` binds them. Raises :class:`StoredPlanError` when the summary is damaged
    or names an entry the diagnostics do not give one fix."""
    if type(summary) is not dict or summary.get("version") != SUMMARY_VERSION or type(summary.get("faster")) is not list:
        raise StoredPlanError("no stored summary of this version")
    fixes, mixed = _entry_fixes(diagnostics)
    out = []
    for key in summary["faster"]:
        if type(key) is not str or fixes.get(key) is None or key in mixed:
            raise StoredPlanError(f"{key!r}: a stored summary names an entry without its one fix")
        out.append(fixes[key])
    return out


def _entry_fixes(diagnostics: Sequence[Diagnostic]) -> tuple[dict[str, object], set[str]]:
    """The fix of each entry's fixable diagnostics ({entry key: fix}, in the diagnostics' order),
    and the entries whose fixable diagnostics carry different fixes."""
    fixes: dict[str, object] = {}
    mixed: set[str] = set()
    for d in diagnostics:
        parts = parse_pointer(d.pointer)
        if d.code not in FIXABLE or not parts:
            continue
        key = parts[0]
        if key not in fixes:
            fixes[key] = d.fix
        elif fixes[key] is not d.fix:
            mixed.add(key)
    return fixes, mixed
