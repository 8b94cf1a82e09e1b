"""The fix planner: one replacement config per offending entry, valid for every target.

After :meth:`tilefit.engine.Engine.check_table` the planner groups the fixable diagnostics
(``FIXABLE``: the codes of the rules whose ``fix_planner`` is ``Planner.ENTRY``) by entry and, for
each such entry:

1. walks the config graph (:mod:`tilefit.fix.space`) breadth first from the entry, keeping the
   configs that fit **every** target of the table (the file's own device and each ``--target``)
   with ``margin`` bytes to spare, on every kernel variant the entry feeds, within each
   target's threads per block. The search uses the analytic estimator (fast); it stops
   ``extra_depth`` edits after the first layer that has a fitting config, and at ``max_depth``;
2. ranks them with the performance model (:mod:`tilefit.perf`) at the entry's batch size on the
   file's own device (``NAMED_WEIGHT``) and one representative of each tensor-core family among
   the targets (the rest; see :func:`ranking_devices`), then climbs the graph from the best
   ``beam_width`` fitting configs while the model predicts gains (a beam search), and moves
   ``GROUP_SIZE_M`` one step on the best few;
3. takes the best one whose class of safety is allowed (see below) and that the engine's own
   rules accept: with the engine's estimator the candidate raises no fixable diagnostic and no
   diagnostic the original entry did not have;
4. turns it into byte edits of the original text (:mod:`tilefit.fix.edits`).

**Fix safety.** A fix that keeps the arithmetic of every output element identical is SAFE:
``num_stages``, ``num_warps``, ``BLOCK_SIZE_M``, ``BLOCK_SIZE_N`` and ``GROUP_SIZE_M`` only change
how the work is tiled and scheduled, each output element is still the same fp32 sum over K in the
same BLOCK_SIZE_K chunks. Changing BLOCK_SIZE_K (as the launch sees it, after vLLM's clamp to the
quantisation block) changes the accumulation order, so results can differ in the last bits: that
fix is UNSAFE, applied only with ``--unsafe-fixes``. Without it the planner offers the best SAFE
config and counts a faster UNSAFE one as a hidden fix (the CLI hints at it); when no SAFE config
fits, the UNSAFE one is attached (shown, not applied).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from tilefit.engine import Engine
from tilefit.estimate import EstimatorUnavailable
from tilefit.families import has_down_tables, kernel_key
from tilefit.jsonpos import parse_pointer, pointer_to_str
from tilefit.model import Applicability, Diagnostic, Fix, build_frozen
from tilefit.parameters import in_domain
from tilefit.planning import RunPlanner
from tilefit.rules import Planner, fixable_codes
from tilefit.tables import ConfigTable
from tilefit.variants import TILE_KEYS, effective_launch, is_int, kernel_variants

from .constants import load as load_constants
from .edits import EditError, entry_edits
from .space import ConfigSpace, table_values

FIXABLE = fixable_codes(Planner.ENTRY)
# what need() answers for a config the engine's kernel does not compile (more than any limit)
COMPILE_FAILS = 1 << 40

# every GROUP_SIZE_M value of the space is tried on this many of the best-ranked candidates
GROUP_REFINE_TOP = 3
# how many ranked candidates are re-checked with the engine's rules before giving up
RULE_CHECK_TRIES = 12
# A changed GROUP_SIZE_M (no effect on shared memory) is kept only when the model predicts a gain
# from it larger than this (in log time); else the entry's own value stays.
GROUP_GAIN = 1e-6
# A table of more entries than this (no shipped table has more than 37) is planned per batch-size
# bucket: one search for each batch size rounded to BUCKET_BITS significant bits, whose choice and
# predicted times (those of the rounded size) every entry of the bucket with the same config
# shares. A 50 MB table of 270000 entries searched once per key took hours (issue 12).
LARGE_TABLE_ENTRIES = 512
BUCKET_BITS = 3
# The ranking constants are data with provenance (tilefit/data/perf_model/fixer.json, read and
# validated by tilefit.fix.constants); the names below are what the planner and the tuner's
# search order (tilefit.tune.runner.model_order) read.
_CONSTANTS = load_constants()
# On the file's own device the original entry was measured best by a tuner: a predicted gain
# over it counts this fraction (in log space).
TUNED_PRIOR = _CONSTANTS.tuned_prior
# Weight of the file's own device in the ranking (the rest is shared by the targets' families).
NAMED_WEIGHT = _CONSTANTS.named_weight
# Relative cost of each edit beyond the nearest layer of fitting configs.
EDIT_PENALTY = _CONSTANTS.edit_penalty
# A trust region around the engine's own default for the batch size (vLLM's get_default_config):
# each edit step away from it costs this much, scaled by the share of the default's predicted
# time that is DRAM time. Memory-bound configs sit on one roofline, where the model ranks
# neighbours of a config well (one more stage, a narrower tile) but not configs far apart, and the
# engine's hand-tuned rule is a good place to start; compute-bound ones it ranks well, so the
# region widens as the DRAM share falls. Chosen by leave-one-shape-out on the H200 measurements of
# four MoE shapes together with ANCHOR_MARGIN (bench/moe_offline.py --loso; the data file says
# which run). Where the engine has no default, each edit beyond the nearest fitting layer costs
# EDIT_PENALTY instead.
DEFAULT_TRUST = _CONSTANTS.default_trust
# The anchors: the engine's own default for the batch size and the naive fix (the tuned entry with
# fewer stages). A searched config replaces the faster-predicted anchor only when the model
# predicts it faster by more than this (in log space): below that the gain is inside the model's
# own error between two configs near the top (its held-out rank loss on the H200 sweep is
# 0.01-0.02 in log time), and the anchor is the config a person or a tuner already chose.
# Chosen with DEFAULT_TRUST (the data file says which run).
ANCHOR_MARGIN = _CONSTANTS.anchor_margin


def freeze(entry: Mapping) -> tuple:
    return tuple((k, v, type(v)) for k, v in entry.items())


def cfg_key(entry: Mapping) -> tuple:
    """The values that decide bytes, threads and speed (the planner's memo key); an absent launch
    option stays None, so Triton's per-vendor default applies."""
    return (entry["BLOCK_SIZE_M"], entry["BLOCK_SIZE_N"], entry["BLOCK_SIZE_K"], entry.get("GROUP_SIZE_M"),
            entry.get("num_warps"), entry.get("num_stages"))


def smem_key(family: str, entry: Mapping) -> tuple:
    """What of an entry decides its shared memory under the search estimator (the planner's
    ``need`` memo key): :func:`cfg_key` without the GROUP_SIZE_M value, which only says whether
    the value is in the family's domain (outside it, no variant is built). GROUP_SIZE_M is a
    constexpr of the launch that only reorders the programs: no variable of the analytic forms
    (``tilefit.smem.analytic.VARIABLES``: its ``G`` is the wNa16 weight group), no coordinate of
    a calibration point (``spec_point``: BM, BN, BK, warps, stages) and no variable of the
    engines' compile-failure rules reads it. ``tests/test_planner_need.py`` checks the claim on
    the corpus."""
    group = entry.get("GROUP_SIZE_M")
    return (entry["BLOCK_SIZE_M"], entry["BLOCK_SIZE_N"], entry["BLOCK_SIZE_K"], entry.get("num_warps"),
            entry.get("num_stages"), entry.get("USE_TMA"), _group_in_domain(family, group))


_GROUP_DOMAIN: dict[tuple, bool] = {}


def _group_in_domain(family: str, group) -> bool:
    """Whether ``in_domain`` accepts ``GROUP_SIZE_M=group`` (a value that is no integer: it is
    VAL002's, never a domain problem), memoised per (family, value)."""
    try:
        return _GROUP_DOMAIN[(family, group, type(group))]
    except KeyError:
        hit = _GROUP_DOMAIN[(family, group, type(group))] = in_domain(family, {"GROUP_SIZE_M": group})
        return hit
    except TypeError:  # unhashable
        return in_domain(family, {"GROUP_SIZE_M": group})


def describe(entry: Mapping) -> str:
    """``BM/BN/BK/G/w/s`` in perf_reference.md's notation (absent launch options as ``-``)."""
    g = entry.get("GROUP_SIZE_M", "-")
    return (f"{entry.get('BLOCK_SIZE_M')}/{entry.get('BLOCK_SIZE_N')}/{entry.get('BLOCK_SIZE_K')}/G{g}/"
            f"w{entry.get('num_warps', '-')}/s{entry.get('num_stages', '-')}")


@dataclass(frozen=True)
class FitGroup:
    """Target devices that need the same bytes (same arch and vendor): the tightest limit wins."""

    arch: str
    vendor: str
    devices: tuple[str, ...]
    limit: int | None  # smallest smem_per_block_optin of the group
    max_threads: int | None
    warp_size: int | None

    @property
    def label(self) -> str:
        names = list(self.devices)
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return f"{self.arch} ({shown})"


@dataclass(frozen=True)
class Need:
    group: FitGroup
    before: int | None
    after: int | None


@dataclass(frozen=True)
class EntryPlan:
    """What the fixer does to one entry."""

    path: str
    key: str
    original: Mapping
    entry: Mapping  # the new entry, as json.load will read it
    changes: Mapping  # changed or added keys -> new value
    applicability: Applicability
    fix: Fix
    needs: tuple[Need, ...] = ()
    depth: int = 0
    # device key -> predicted microseconds of the original, the chosen and the naive fix
    predicted: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    naive: Mapping | None = None
    hidden_unsafe: Mapping | None = None  # a faster UNSAFE config that was not chosen
    shape_model: str | None = None
    device: str | None = None  # the device the file name names (where the engine loads it)
    # why each changed key changed: "to fit" (reverting it alone breaks a target), "for speed" (the
    # model's choice) or "engine default" (part of the engine's own default config)
    reasons: Mapping[str, str] = field(default_factory=dict)
    source: str = "search"  # search, naive fix, engine default
    engine_default: Mapping | None = None  # the engine's own default for the batch size, if it fits

    @property
    def pointer(self) -> str:
        return pointer_to_str((self.key,))


@dataclass
class TablePlan:
    path: str
    plans: dict[str, EntryPlan] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # batch key -> why no fix


class FixPlanner(RunPlanner):
    """Plans fixes for the tables an engine checks. One planner serves a whole run (memo tables)."""

    hands_back_plans = True  # stored_plans/restore (tilefit.fix.stored)

    def __init__(self, engine: Engine, *, margin: int = 0, unsafe: bool = False, max_depth: int = 6,
                 extra_depth: int = 1, max_nodes: int = 3000, coefficients=None, beam_width: int = 4,
                 beam_steps: int = 12, rank: bool = True):
        self.engine = engine
        self.margin = int(margin or 0)
        self.unsafe = unsafe
        self.max_depth = max_depth
        self.extra_depth = extra_depth
        self.max_nodes = max_nodes
        self.beam_width = beam_width
        # rank=False: take the nearest fitting config the rules accept, without the performance
        # model (enough to know whether and how safely an entry can be fixed: `check`'s [*] marks)
        self.rank = rank
        self.beam_steps = beam_steps
        est = engine.estimator
        self._search_estimator = est if est.mode == "analytic" else None  # else made on first use
        # A private engine for re-checks: its own memo tables and statistics.
        self.checker = Engine(db=engine.db, estimator=est, selection=engine.selection,
                              extra_targets=engine.extra_targets, rule_options=engine.rule_options, root=engine.root)
        # Candidates are judged by the entry and target rules the user selected (file rules see
        # the same file either way): the user's selectors, with every file rule ignored by its full
        # code, so a per-file ignore decides a code as it does in the check (the longest prefix wins)
        from tilefit.rules import RULES, Scope
        from tilefit.selection import Selection

        sel = engine.selection
        file_codes = [code for code, cls in RULES.items() if cls.scope is Scope.FILE]
        self.prober = Engine(db=engine.db, estimator=est, extra_targets=engine.extra_targets,
                             selection=Selection(select=sel.select, extend_select=list(sel.extend_select),
                                                 ignore=list(sel.ignore) + file_codes,
                                                 per_file_ignores=sel.per_file_ignores, root=sel.root),
                             rule_options=engine.rule_options, root=engine.root)
        self.coefficients = coefficients
        # (kernel key, arch, vendor) -> smem_key -> need (two levels: the hot paths fetch a
        # kernel's and arch's table once, not a four-part key hashed at each of ~350k asks)
        self._need_memo: dict[tuple, dict] = {}
        self._pred_memo: dict[tuple, object] = {}
        self._log_memo: dict[tuple, tuple] = {}  # (shape, ranking, config) -> log times (_log_times)
        self._plan_memo: dict[tuple, object] = {}
        self._nearest_memo: dict[tuple, _SpaceWalk] = {}  # (fit id, typed entry, ConfigSpace) -> _nearest's answer
        self._sig_memo: dict[tuple, frozenset] = {}
        self._coeff_memo: dict[str, object] = {}
        self._fit_memo: dict[int, dict] = {}  # fit id -> config -> fits every group
        self._fit_ids: dict[tuple, int] = {}  # (kernel key, fit groups) -> its fit id
        self._by_fix: dict[int, EntryPlan] = {}
        self._tables: dict[str, TablePlan] = {}  # path -> the plan attach made, until stored_plans() takes it
        # path -> (the table's bytes, the plans restore() read back for them)
        self._restored: dict[str, tuple[bytes, TablePlan]] = {}
        # restore_summary(): id of a fix -> the fix, for the entries with a faster unsafe fix
        self._faster: dict[int, Fix] = {}
        # path -> (table, diagnostics, the stored plans' reader): plans read on the first ask
        self._pending: dict[str, tuple] = {}

    @property
    def search_estimator(self):
        """The estimator the search judges candidates with: the check's own where it is
        analytic, else its analytic twin (:meth:`tilefit.estimate.Estimator.analytic_twin`),
        made when first asked: a warm run whose plans all come from the result cache plans
        nothing and so never loads the closed forms for it (~20 ms)."""
        est = self._search_estimator
        if est is None:
            est = self._search_estimator = self.engine.estimator.analytic_twin()
        return est

    # -- public --------------------------------------------------------------------------------
    def attach(self, table: ConfigTable, diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
        """``diagnostics`` with a :class:`Fix` on each fixable one whose entry has a plan."""
        plan = self.plan_table(table, diagnostics)
        self._tables[table.path] = plan
        if not plan.plans:
            return list(diagnostics)
        out = []
        for d in diagnostics:
            parts = parse_pointer(d.pointer) if d.code in FIXABLE else None
            p = plan.plans.get(parts[0]) if parts else None
            if p is None:
                out.append(d)
            else:  # replace(d, fix=p.fix), without the frozen dataclass's __init__
                fields = dict(d.__dict__)
                fields["fix"] = p.fix
                out.append(build_frozen(type(d), fields))
        return out

    def cache_settings(self) -> dict:
        """The settings a plan depends on (the result cache's run key, :mod:`tilefit.resultcache`)."""
        settings = {k: getattr(self, k) for k in ("margin", "unsafe", "rank", "max_depth", "extra_depth",
                                                  "max_nodes", "beam_width", "beam_steps")}
        settings["coefficients"] = None if self.coefficients is None else repr(self.coefficients)
        return settings

    def plan_for(self, fix: Fix) -> EntryPlan | None:
        plan = self._by_fix.get(id(fix))
        if plan is None and self._pending:  # plans kept behind a summary: read on the first ask
            self._restore_pending()
            plan = self._by_fix.get(id(fix))
        return plan

    # -- the result cache (tilefit.resultcache keeps the plans beside the diagnostics) ------------
    def stored_plans(self, path: str) -> dict | None:
        """The plans :meth:`attach` made for ``path`` (none: an empty record), as JSON data
        (:mod:`tilefit.fix.stored`) for the result cache; None when attach did not see it.
        Taken once."""
        plan = self._tables.pop(path, None)
        if plan is None:
            return None
        from .stored import table_record

        return table_record(plan)

    def restore(self, table: ConfigTable, diagnostics: Sequence[Diagnostic], record) -> bool:
        """Take the plans of ``table`` from a record :meth:`stored_plans` made (the result
        cache's, stored with ``diagnostics``) instead of planning: :meth:`plan_for` and
        :meth:`plan_table` answer from it. False (nothing taken) when the record does not fit
        the diagnostics; the caller then checks the table again."""
        from .stored import StoredPlanError, table_plan_of

        if record is None:  # stored by a run that planned nothing (or by none)
            return False
        try:
            plan = table_plan_of(record, table.path, diagnostics)
        except StoredPlanError:
            return False
        self._restored[table.path] = (table.data, plan)
        for p in plan.plans.values():
            self._by_fix[id(p.fix)] = p
        return True

    def summary_of(self, record) -> dict | None:
        """The summary of a :meth:`stored_plans` record (:func:`tilefit.fix.stored.summary_record`):
        what :meth:`faster_unsafe` needs of the plans, kept beside them by the result cache."""
        from .stored import summary_record

        return summary_record(record)

    def restore_summary(self, table: ConfigTable, diagnostics: Sequence[Diagnostic], summary, plans) -> bool:
        """Take what :meth:`faster_unsafe` needs of ``table``'s plans from a :meth:`summary_of`
        record (stored with ``diagnostics``) and leave the plans themselves unread: ``plans()``
        (the stored record, or None) is called when :meth:`plan_for` or :meth:`plan_table` first
        asks for one (a warm ``full`` report, or a kept html page, never does). False (nothing
        taken) when the summary does not fit the diagnostics; the caller then restores the plans."""
        from .stored import StoredPlanError, faster_fixes_of

        if summary is None:
            return False
        try:
            faster = faster_fixes_of(summary, diagnostics)
        except StoredPlanError:
            return False
        self._faster.update((id(f), f) for f in faster)
        self._pending[table.path] = (table, diagnostics, plans)
        return True

    def _restore_pending(self) -> None:
        """The plans behind every :meth:`restore_summary`, read now (one that does not fit its
        diagnostics is left out: :meth:`plan_table` plans that table afresh)."""
        pending, self._pending = self._pending, {}
        for table, diagnostics, plans in pending.values():
            self.restore(table, diagnostics, plans())

    def faster_unsafe(self, diagnostics: Iterable[Diagnostic]) -> int:
        """How many of the diagnostics' (distinct) safe fixes have a faster unsafe alternative
        (from the plans, or from a :meth:`restore_summary`: no plan is read for it)."""
        seen = set()
        faster = self._faster
        for d in diagnostics:
            if d.fix is None or id(d.fix) in seen:
                continue
            if faster.get(id(d.fix)) is d.fix:
                seen.add(id(d.fix))
                continue
            plan = self._by_fix.get(id(d.fix))
            if plan is not None and plan.hidden_unsafe is not None:
                seen.add(id(d.fix))
        return len(seen)

    def plan_table(self, table: ConfigTable, diagnostics: Sequence[Diagnostic]) -> TablePlan:
        result = TablePlan(table.path)
        if table.doc is None or not isinstance(table.value, dict) or not table.meta.is_triton_table:
            return result
        keys: list[str] = []
        for d in diagnostics:
            parts = parse_pointer(d.pointer)
            if d.code in FIXABLE and parts and parts[0] not in keys:
                keys.append(parts[0])
        if not keys:
            return result
        if table.path in self._pending:
            self._restore_pending()
        restored = self._restored.get(table.path)
        if restored is not None and restored[0] == table.data:  # read back from the result cache (restore())
            # (only for the bytes they were planned on: a table rewritten since is planned afresh)
            stored = restored[1]
            result.plans.update((k, stored.plans[k]) for k in keys if k in stored.plans)
            result.skipped.update((k, stored.skipped[k]) for k in keys if k in stored.skipped)
            return result
        ctx = self._table_context(table)
        ctx.bucketed = len(table.value) > LARGE_TABLE_ENTRIES
        for key in keys:
            entry = table.value.get(key)
            try:
                plan = self._plan_entry(table, ctx, key, entry)
            except EditError as exc:
                result.skipped[key] = str(exc)
                continue
            if isinstance(plan, str):
                result.skipped[key] = plan
            else:
                result.plans[key] = plan
                self._by_fix[id(plan.fix)] = plan
        return result

    # -- targets -------------------------------------------------------------------------------
    def _named(self, meta):
        return self.engine.named_device(meta)

    def _table_context(self, table: ConfigTable) -> "_TableContext":
        meta = table.meta
        named = self._named(meta)
        devices, _unrunnable = self.engine.file_devices(meta)  # those the check judges the table on
        groups: dict[tuple, list] = {}
        for dev in devices:
            groups.setdefault((dev.arch, dev.vendor), []).append(dev)
        fit_groups = []
        for (arch, vendor), devs in groups.items():
            limits = [d.smem_per_block_optin for d in devs if d.smem_per_block_optin is not None]
            threads = [d.max_threads_per_block // d.warp_size for d in devs
                       if d.max_threads_per_block is not None and d.warp_size]
            fit_groups.append(FitGroup(arch, vendor, tuple(d.key for d in devs), min(limits) if limits else None,
                                       min(threads) if threads else None,
                                       max((d.warp_size or 32) for d in devs)))
        kernel = kernel_key(meta)
        fit_groups = tuple(fit_groups)
        # the fit memo's key: one number per (kernel, target groups), not the groups hashed at each ask
        fit_id = self._fit_ids.setdefault((kernel, fit_groups), len(self._fit_ids))
        return _TableContext(meta=meta, kernel_key=kernel, fit_id=fit_id, named=named, devices=tuple(devices),
                             groups=fit_groups, ranking=ranking_devices(named, devices, meta),
                             values=table_values(table.value.values() if isinstance(table.value, dict) else ()))

    def forget(self) -> None:
        """Drop every memoised answer (after the estimator's deferred compiles ran: the answers
        of the first pass may rest on figures awaiting a compile)."""
        self.forget_searches()
        for memo in (self._by_fix, self._tables, self._restored, self._faster, self._pending):
            memo.clear()

    def forget_searches(self) -> None:
        """Drop the memos of the searches (fits, predictions, the re-check engines' tables) and
        keep the plans made (:meth:`plan_for`, :meth:`stored_plans`): once the tables of a pass
        are planned, before its Python call sites are checked, so a whole engine's call-site scan
        does not run on top of them (issue 18 item 5: ~55 MB on sglang 0.5.23). A table planned
        later searches again and finds the same plans: the memos are pure."""
        from dataclasses import replace

        for memo in (self._need_memo, self._pred_memo, self._log_memo, self._plan_memo, self._sig_memo, self._fit_memo,
                     self._nearest_memo):
            memo.clear()
        self.checker = replace(self.checker)
        self.prober = replace(self.prober)

    # -- fitting -------------------------------------------------------------------------------
    def need(self, meta, entry: Mapping, arch: str, vendor: str) -> int | None:
        """Worst shared memory of the entry's kernel variants on ``arch`` (search estimator);
        None when no calibrated estimate exists."""
        # The memo is read before the entry's kernel variants are built: building them was most
        # of a json run's planning time (the search asks for the same configs again and again).
        # Keyed by the arch itself (the variants and the engine's known compile failures are per
        # arch) and the config without its GROUP_SIZE_M value (smem_key): the search asks for one
        # tile under many group sizes (the refinement, the ranking's predictions), and the bytes
        # do not depend on it.
        return self._need(meta, kernel_key(meta), smem_key(meta.family, entry), entry, arch, vendor)

    def _need(self, meta, kernel: tuple, skey: tuple, entry: Mapping, arch: str, vendor: str) -> int | None:
        """:meth:`need` with its memo key's parts given (``kernel_key(meta)``, ``smem_key``): the
        fit check asks for one config on every target arch."""
        return self._need_in(self._need_table(kernel, arch, vendor), meta, skey, entry, arch, vendor)

    def _need_table(self, kernel: tuple, arch: str, vendor: str) -> "_NeedMemo":
        """The need memo of one kernel key on one arch (``smem_key`` -> need)."""
        k = (kernel, arch, vendor)
        hit = self._need_memo.get(k)
        if hit is None:
            from tilefit.serving.launch import arch_key as launch_arch_key

            # the kernel variants, shared by the archs of one launch key (as the engine memoises them)
            variants = self._need_memo.setdefault((kernel, vendor, launch_arch_key(arch), "variants"), {})
            hit = self._need_memo[k] = _NeedMemo(variants)
        return hit

    def _need_in(self, memo: dict, meta, skey: tuple, entry: Mapping, arch: str, vendor: str) -> int | None:
        """:meth:`_need` with the kernel's and arch's memo (:meth:`_need_table`) given."""
        k = skey
        try:
            return memo[k]
        except KeyError:
            pass
        except TypeError:  # an unhashable value (a list for a block size): never memoised
            k = None
        # The entry's kernels on this arch: built once per launch key of the archs (what of an arch
        # changes them, tilefit.serving.launch.arch_key: the engine's check memoises them by it),
        # keyed like the need (smem_key: the GROUP_SIZE_M value the variants carry changes no
        # estimate and no compile-failure rule)
        variants = memo.variants.get(k) if k is not None else None
        if variants is None:
            variants = kernel_variants(meta, entry, arch, vendor, meta.engine)
            if k is not None:
                memo.variants[k] = variants
        if any(self.search_estimator.compile_failure(v.spec, arch) for v in variants):
            if k is not None:
                memo[k] = COMPILE_FAILS
            return COMPILE_FAILS  # the engine's kernel does not compile it: never a candidate
        worst = None
        for variant in variants:
            try:
                est = self.search_estimator.estimate(variant.spec, arch)
            except EstimatorUnavailable:
                continue
            if not est.usable:
                continue
            # an uncalibrated form with a known error bound counts at its upper bound (a fix
            # must fit for sure)
            need = est.shared_bytes + (est.max_error or 0 if est.status == "uncalibrated" else 0)
            worst = need if worst is None else max(worst, need)
        if k is not None:
            memo[k] = worst
        return worst

    def fits(self, ctx: "_TableContext", entry: Mapping) -> bool:
        """Whether ``entry`` fits every target group (shared memory with the margin, threads)."""
        return self._fits_key(ctx, entry, cfg_key(entry))

    def _fits_key(self, ctx: "_TableContext", entry: Mapping, k: tuple) -> bool:
        """:meth:`fits` with the entry's ``cfg_key`` given (the memo's key)."""
        memo = ctx.fit_table
        if memo is None:
            memo = ctx.fit_table = self._fit_memo.setdefault(ctx.fit_id, {})
        hit = memo.get(k)
        if hit is None:
            hit = memo[k] = self._fits(ctx, entry)
        return hit

    def _fits(self, ctx: "_TableContext", entry: Mapping) -> bool:
        if not in_domain(ctx.meta.family, entry):  # no estimate is no fit (a table's 2**1100 block)
            return False
        # The answer is the same in any order; the cheap thread checks go first and the shared
        # memory of the tightest limit next, so a config that does not fit costs fewer estimates.
        for vendor, cap in ctx.warp_caps:
            warps, _ = effective_launch(entry, vendor)
            if not is_int(warps) or warps > cap:
                return False
        skey = smem_key(ctx.meta.family, entry)
        checks = ctx.limit_checks
        if checks is None:  # (group, its need memo), tightest limit first
            checks = ctx.limit_checks = tuple((g, self._need_table(ctx.kernel_key, g.arch, g.vendor))
                                              for g in ctx.by_limit)
        for g, memo in checks:
            need = self._need_in(memo, ctx.meta, skey, entry, g.arch, g.vendor)
            if need is not None and need + self.margin > g.limit:
                return False
        return True

    # -- one entry -----------------------------------------------------------------------------
    def _plan_entry(self, table: ConfigTable, ctx: "_TableContext", key: str, entry) -> EntryPlan | str:
        meta = table.meta
        if not isinstance(entry, dict):
            return "the entry is not an object"
        if any(not is_int(entry.get(k)) or entry.get(k) <= 0 for k in TILE_KEYS):
            return "the entry lacks integer block sizes"
        for k in ("num_warps", "num_stages", "GROUP_SIZE_M"):
            if k in entry and not is_int(entry[k]):
                return f"{k} is not an integer"
        if self.fits(ctx, entry) and getattr(table.value, "duplicate_keys", None) and key in table.value.duplicate_keys:
            return "an earlier entry with this key offends; json.load keeps only this last one, which fits"
        frozen = freeze(entry)
        # the entry's space: what ConfigSpace.for_entry reads besides the entry is the table's
        # (its kind, devices and values), so the entries of a table with one config share one
        space = ctx.spaces.get(frozen)
        if space is None:
            vendor = ctx.named.vendor if ctx.named is not None else None
            max_warps = min((g.max_threads for g in ctx.groups if g.max_threads), default=32)
            space = ctx.spaces[frozen] = ConfigSpace.for_entry(meta, entry, vendor, max_warps,
                                                               lock_block_m=shares_block_m(table), table=ctx.values)
        search_key = bucket_key(key) if ctx.bucketed else key
        memo_key = (meta.family, meta.dtype, meta.block_shape, meta.per_channel_quant, meta.engine, meta.E, meta.N,
                    meta.K, meta.down, meta.triton_folder, search_key, frozen, ctx.groups,
                    tuple(d.key for d, _ in ctx.ranking),
                    self.unsafe, space.domain, space.groups)
        found = self._plan_memo.get(memo_key)
        if found is None:
            found = self._search(table, ctx, search_key, entry, space)
            self._plan_memo[memo_key] = found
        if isinstance(found, str):
            return found
        chosen, depth, hidden, naive, preds, source, default = found
        applicability = Applicability.UNSAFE if space.changes_accumulation(chosen) else Applicability.SAFE
        changes = space.changes(chosen)
        reasons = {}
        for k in changes:
            back = dict(chosen)
            if k in entry:
                back[k] = entry[k]
            else:
                back.pop(k, None)
            if not self.fits(ctx, back):
                reasons[k] = "to fit"
            else:
                reasons[k] = "engine default" if source == "engine default" else "for speed"
        edits = entry_edits(table.doc, key, entry, chosen)
        # need() of both on every limited group, the memo keys' parts found once
        before, after = smem_key(meta.family, entry), smem_key(meta.family, chosen)
        needs = tuple(Need(g, self._need(meta, ctx.kernel_key, before, entry, g.arch, g.vendor) if g.limit else None,
                           self._need(meta, ctx.kernel_key, after, chosen, g.arch, g.vendor) if g.limit else None)
                      for g in ctx.groups)
        fix = Fix(title=fix_title(entry, changes, needs), edits=edits, applicability=applicability,
                  expected={pointer_to_str((key,)): dict(chosen)})
        return EntryPlan(path=table.path, key=key, original=dict(entry), entry=dict(chosen), changes=changes,
                         applicability=applicability, fix=fix, needs=needs, depth=depth, predicted=preds,
                         naive=naive, hidden_unsafe=hidden, shape_model=ctx.shape_model(key),
                         device=ctx.named.key if ctx.named is not None else None, reasons=reasons, source=source,
                         engine_default=dict(default) if default is not None else None)

    def _search(self, table, ctx, key, entry, space: ConfigSpace):
        """(chosen entry, depth, hidden unsafe entry or None, naive entry, predictions, where the choice
        came from, the engine default or None) or a reason."""
        walk = self._nearest(ctx, space)
        nearest, first, naive = walk.fitting, walk.first, walk.naive
        if not nearest:
            return f"no config within {self.max_depth} edits fits every target"
        fitting = list(nearest)
        fitting_keys = list(walk.keys)  # the cfg_key of each of fitting
        seen = set(walk.seen)  # the climb adds the nodes it visits
        M = batch_size(key)
        depth_of = dict(walk.depth_of)
        # the naive fix is always a candidate: the choice is never predicted worse than it
        if naive is not None:
            ck = cfg_key(naive)
            if ck not in depth_of:
                depth_of[ck] = space.distance(naive)
                fitting.append((naive, depth_of[ck]))
                fitting_keys.append(ck)
        # the engine's own default for this batch size, when it fits every target
        default = engine_default(ctx.meta, M, entry, space) if self.rank else None
        if default is not None and not self.fits(ctx, default):
            default = None
        if default is not None:
            ck = cfg_key(default)
            if ck not in depth_of:
                depth_of[ck] = first  # an engine-chosen config: no edit penalty
                fitting.append((default, first))
                fitting_keys.append(ck)
        ctx.default = default
        ctx.naive = naive
        ctx.space = space
        ctx.walk = walk
        ctx.default_trust = self._default_trust(ctx, key, M, default)
        if not self.rank:
            ranked = [(c, float(d)) for c, d in sorted(fitting, key=lambda cd: cd[1])]
        else:
            ranked = self._rank(ctx, key, M, [c for c, _ in fitting], entry, depth_of, first, fitting_keys)
        # beam search: climb from the best few along the graph while the model sees gains
        if self.rank and self.beam_width and ranked and M is not None:
            ranked = self._climb(ctx, key, M, entry, space, ranked, seen, depth_of, first)
        # GROUP_SIZE_M one step on the best few: same bytes, same rules, maybe faster
        if self.rank and space.has_group and ranked:
            extra = []
            extra_keys = []  # their cfg_key values: the candidate's with the group changed
            for cand, _ in ranked[:GROUP_REFINE_TOP]:
                cand_key = cfg_key(cand)
                for g in space.group_values(cand["GROUP_SIZE_M"]):
                    alt = dict(cand)
                    alt["GROUP_SIZE_M"] = g
                    ck = cand_key[:3] + (g,) + cand_key[4:]
                    # a ranked candidate is in the family's domain (it fits, or is such an
                    # alternative): the alternative is, where its group is
                    if ck not in depth_of and _group_in_domain(ctx.meta.family, g):
                        depth_of[ck] = depth_of[cand_key] + 1
                        extra.append(alt)
                        extra_keys.append(ck)
            if extra:
                ranked = sorted(ranked + self._rank(ctx, key, M, extra, entry, depth_of, first, extra_keys),
                                key=lambda r: r[1])
        safe = [r for r in ranked if not space.changes_accumulation(r[0])]
        unsafe_first = ranked[0] if ranked and space.changes_accumulation(ranked[0][0]) else None
        if self.unsafe or not safe:
            order = ranked
        else:
            order = safe
        chosen = None
        for cand, _score in order[:RULE_CHECK_TRIES]:
            if self._rules_accept(table, key, cand, entry):
                chosen = cand
                break
        if chosen is None:
            return "no fitting candidate passes the other rules"
        if self.rank and ANCHOR_MARGIN > 0:
            chosen = self._anchored(table, ctx, key, M, chosen, [default, naive], order is safe, entry)
        kept = self._keep_group(table, ctx, key, M, entry, chosen, default)
        if kept is not chosen:
            depth_of[cfg_key(kept)] = depth_of[cfg_key(chosen)]
            chosen = kept
        hidden = None
        if self.rank and not self.unsafe and unsafe_first is not None and safe and unsafe_first[0] is not chosen:
            hidden = unsafe_first[0]
        preds = self._predictions(ctx, key, M, entry, chosen, naive, default)
        source = "search"
        if naive is not None and cfg_key(chosen) == cfg_key(naive):
            source = "naive fix"
        elif default is not None and cfg_key(chosen) == cfg_key(default):
            source = "engine default"
        return chosen, depth_of[cfg_key(chosen)], hidden, naive, preds, source, default

    def _nearest(self, ctx, space: ConfigSpace) -> "_SpaceWalk":
        """The walk's :class:`_SpaceWalk` (the fitting configs of the breadth-first walk from the
        entry, with their depths; the nodes it visited; the depth of the first layer with a
        fitting config, or None; the naive fix), memoised per (fit memo, space): none of it reads
        the batch size, and the entries of a table (and of the tables of one kernel and targets)
        repeat configs across batch sizes (2186 searches of a cold corpus run walk 624 distinct
        spaces). The walk stops ``extra_depth`` layers after the first fitting one, at
        ``max_depth`` and after ``max_nodes`` nodes. The configs are shared by the searches: read,
        never changed."""
        # the entry's values with their types (a space's equality takes 2.0 for 2: the configs
        # carry the entry's other values)
        k = (ctx.fit_id, tuple((name, v, type(v)) for name, v in space.original), space)
        hit = self._nearest_memo.get(k)
        if hit is not None:
            return hit
        entry = space.entry
        group0 = entry.get("GROUP_SIZE_M") if space.has_group else None
        fitting: list[tuple[dict, int]] = []
        first = None
        visited = 0
        seen: set = set()
        for depth, layer in enumerate(space.layers(self.max_depth)):
            if first is not None and depth > first + self.extra_depth:
                break
            for node in layer:
                visited += 1
                seen.add(node)
                cand = space.to_entry(node, group0)
                if depth and self.fits(ctx, cand):
                    fitting.append((cand, depth))
            if fitting and first is None:
                first = depth
            if visited >= self.max_nodes:
                break
        naive = naive_fix(entry, lambda e: self.fits(ctx, e), space) if fitting else None
        keys = tuple(cfg_key(c) for c, _ in fitting)
        hit = self._nearest_memo[k] = _SpaceWalk(tuple(fitting), frozenset(seen), first, naive, keys,
                                                 {ck: d for ck, (_, d) in zip(keys, fitting)})
        return hit

    def _keep_group(self, table, ctx, key, M, entry, chosen, default):
        """``chosen`` with the entry's own GROUP_SIZE_M when the model predicts no gain from the
        change (GROUP_SIZE_M never changes shared memory: the ranking's trust region alone moved
        it; issue 12), else ``chosen``. The engine's default is left whole."""
        group = entry.get("GROUP_SIZE_M")
        if (not self.rank or not ctx.space.has_group or group is None or chosen.get("GROUP_SIZE_M") == group
                or (default is not None and cfg_key(chosen) == cfg_key(default))
                or not ctx.ranking or ctx.shape(key, M) is None):
            return chosen
        back = dict(chosen)
        back["GROUP_SIZE_M"] = group
        if not in_domain(ctx.meta.family, back) or not self.fits(ctx, back):
            return chosen
        if self._model_log_time(ctx, key, M, back) > self._model_log_time(ctx, key, M, chosen) + GROUP_GAIN:
            return chosen
        return back if self._rules_accept(table, key, back, entry) else chosen

    def _predictions(self, ctx, key, M, entry, chosen, naive, default) -> dict:
        """device key -> predicted microseconds of the original, the chosen, the naive fix and
        the engine default at batch size ``M``."""
        preds = {}
        # a key that is no batch size ("1e3", "abc") has no shape to predict: nearest fit, unranked
        if not self.rank or ctx.shape(key, M) is None:
            return preds
        family = ctx.meta.family
        # (name, config, its cfg_key, its smem_key), found once for every device
        named = [(name, c, cfg_key(c), smem_key(family, c))
                 for name, c in (("chosen", chosen), ("original", entry), ("naive", naive), ("engine_default", default))
                 if c is not None]
        _memo, predictors = self._ranking_memos(ctx, key, M)
        for (dev, _w), p in zip(ctx.ranking, predictors):
            preds[dev.key] = {name: self._predicted_on(ctx, p, ck, skey, c) for name, c, ck, skey in named}
        return preds

    def _anchored(self, table, ctx, key, M, chosen, anchors, safe_only: bool, original: Mapping):
        """``chosen``, or the anchor (engine default or naive fix) the model predicts fastest when
        ``chosen`` is not predicted faster than it by more than ``ANCHOR_MARGIN``. An anchor counts
        only when it is of an allowed class of safety (SAFE where ``safe_only``: it is among the
        configs the choice was made from, which hold every ranked config of that class, the
        anchors among them) and the engine's rules accept it."""
        if not ctx.ranking or ctx.shape(key, M) is None:
            return chosen
        space = ctx.space
        best = None
        chosen_time = self._model_log_time(ctx, key, M, chosen)
        for a in anchors:
            if a is None or (safe_only and space.changes_accumulation(a)):
                continue
            if cfg_key(a) == cfg_key(chosen):
                return chosen
            t = self._model_log_time(ctx, key, M, a)
            # an anchor predicted slower than the margin allows is never taken, and the best
            # accepted anchor is never one: its rules are not asked (a probe of the engine's
            # check: a third of them went to such anchors)
            if t - chosen_time > ANCHOR_MARGIN:
                continue
            if not self._rules_accept(table, key, a, original):
                continue
            if best is None or t < best[1]:
                best = (a, t)
        if best is not None and best[1] - chosen_time <= ANCHOR_MARGIN:
            return best[0]
        return chosen

    def _model_log_time(self, ctx, key, M, entry) -> float:
        """The ranking devices' weighted mean log predicted time (no priors, no trust region)."""
        total = sum(w for _, w in ctx.ranking)
        return sum(w * t for (_dev, w), t in zip(ctx.ranking, self._log_times(ctx, key, M, entry))) / total

    def _log_times(self, ctx, key, M, entry) -> tuple[float, ...]:
        """The log predicted time of ``entry`` on each ranking device, in ``ctx.ranking``'s order
        (memoised per shape, ranking and config: the ranking asks for each candidate on every
        device, and again in later searches of the same batch size)."""
        return self._log_times_of(ctx, key, M, (entry,))[0]

    def _log_times_of(self, ctx, key, M, entries: Sequence[Mapping],
                      keys: Sequence[tuple] | None = None) -> list[tuple[float, ...]]:
        """:meth:`_log_times` of each of ``entries`` (a ranking's candidates, in one loop; ``keys``:
        their ``cfg_key`` values, when the caller has them)."""
        memo, predictors = self._ranking_memos(ctx, key, M)
        loops = [(p.memo, p.needs, p.time.of_key, p.device) for p in predictors]  # read once, not per candidate
        family = ctx.meta.family
        meta = ctx.meta
        log = math.log
        need_in = self._need_in
        out = []
        for i, entry in enumerate(entries):
            ck = cfg_key(entry) if keys is None else keys[i]
            hit = memo.get(ck)
            if hit is None:
                skey = smem_key(family, entry)
                times = []
                for pm, needs, of_key, dev in loops:
                    t = pm.get(ck)
                    if t is None:
                        try:  # the need memo's answer (most are), else _need_in finds it
                            smem = needs[skey]
                        except (KeyError, TypeError):
                            smem = need_in(needs, meta, skey, entry, dev.arch, dev.vendor)
                        t = pm[ck] = of_key(ck, smem or 0)
                    times.append(log(t))
                hit = memo[ck] = tuple(times)
            out.append(hit)
        return out

    def _ranking_memos(self, ctx, key, M):
        """(the log-time memo of ``key``'s shape and ``ctx``'s ranking: config -> log times, one
        ``_Predictor`` per ranking device), looked up once per batch key of a table."""
        hit = ctx._memos.get(key)
        if hit is None:
            shape = ctx.shape(key, M)
            memo = self._log_memo.setdefault((ctx.kernel_key, shape, ctx.ranking_keys), {})
            hit = ctx._memos[key] = (memo, tuple(self._predictor(ctx, shape, dev) for dev, _ in ctx.ranking))
        return hit

    def _predictor(self, ctx, shape, dev) -> "_Predictor":
        from tilefit.perf.model import time_predictor

        return _Predictor(dev, self._pred_memo.setdefault((ctx.kernel_key, shape, dev.key), {}),
                          time_predictor(shape, dev, self._coeffs(dev)),
                          self._need_table(ctx.kernel_key, dev.arch, dev.vendor))

    def _predicted_on(self, ctx, p: "_Predictor", ck: tuple, skey: tuple, entry: Mapping) -> float:
        """Predicted microseconds of ``entry`` (its ``cfg_key`` and ``smem_key`` given) on
        ``p``'s device (memoised: see :meth:`_predict`)."""
        hit = p.memo.get(ck)
        if hit is None:
            dev = p.device
            smem = self._need_in(p.needs, ctx.meta, skey, entry, dev.arch, dev.vendor)
            hit = p.memo[ck] = p.time.of_key(ck, smem or 0)
        return hit

    def _climb(self, ctx, key, M, entry, space: ConfigSpace, ranked, seen: set, depth_of: dict, first: int):
        frontier = [c for c, _ in ranked[:self.beam_width]]
        frontier_keys = [cfg_key(c) for c in frontier]
        walk = ctx.walk
        entries, distances = walk.entries, walk.distances
        for _ in range(self.beam_steps):
            new = []
            new_keys = []  # their cfg_key values (computed once per candidate)
            for cand in frontier:
                node = space.node_of(cand)
                if not space.in_lattice(node):
                    continue
                group = cand.get("GROUP_SIZE_M") if space.has_group else None
                for nb in space.neighbours(node):
                    if nb in seen:
                        continue
                    seen.add(nb)
                    made = entries.get((nb, group))
                    if made is None:
                        alt = space.to_entry(nb, group)
                        made = entries[(nb, group)] = (alt, cfg_key(alt))
                    alt, ck = made
                    if ck not in depth_of and self._fits_key(ctx, alt, ck):
                        d = distances.get(ck)
                        if d is None:
                            d = distances[ck] = space.distance(alt)
                        depth_of[ck] = d
                        new.append(alt)
                        new_keys.append(ck)
            if not new:
                break
            ranked = sorted(ranked + self._rank(ctx, key, M, new, entry, depth_of, first, new_keys),
                            key=lambda r: r[1])
            top = [c for c, _ in ranked[:self.beam_width]]
            top_keys = [cfg_key(c) for c in top]
            if top_keys == frontier_keys:
                break
            frontier = top
            frontier_keys = top_keys
        return ranked

    # -- ranking -------------------------------------------------------------------------------
    def _predict(self, ctx, key, M, entry, dev) -> float:
        """Predicted microseconds on ranking device ``dev``, memoised per (kernel, shape, device,
        config): the kernel too, since the prediction reads the config's shared memory, which one
        shape's tables of other kernels (SGLang's triton_X_Y_Z folders) need differently."""
        _memo, predictors = self._ranking_memos(ctx, key, M)
        p = next(p for p in predictors if p.device is dev)
        return self._predicted_on(ctx, p, cfg_key(entry), smem_key(ctx.meta.family, entry), entry)

    def _default_trust(self, ctx, key, M, default) -> float:
        """``DEFAULT_TRUST`` times the DRAM share of the default's predicted time on the file's
        own device (0 without a default or a prediction): the cost of one edit step away from
        the default."""
        if default is None or ctx.named is None or ctx.shape(key, M) is None:
            return 0.0
        from tilefit.perf import predict

        smem = self.need(ctx.meta, default, ctx.named.arch, ctx.named.vendor)
        pred = predict(default, ctx.shape(key, M), ctx.named, self._coeffs(ctx.named), smem_bytes=smem or 0)
        return DEFAULT_TRUST * min(1.0, pred.dram_us / max(pred.time_us, 1e-9))

    def _coeffs(self, dev):
        hit = self._coeff_memo.get(dev.key)
        if hit is None:
            from tilefit.perf import load_coefficients

            given = self.coefficients.get(dev.key) if isinstance(self.coefficients, Mapping) else None
            hit = given or load_coefficients(dev)
            self._coeff_memo[dev.key] = hit
        return hit

    def _rank(self, ctx, key, M, candidates: Iterable[dict], original: Mapping, depth_of: Mapping,
              first: int, keys: Sequence[tuple] | None = None) -> list[tuple[dict, float]]:
        """(candidate, score) fastest first. The score is the weighted geometric mean of the
        predicted times, with two priors: on the file's own device, where the original entry
        was measured best by a tuner, a predicted gain over the original is shrunk by
        ``TUNED_PRIOR`` (in log space); and each edit beyond the nearest fitting layer costs
        ``EDIT_PENALTY`` (the model is less sure the farther a config is from a measured one)."""
        candidates = list(candidates)
        if keys is None:  # the candidates' cfg_key values (the caller may have them)
            keys = [cfg_key(c) for c in candidates]
        if not ctx.ranking or ctx.shape(key, M) is None:
            # nothing to rank with: keep edit-distance order
            return sorted(((c, float(depth_of[k])) for c, k in zip(candidates, keys)), key=lambda r: r[1])
        total = sum(w for _, w in ctx.ranking)
        named = ctx.named.key if ctx.named is not None else None
        # per ranking device, the original's log time where it is the file's own device, else None
        base = tuple(t if dev.key == named else None
                     for (dev, _), t in zip(ctx.ranking, self._log_times(ctx, key, M, original)))
        weights = tuple(w for _, w in ctx.ranking)
        has_default = ctx.default is not None
        if has_default:
            steps = ctx.space.steps_from(ctx.default)
            known_steps = ctx.walk.steps.setdefault(cfg_key(ctx.default), {})
            trust = ctx.default_trust
        log1p, exp = math.log1p, math.exp
        out = []
        for cand, ck, times in zip(candidates, keys, self._log_times_of(ctx, key, M, candidates, keys)):
            s = 0.0
            for w, t, b in zip(weights, times, base):
                if b is not None and t < b:
                    t = b + TUNED_PRIOR * (t - b)
                s += w * t
            s = s / total
            if has_default:
                # the trust region around the engine's default replaces the distance from the
                # original (the report shows both predictions)
                n = known_steps.get(ck)
                if n is None:
                    n = known_steps[ck] = steps(cand)
                s += log1p(trust * n)
            else:
                s += log1p(EDIT_PENALTY * max(0, depth_of[ck] - first))
            out.append((cand, exp(s)))
        out.sort(key=lambda r: r[1])
        return out

    # -- the engine's rules on a candidate -------------------------------------------------------
    def _signature(self, table: ConfigTable, key: str, entry: Mapping) -> frozenset:
        """``(code, pointer, target)`` of what the engine's rules (those the user selected, file
        rules aside) find in ``entry`` as the only entry of a table at ``table``'s path,
        memoised: what :meth:`_rules_accept` compares a candidate by."""
        k = (table.path, table.meta, key, freeze(entry))
        hit = self._sig_memo.get(k)
        if hit is not None:
            return hit
        # the rules judge the entry as the engine would read it from a table holding it: as
        # json.load reads its text back where that differs (a tuple as a list)
        read = entry if _reads_back(entry) else json.loads(json.dumps({key: entry}))[key]
        hit = self._sig_memo[k] = self.prober.entry_signature(table, key, read)
        return hit

    def _rules_accept(self, table, key, cand, original: Mapping) -> bool:
        """Whether the rules find in ``cand`` no fixable diagnostic and none that ``original`` (the
        entry being fixed) does not have. The original's signature is asked only when ``cand``
        has a diagnostic to compare (most accepted candidates have none)."""
        sig = self._signature(table, key, cand)
        if not sig:
            return True
        if any(code in FIXABLE for code, _, _ in sig):
            return False
        # pointers of changed values move: compare codes per entry, not exact pointers
        before = {(c, t) for c, _, t in self._signature(table, key, original)}
        return all((c, t) in before for c, _, t in sig)


# JSON values that a dump and json.load give back equal and of the same type
_PLAIN_TYPES = frozenset((int, bool, str, type(None)))


def _reads_back(entry: Mapping) -> bool:
    """Whether ``json.loads(json.dumps(entry))`` is ``entry`` again, value by value and type by
    type (what the engine would read from a table holding it): integers that ``json.dumps``
    writes (64 bits, far below ``int``'s digit limit), booleans, strings, null and finite
    floats (written by repr, read back exactly); an infinity, a NaN or a nested value is not
    promised."""
    for v in entry.values():
        t = type(v)
        if t is int:
            if v.bit_length() > 64:
                return False
        elif t is float:
            if not math.isfinite(v):
                return False
        elif t not in _PLAIN_TYPES:
            return False
    return True


class _NeedMemo(dict):
    """One kernel key's needs on one arch (``smem_key`` -> need), with the kernel variants memo
    (``smem_key`` -> variants) it shares with the other archs of its launch key."""

    __slots__ = ("variants",)

    def __init__(self, variants: dict):
        super().__init__()
        self.variants = variants


@dataclass
class _SpaceWalk:
    """What the searches of one space (and fit memo) share, whatever their batch size: the
    breadth-first walk's answer (:meth:`FixPlanner._nearest`) and what the climbs and rankings
    find of the space's configs (each a function of the space and the config's ``cfg_key``).
    The entries are shared by the searches: read, never changed."""

    fitting: tuple  # (config, depth) of the walk's fitting configs
    seen: frozenset  # the nodes the walk visited
    first: int | None  # the depth of the first layer with a fitting config
    naive: Mapping | None  # the naive fix
    keys: tuple  # the cfg_key of each fitting config
    depth_of: dict  # cfg_key -> depth, of the fitting configs
    entries: dict = field(default_factory=dict)  # (node, GROUP_SIZE_M) -> (space.to_entry, its cfg_key)
    distances: dict = field(default_factory=dict)  # cfg_key -> space.distance
    steps: dict = field(default_factory=dict)  # the engine default's cfg_key -> cfg_key -> steps from it


@dataclass(frozen=True)
class _Predictor:
    """One ranking device's predictions for one kernel and shape: its memo (config key ->
    microseconds) and the model's time function for the shape on the device."""

    device: object
    memo: dict
    time: object  # tilefit.perf.model.time_predictor(shape, device, coefficients)
    needs: dict  # the planner's need memo of the kernel on the device's arch (_need_table)


@dataclass
class _TableContext:
    meta: object
    kernel_key: tuple
    fit_id: int  # names (kernel_key, groups) in the fit memo
    named: object
    devices: tuple
    groups: tuple[FitGroup, ...]
    ranking: list  # [(device, weight)]
    values: Mapping = field(default_factory=dict)  # per key, the values the table uses
    default: Mapping | None = None  # the engine default of the entry being planned
    default_trust: float = 0.0  # cost of an edit step away from it (DEFAULT_TRUST x predicted DRAM share)
    space: object = None  # the ConfigSpace of the entry being planned
    walk: object = None  # its _SpaceWalk
    naive: Mapping | None = None  # the naive fix of the entry being planned
    bucketed: bool = False  # plan per batch-size bucket (a table of over LARGE_TABLE_ENTRIES entries)
    _shapes: dict = field(default_factory=dict)
    _memos: dict = field(default_factory=dict)  # batch key -> FixPlanner._ranking_memos' answer
    spaces: dict = field(default_factory=dict)  # an entry's items, typed (freeze) -> its ConfigSpace
    fit_table: dict | None = None  # the fit memo of fit_id (FixPlanner.fits)
    limit_checks: tuple | None = None  # (group, its need memo) in by_limit's order (FixPlanner._fits)

    @property
    def ranking_keys(self) -> tuple[str, ...]:
        """The ranking devices' keys (with ``ranking``'s order, what a log-time memo is keyed by)."""
        hit = self.__dict__.get("_ranking_keys")
        if hit is None:
            hit = self.__dict__["_ranking_keys"] = tuple(d.key for d, _ in self.ranking)
        return hit

    @property
    def warp_caps(self) -> tuple[tuple[str, int], ...]:
        """(vendor, the fewest warps per block any of its groups allows) for each vendor of the
        groups with a thread limit: what the fit check's thread test reads of them (a config fits
        every group's limit when it fits the smallest)."""
        hit = self.__dict__.get("_warp_caps")
        if hit is None:
            caps: dict[str, int] = {}
            for g in self.groups:
                if g.max_threads is not None:
                    caps[g.vendor] = min(caps.get(g.vendor, g.max_threads), g.max_threads)
            hit = self.__dict__["_warp_caps"] = tuple(caps.items())
        return hit

    @property
    def by_limit(self) -> tuple[FitGroup, ...]:
        """The groups with a shared-memory limit, tightest first (the fit check's order)."""
        hit = self.__dict__.get("_by_limit")
        if hit is None:
            hit = tuple(sorted((g for g in self.groups if g.limit is not None), key=lambda g: g.limit))
            self.__dict__["_by_limit"] = hit
        return hit

    def shape(self, key: str, M: int | None):
        if M is None:
            return None
        if key not in self._shapes:
            from tilefit.perf import shape_for

            self._shapes[key] = shape_for(self.meta, M)
        return self._shapes[key]

    def shape_model(self, key: str) -> str | None:
        s = self._shapes.get(key)
        return s.model if s is not None else None


def shares_block_m(table: ConfigTable) -> bool:
    """SGLang runs the down GEMM with the up entry's BLOCK_SIZE_M: a ``_down`` table, and an up
    table with a ``_down`` twin beside it, keep BLOCK_SIZE_M."""
    meta = table.meta
    if not has_down_tables(meta.family):
        return False
    if meta.down:
        return True
    if meta.engine == "vllm":
        return False
    path = table.path
    if not path.endswith(".json"):
        return False
    return os.path.exists(path[: -len(".json")] + "_down.json")


def engine_default(meta, M: int | None, entry: Mapping, space: ConfigSpace) -> dict | None:
    """vLLM's ``get_default_config`` for a fused-MoE table's batch size, in the entry's key order
    (keys the entry lacks are added, launch options only where they differ from Triton's
    default); None for other families, unknown sizes, and defaults outside the space."""
    from tilefit.perf.shapes import moe_model
    from tilefit.variants import dtype_path

    from .defaults import vllm_default_config

    if M is None or meta.family != "fused_moe" or meta.down or meta.E is None or meta.N is None:
        return None
    dtype = dtype_path(meta)
    if dtype not in ("bf16", "fp16", "fp8_w8a8"):
        return None
    hidden, top_k, _ = moe_model(meta.E, meta.N)
    block = list(meta.block_shape) if meta.block_shape and min(meta.block_shape) > 0 else None
    cfg = vllm_default_config(M, meta.E, meta.N, hidden, top_k, dtype, block if dtype == "fp8_w8a8" else None,
                              rocm=space.default_stages == 2)
    out = space.to_entry(space.node_of(cfg), cfg["GROUP_SIZE_M"] if space.has_group else None)
    for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"):
        out[k] = cfg[k]
    if not space.has_group or not space.in_domain(out):
        return None
    return out


def bucket_key(key: str) -> str:
    """The batch size of ``key`` rounded to ``BUCKET_BITS`` significant bits, as a key (a key
    that is no batch size is its own bucket)."""
    M = batch_size(key)
    if M is None or M.bit_length() <= BUCKET_BITS:
        return key
    shift = M.bit_length() - BUCKET_BITS
    return str(((M + (1 << (shift - 1))) >> shift) << shift)


def batch_size(key: str) -> int | None:
    try:
        M = int(key)
    except (TypeError, ValueError):
        return None
    return M if M > 0 else None


def _supports(dev, meta) -> bool:
    from tilefit.variants import dtype_path

    if dtype_path(meta) == "fp8_w8a8" and dev.triton_fp8_dtypes is not None and "fp8e4nv" not in dev.triton_fp8_dtypes:
        return False
    return True


def _complete(dev) -> bool:
    return bool(dev.sm_count and dev.memory_bandwidth_gbps and dev.tensor_tflops)


def ranking_devices(named, devices: Sequence, meta) -> list[tuple[object, float]]:
    """The devices candidates are ranked on, with weights: the file's own device
    (``NAMED_WEIGHT``: it is where the engine loads the file) and, for the rest, one representative
    per tensor-core family of the targets (mma.sync, wgmma, tcgen05, MFMA, ...): the device with
    the median memory bandwidth among those with complete data. Devices that cannot run the
    table's dtype (fp8 before sm_89) are left out."""
    others: dict[str, list] = {}
    for d in devices:
        if (named is not None and d.key == named.key) or not _supports(d, meta):
            continue
        others.setdefault(d.mma or d.arch, []).append(d)
    reps = []
    for devs in others.values():
        full = sorted((d for d in devs if _complete(d)), key=lambda d: (d.memory_bandwidth_gbps, d.key))
        reps.append(full[(len(full) - 1) // 2] if full else devs[0])
    out: list[tuple[object, float]] = []
    if named is not None and _supports(named, meta):
        out.append((named, NAMED_WEIGHT if reps else 1.0))
        out.extend((r, (1.0 - NAMED_WEIGHT) / len(reps)) for r in reps)
    else:
        out.extend((r, 1.0 / len(reps)) for r in reps)
    return out


def naive_fix(entry: Mapping, fits, space: ConfigSpace | None = None) -> dict | None:
    """The naive fix: lower num_stages (not below 2) until it fits, then halve the largest block
    (ties: N, then M, then K) until it fits. None when nothing fits."""
    cur = dict(entry)
    default_stages = space.default_stages if space is not None else 3
    for _ in range(64):
        if fits(cur):
            return cur
        stages = cur.get("num_stages", default_stages)
        if is_int(stages) and stages > 2:
            cur["num_stages"] = stages - 1
            continue
        dims = [("BLOCK_SIZE_N", 0), ("BLOCK_SIZE_M", 1), ("BLOCK_SIZE_K", 2)]
        name = max(dims, key=lambda d: (cur[d[0]], -d[1]))[0]
        if cur[name] <= 16:
            return None
        cur[name] = cur[name] // 2
    return None


def fix_title(original: Mapping, changes: Mapping, needs: Sequence[Need]) -> str:
    parts = []
    for k, v in changes.items():
        if k in original:
            parts.append(f"{k} {original[k]} -> {v}")
        else:
            parts.append(f"add {k}={v}")
    tight = [n for n in needs if n.after is not None and n.group.limit]
    detail = ""
    if tight:
        n = min(tight, key=lambda n: n.group.limit - n.after)
        detail = f" ({n.after} of {n.group.limit} bytes on {n.group.arch})"
    return "Set " + ", ".join(parts) + detail
