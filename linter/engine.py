"""The engine: parse each file once, resolve its targets, run the selected rules, and turn
their findings into positioned diagnostics.

Entry and target rules are pure functions of an entry's values and a context key (the table's
kernel, the device class), so their findings are memoised: real tables repeat the same configs
across batch sizes and files, and a corpus of 13 000 entries has a few thousand distinct ones.
So are an entry's target findings merged over a file's device classes, with their messages
filled in: only the batch size and the position differ between two tables' copies.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple, Sequence

from .jsonenc import dumps_sorted_default_str
from .jsonpos import pointer_to_str, pointer_within
from .model import FILE_START, Diagnostic, Position, Span, build_frozen, fingerprint_of
from .paths import project_path
from .selection import Selection
from .serving.launch import arch_key as launch_arch_key, swap_can_apply
from .serving.naming import device_for_file_name
from .families import kernel_key as table_kernel_key
from .dtypes import missing_fp8_type
from tilefit.device_db.names import arch_order
from .tables import ConfigTable, batch_size_of
from .entrytext import entry_texts
from . import kernels
from .variants import dtype_path, kernel_variants, table_kernel
from tilefit.rules import RULES, Finding, Rule, Scope
from tilefit.rules.base import ARCH, TARGETS, EntryContext, FileContext, TargetContext, format_targets


@dataclass(frozen=True)
class DeviceClass:
    """Devices that get identical verdicts: same arch and the same limits."""

    devices: tuple

    @property
    def first(self):
        return self.devices[0]


def class_key(dev) -> tuple:
    return (dev.arch, dev.vendor, dev.smem_per_block_optin, dev.smem_per_sm, dev.reserved_smem_per_block,
            dev.max_threads_per_block, dev.warp_size, dev.triton_fp8_dtypes)


def group_devices(devices: Iterable) -> list[DeviceClass]:
    groups: dict[tuple, list] = {}
    for dev in devices:
        groups.setdefault(class_key(dev), []).append(dev)
    return [DeviceClass(tuple(v)) for v in groups.values()]


def variants_fit(estimator, variants, arch: str, limit: int) -> bool:
    """Whether every variant's estimate on ``arch`` is usable and certainly fits ``limit``, and
    none is a known compile failure: then the rules silent where the variants fit
    (``Rule.silent_when_variants_fit``) find nothing, and are not called. Asks the estimator what
    those rules ask it, in their order (its memos answer them, and a deferred compile is recorded
    as they would record it: :meth:`Estimator.variants_fit`)."""
    return estimator.variants_fit(variants, arch, limit)


def _freeze(entry) -> str:
    """A hashable identity of an entry's values: its repr, which tells 1, 1.0 and true apart."""
    return repr(entry)


# where a figure comes from (an arch's compile, form or proof) is not what a merge compares: two
# device classes with the same message and figures share one diagnostic (its data: the first's)
_PROVENANCE_KEYS = ("figure_from", "estimator", "estimate_status", "max_error_bytes")


def _finding_key(rule, finding) -> tuple:
    """Findings of two device classes merge when everything but the targets (and the figures'
    provenance) is equal."""
    if finding.data:
        data = dumps_sorted_default_str({k: v for k, v in finding.data.items() if k not in _PROVENANCE_KEYS})
    else:  # most findings carry no data (VAL005, DEV002): its JSON text without the encoder
        data = "{}" if type(finding.data) is dict else dumps_sorted_default_str(finding.data)
    return (rule.code, finding.message, tuple(finding.at), finding.at_key, finding.severity, data,
            finding.identity)


class MergedFinding(NamedTuple):
    """A target finding merged over the device classes that got it, its message filled in."""

    rule: Rule
    finding: Finding
    targets: tuple  # device keys, in class order
    archs: tuple  # sorted
    message: str
    once: tuple | None  # the per-file identity of a once-per-file rule's finding


@dataclass
class RunStats:
    files: int = 0
    entries: int = 0


@dataclass
class Engine:
    db: object  # tilefit.device_db.DeviceDB
    estimator: object  # tilefit.estimate.Estimator
    selection: Selection = field(default_factory=Selection)
    extra_targets: Sequence = ()  # Device objects added to every table's targets
    stats: RunStats = field(default_factory=RunStats)
    callsites: object | None = None  # tilefit.pyengine.CallsiteOptions for Python files
    rule_options: Mapping = field(default_factory=dict)  # code -> validated [tool.tilefit.rules.CODE]
    # The project root: fingerprints hold paths relative to it, so a baseline holds from any folder.
    root: str | None = None

    def __post_init__(self):
        self._rules: dict[Scope, list[Rule]] = {s: [] for s in Scope}
        for code, cls in RULES.items():
            if self.selection.decides(code, cls.default_enabled):
                self._rules[cls.scope].append(cls(self.rule_options.get(code)))
        self._entry_memo: dict[tuple, tuple[Finding, ...]] = {}
        # (entry id, class id) -> (its findings, whether no rule that judged it read the launch-order
        # group); also (group-free id, class id) -> the same, where none did (see _merged_findings)
        self._target_memo: dict[tuple, tuple] = {}
        # (entry id, group-free id or kernel id: see _merged_findings; rule key id) -> findings
        self._rule_memo: dict[tuple, tuple] = {}
        self._rule_keys: dict[tuple, int] = {}  # (rule code, Rule.device_facts, unrunnable) -> rule key id
        self.rule_checks_asked = 0  # rule memo look-ups (rules with device facts) ...
        self.rule_checks_memoised = 0  # ... and the checks they ran
        self._variant_memo: dict[tuple, tuple] = {}  # (entry id, whether it may swap A and B there, vendor) -> variants
        self._swappable: dict[tuple, bool] = {}  # (engine, file dtype) -> serving.launch.swap_can_apply
        self._screened: dict[tuple, bool] = {}  # (group-free entry id, class id) -> variants_fit, see _merged_findings
        self._group_free: dict[int, int] = {}  # entry id -> its group-free id (see _group_free_id)
        self._group_free_ids: dict[tuple, int] = {}
        self._named_memo: dict[tuple, object] = {}
        self._intern: dict[tuple, int] = {}  # (kernel, _freeze(entry)) -> entry id
        self._kernel_ids: dict[tuple, int] = {}  # a table's kernel (see _table_walk) -> its id
        self._text_ids: dict[tuple, dict[str, int]] = {}  # kernel -> entry text -> entry id (see _entry_ids)
        self._finding_ids: dict[tuple, int] = {}  # _finding_key -> an id (what merged findings are keyed by)
        self._class_ids: dict[tuple, int] = {}
        self._file_targets_memo: dict[tuple, tuple] = {}
        self._merged_memo: dict[int, dict[int, tuple[MergedFinding, ...]]] = {}  # class list id -> entry id -> ...
        # (group-free entry id, whether the entry sets the group, class list id) -> merged findings
        # that no rule's reading of the group decided; see _merged_findings
        self._group_merged: dict[tuple, tuple[MergedFinding, ...]] = {}
        self.group_merged_hits = 0  # entries whose merged findings came from a group copy's
        self._class_plans: dict[tuple, tuple] = {}  # see _class_plan()
        self._device_sets: dict[tuple, tuple] = {}  # (class list id, class indices) -> Engine._device_set
        self._identities: dict[int, str] = {}
        if self.root is None:
            self.root = os.getcwd()
        self._project_paths: dict[str, str] = {}

    # -- public -----------------------------------------------------------------------------
    def check_table(self, table: ConfigTable) -> list[Diagnostic]:
        self.stats.files += 1
        meta = table.meta
        named = self.named_device(meta)
        fctx = FileContext(table=table, db=self.db, named_device=named, engine=meta.engine)
        ignored = self._ignored_in(table.path)
        has_doc = table.doc is not None
        fp_path = self.project_path(table.path)

        identities = self._identities
        path = table.path
        # each diagnostic's fields but its span, and what its span is found from (in a document:
        # the pointer and whether the finding is about the key; else the finding), in the order the
        # findings come: the spans are found together at the end, in one pass over the text
        found: list[dict] = []
        wanted: list = []

        def emit(rule: Rule, finding: Finding, base: tuple = (), target=None, entry=None, eid=None,
                 message=None, data=None):
            code = rule.code
            pointer = base + tuple(finding.at)
            ptr = pointer_to_str(pointer) if has_doc else None
            if ignored is not None and ignored(rule, ptr):
                return
            identity = finding.identity
            if identity is None:
                if entry is None:
                    identity = finding.message
                else:
                    identity = identities.get(eid)
                    if identity is None:
                        identity = dumps_sorted_default_str(entry)
                        identities[eid] = identity
            # Diagnostic's fields, in its order (the span filled in below)
            found.append({"code": code, "message": message or finding.message, "path": path, "span": None,
                          "severity": finding.severity or rule.severity, "pointer": ptr, "target": target,
                          "fix": None, "data": data if data is not None else dict(finding.data),
                          "fingerprint": fingerprint_of(code, fp_path, ptr, target, identity)})
            wanted.append((pointer, bool(finding.at_key)) if has_doc else finding)

        for rule in self._rules[Scope.FILE]:
            if rule.families is None or meta.family in rule.families:
                for finding in rule.check(fctx):
                    emit(rule, finding)

        if meta.is_triton_table and table.doc is not None and isinstance(table.value, dict):
            self._check_entries(table, fctx, emit)
        out: list[Diagnostic] = []
        for fields, span in zip(found, self._spans(table, wanted)):
            fields["span"] = span
            out.append(build_frozen(Diagnostic, fields))
        out.sort(key=lambda d: d.sort_key)
        return out

    def entry_signature(self, table: ConfigTable, key: str, entry: dict) -> frozenset:
        """``(code, pointer, target)`` of each diagnostic :meth:`check_table` gives a table that
        holds only ``{key: entry}`` (at ``table``'s path, with its name), one per target of a
        merged diagnostic: what the fix planner compares a candidate config by. Found without
        building that table or the diagnostics' positions, messages and fingerprints: entry and
        target rules read the entry, the table's name and the devices, never the table's text or
        its other entries. ``entry`` must be as ``json.load`` would read it back (the caller's
        promise); an engine that runs file rules cannot answer (ValueError)."""
        if self._rules[Scope.FILE]:
            raise ValueError("entry_signature: file rules read the whole table")
        sig: set = set()
        if not table.meta.is_triton_table:
            return frozenset(sig)
        ignored = self._ignored_in(table.path)

        def record(rule: Rule, finding: Finding, base: tuple = (), target=None, entry=None, eid=None,
                   message=None, data=None):
            ptr = pointer_to_str(base + tuple(finding.at))
            if ignored is not None and ignored(rule, ptr):
                return
            targets = (dict(finding.data) if data is None else data).get("targets")
            for t in targets or [target]:
                sig.add((rule.code, ptr, t))

        named = self.named_device(table.meta)
        fctx = FileContext(table=table, db=self.db, named_device=named, engine=table.meta.engine)
        self._check_entries(table, fctx, record, [(key, entry)])
        return frozenset(sig)

    def _ignored_in(self, path: str):
        """``ignored(rule, pointer)``: whether the selection's per-file ignores drop a finding of
        ``rule`` at ``pointer`` (its text; None for a file without a document) in the file
        ``path``; None when they drop nothing there (most files: no call per finding)."""
        whole_ignores, scoped_ignores = self.selection.file_ignores(path)
        if not whole_ignores and not scoped_ignores:
            return None
        decides = self.selection.decides

        def ignored(rule: Rule, ptr: str | None) -> bool:
            code = rule.code
            if whole_ignores and not decides(code, rule.default_enabled, whole_ignores):
                return True
            if scoped_ignores and ptr is not None:
                for scope_ptr, codes in scoped_ignores.items():
                    if pointer_within(ptr, scope_ptr) and not decides(code, rule.default_enabled, codes):
                        return True
            return False

        return ignored

    def check_python(self, paths: Sequence[str]):
        """Kernel call sites of the Python files ``paths`` (rules of scope CALLSITE), judged
        against the extra targets: a :class:`tilefit.pyengine.PythonRun`."""
        from .pyengine import check_python

        self.stats.files += len(paths)
        return check_python(self, paths, self._rules[Scope.CALLSITE], self.callsites)

    def has_callsite_rules(self) -> bool:
        return bool(self._rules[Scope.CALLSITE])

    def project_path(self, path: str) -> str:
        """``path`` relative to the project root (absolute outside it): what fingerprints and
        the baseline hold, whatever folder the run started in."""
        hit = self._project_paths.get(path)
        if hit is None:
            hit = self._project_paths[path] = project_path(path, self.root)
        return hit

    # -- internals ---------------------------------------------------------------------------
    def named_device(self, meta):
        """The device the table's file name names (engine-aware), memoised."""
        if meta.device_name is None:
            return None
        key = (meta.device_name, meta.engine, meta.family)
        if key not in self._named_memo:
            self._named_memo[key] = device_for_file_name(self.db, meta.device_name, meta.engine, meta.family)
        return self._named_memo[key]

    def _targets(self, named) -> list[DeviceClass]:
        """The device classes of the device ``named`` and the extra targets (Python call sites,
        whose dtypes are the kernel's parameters, are judged on every one)."""
        devices = []
        seen = set()
        for dev in ([named] if named is not None else []) + list(self.extra_targets):
            if dev.key not in seen:
                seen.add(dev.key)
                devices.append(dev)
        return group_devices(devices)

    def file_devices(self, meta) -> tuple[list, list]:
        """The devices a table is judged on, in the order messages list them: the device its
        file name names, then the extra targets in the user's order; and, apart, the extra
        targets that cannot run the table's dtype on Triton (fp8 e4m3 before sm_89): the engine
        does not run this kernel there, so only rules that say so (DEV002, as information) look
        at them. The device the file names is always judged in full."""
        named = self.named_device(meta)
        path = dtype_path(meta)
        judged, unrunnable = [], []
        seen = set()
        for dev in ([named] if named is not None else []) + list(self.extra_targets):
            if dev.key in seen:
                continue
            seen.add(dev.key)
            if dev is not named and missing_fp8_type(path, dev.triton_fp8_dtypes) is not None:
                unrunnable.append(dev)
            else:
                judged.append(dev)
        return judged, unrunnable

    def _file_targets(self, meta, named) -> tuple:
        """The device classes of a table, memoised per (named device, dtype path): an id of the
        class list (the key of merged findings), the classes, their class-key ids, which are
        extra targets that cannot run the kernel, and each device's place in the file's order."""
        key = (named.key if named is not None else None, dtype_path(meta))
        hit = self._file_targets_memo.get(key)
        if hit is None:
            judged, unrunnable = self.file_devices(meta)
            judged_classes, unrunnable_classes = group_devices(judged), group_devices(unrunnable)
            classes = judged_classes + unrunnable_classes
            flags = [False] * len(judged_classes) + [True] * len(unrunnable_classes)
            class_ids = [self._class_ids.setdefault((class_key(c.first), flag), len(self._class_ids))
                         for c, flag in zip(classes, flags)]
            order: dict[str, int] = {}
            for dev in ([named] if named is not None else []) + list(self.extra_targets):
                order.setdefault(dev.key, len(order))
            hit = (len(self._file_targets_memo), classes, class_ids, flags, order)
            self._file_targets_memo[key] = hit
        return hit

    def _table_walk(self, meta, target_rules, targets_id: int, classes, class_ids, flags, order) -> tuple:
        """What :meth:`_merged_findings` reads of a table, found once per table, not per entry: the
        table's meta, its class plan (see :meth:`_class_plan`), the family's launch-order group,
        whether entries may share merged findings with their group copies, whether the table's
        variants may swap A and B, whether the variants are screened (``variants_fit``), the class
        list's id, the classes, each device's place in the file's order, and the id of the table's
        kernel (what the rule memo keys a rule that reads nothing of the entry by)."""
        plan, group, share = self._class_plan(meta.family, target_rules, targets_id, classes, class_ids, flags)
        # the variants of a table that never swaps A and B are the same on every arch of a vendor: the
        # extra targets share those of the device the file names (memoised per engine and dtype)
        swap_key = (meta.engine, meta.dtype)
        swappable = self._swappable.get(swap_key)
        if swappable is None:
            swappable = self._swappable[swap_key] = swap_can_apply(meta.engine, dtype_path(meta))
        est = self.estimator
        # the variants looked at once only where that asks nothing a rule would not (an estimate that
        # raises is asked again by the rules): a deferring or analytic estimator never compiles
        screen = (getattr(est, "defer", False) or getattr(est, "mode", None) == "analytic") \
            and not getattr(est, "engine_kernels", None)
        kernel_key = table_kernel_key(meta)
        kernel = self._kernel_ids.setdefault(kernel_key, len(self._kernel_ids))
        return meta, plan, group, share, swappable, screen, targets_id, classes, order, kernel

    def _merged_findings(self, fctx: FileContext, key: str, entry, eid: int, ectx, walk: tuple,
                         merged_of: dict) -> tuple[MergedFinding, ...]:
        """The target findings of an entry over the file's device classes (``walk``: see
        :meth:`_table_walk`), classes with equal findings merged, messages filled in; memoised per
        (distinct entry, class list) in ``merged_of`` (the class list's part of ``_merged_memo``),
        which the caller looks in first (most entries repeat one seen before)."""
        meta, plan, group, share, swappable, screen, targets_id, classes, order, kernel = walk
        # an entry judged only by rules that read nothing of its launch-order group, on variants
        # screens shared by its group-free id, gets the findings of every entry that differs from it
        # only in the group (Rule.reads_launch_group): looked up before the classes are walked
        gid = gkey = None
        # what a rule's memoised findings are keyed by besides its rule key (see _class_plan, _rule_key):
        # the entry, its group-free id (Rule.reads_launch_group), the table's kernel id (Rule.reads_entry:
        # an int like an entry id, but a rule's memo keys always take the same one of the three, its scope)
        memo_ids = (eid, eid, kernel)
        if group is not None:
            gid = self._group_free_id(meta, entry, eid)
            has_group = group in entry
            memo_ids = (eid, ("group-free", gid, has_group), kernel)
            if share:
                gkey = (gid, has_group, targets_id)
                hit = self._group_merged.get(gkey)
                if hit is not None:
                    self.group_merged_hits += 1
                    merged_of[eid] = hit
                    return hit
        group_free_key = memo_ids[1]
        blind = gkey is not None  # stays so while every class is judged blind to the group
        merged: dict[int, list] = {}  # finding id (see _finding_id) -> [rule, finding, class indices]
        tctx_entry = ectx
        est = self.estimator
        target_memo = self._target_memo
        rule_memo = self._rule_memo
        finding_ids = self._finding_ids
        asked = 0
        for i, ck, dev, devices, unrunnable, rules, vkind, unless_fit, lean, blind_all, blind_fit, estimated in plan:
            tkey = (eid, ck)
            found = target_memo.get(tkey)
            if found is None and gkey is not None:
                # a group copy's findings on this class, where no rule that judged it read the group
                found = target_memo.get((group_free_key, ck))
            if found is not None:
                found, class_blind = found
            else:
                own = False  # a screen not shared by the group-free entry (an estimate of this run's compile)
                vkey = None
                variants = None
                fits = False
                if screen and unless_fit is not None:
                    # whether the variants fit, shared by the entries that differ only in the launch-order
                    # group where every estimate asked is group-free (Estimator.group_free): such an
                    # entry's variants are not even built when the rules left read none (``lean``)
                    if gid is None:
                        gid = self._group_free_id(meta, entry, eid)
                    skey = (gid, ck)
                    fits = self._screened.get(skey)
                    if fits is None:
                        vkey = (eid, vkind[0] and swappable, vkind[1])
                        variants = self._variant_memo.get(vkey)
                        if variants is None:
                            variants = self._variant_memo[vkey] = kernel_variants(meta, entry, dev.arch, dev.vendor,
                                                                                  meta.engine)
                        fits = variants_fit(est, variants, dev.arch, dev.smem_per_block_optin)
                        for v in variants:  # a loop, not all() over a generator: once per screen
                            if not est.group_free(v.spec, dev.arch):
                                own = True
                                break
                        else:
                            self._screened[skey] = fits
                if variants is None and not (fits and lean):
                    vkey = (eid, vkind[0] and swappable, vkind[1])
                    variants = self._variant_memo.get(vkey)
                    if variants is None:
                        variants = self._variant_memo[vkey] = kernel_variants(meta, entry, dev.arch, dev.vendor,
                                                                              meta.engine)
                tctx = None  # built for the first rule called (most are answered by the rule memo)
                found = []
                if fits:
                    rules = unless_fit  # the rules silent where the variants fit: skipped
                class_blind = not own and (blind_fit if fits else blind_all)
                for rule, rule_key, scope in rules:
                    if rule_key is not None:
                        # a rule that reads less of the device than its class: once per (entry, those
                        # facts, whether the class is of extra targets that cannot run the kernel)
                        rkey = (memo_ids[scope], rule_key)
                        asked += 1
                        shared = rule_memo.get(rkey)
                        if shared is not None:
                            found.extend(shared)
                            continue
                    if tctx is None:
                        if tctx_entry is None:
                            tctx_entry = EntryContext(fctx, key, entry)
                        tctx = TargetContext(tctx_entry, dev, devices, () if variants is None else variants, est,
                                             extra_unrunnable=unrunnable)
                    if rule_key is None:
                        for f in rule.check(tctx):
                            found.append((rule, f, finding_ids.setdefault(_finding_key(rule, f), len(finding_ids))))
                        continue
                    self.rule_checks_memoised += 1
                    shared = rule_memo[rkey] = tuple((rule, f, finding_ids.setdefault(_finding_key(rule, f),
                                                                                       len(finding_ids)))
                                                     for f in rule.check(tctx))
                    found.extend(shared)
                found = tuple(found)
                if class_blind and not fits and estimated and not (screen and unless_fit is not None):
                    # rules that read the variants' estimates, with no screen to say those are group-free
                    for v in variants:
                        if not est.group_free(v.spec, dev.arch):
                            class_blind = False
                            break
                target_memo[tkey] = (found, class_blind)
                if class_blind and gkey is not None:
                    target_memo[(group_free_key, ck)] = (found, True)
            blind = blind and class_blind
            for rule, finding, fid in found:
                slot = merged.get(fid)
                if slot is None:
                    merged[fid] = [rule, finding, [i]]
                else:
                    slot[2].append(i)
        self.rule_checks_asked += asked
        out = []
        for rule, finding, members in merged.values():
            keys, archs, targets_text, archs_text = self._device_set(targets_id, classes, tuple(members), order)
            message = finding.message.replace(TARGETS, targets_text).replace(ARCH, archs_text)
            once = (rule.code, finding.identity, keys) if getattr(rule, "once_per_file", False) else None
            out.append(MergedFinding(rule, finding, keys, archs, message, once))
        hit = merged_of[eid] = tuple(out)
        if blind:
            self._group_merged[gkey] = hit
        return hit

    def _group_free_id(self, meta, entry: dict, eid: int) -> int:
        """An id of the entry ``eid`` that leaves out the value of its kernel family's launch-order
        group (``GROUP_SIZE_M``), besides whether that value is one :func:`tilefit.variants.kernel_variants`
        launches with (an integer outside its domain makes the entry unlaunchable): two entries
        of one id launch the same kernels but for the group, which no shared-memory model reads
        (:attr:`tilefit.kernels.spec.KernelSpec.smem_key`). Memoised per entry id."""
        hit = self._group_free.get(eid)
        if hit is None:
            kernel_key, group, domain = table_kernel(meta)
            if group is not None and group in entry:
                value = entry[group]
                launched = type(value) is not int or domain({group: value})
                entry = dict(entry)  # a copy in C less the group: its repr, the key, lists the rest in order
                del entry[group]
            else:
                launched = True
            ids = self._group_free_ids
            hit = self._group_free[eid] = ids.setdefault((kernel_key, _freeze(entry), launched), len(ids))
        return hit

    def _class_plan(self, family: str, target_rules: list, targets_id: int, classes, class_ids, flags) -> tuple:
        """Per device class of a file's class list: ``(index, class id, first device, devices,
        whether they are extra targets that cannot run the kernel, (rule, the id of its code,
        Rule.device_facts and whether the class is unrunnable, None where it has no facts) of the
        target rules (those of the config family ``family``) that judge it, with what the rule memo
        keys each one's findings by besides that id (0: the entry; 1: its group-free id, for a rule
        that reads nothing of the group, ``Rule.reads_launch_group``; 2: the table's kernel, for a
        rule that reads nothing of the entry, ``Rule.reads_entry``), what its variants are
        memoised by besides the entry, the same rules less those silent where the variants fit
        (``Rule.silent_when_variants_fit``; None when none is, or the class's limit is unknown),
        whether none of those reads the variants (``Rule.reads_variants``), whether none of the
        rules that judge it reads the launch-order group (``Rule.reads_launch_group``), the same
        of the rules left where the variants fit, and whether some rule that judges it reads the
        variants)``; the family's launch-order group (None: it has
        none); and whether some class's findings may not depend on it (else no entry's merged
        findings are shared with its group copies). Found once per (family, class list), not per
        entry."""
        key = (family, targets_id)
        hit = self._class_plans.get(key)
        if hit is None:
            plan = []
            for i, (dclass, ck) in enumerate(zip(classes, class_ids)):
                dev = dclass.first
                unrunnable = bool(flags[i]) if flags else False
                rules = [r for r in target_rules if r.judges_unrunnable_targets] if unrunnable else target_rules
                # what the rule memo keys a rule's findings by: 0 the entry, 1 its group-free id, 2 the kernel
                judged = tuple((r, self._rule_key(r, dev, unrunnable),
                                2 if not r.reads_entry else 0 if r.reads_launch_group else 1) for r in rules)
                unless_fit = None
                if dev.smem_per_block_optin is not None and any(r.silent_when_variants_fit for r in rules):
                    unless_fit = tuple(j for j in judged if not j[0].silent_when_variants_fit)
                lean = unless_fit is not None and not any(j[0].reads_variants for j in unless_fit)
                blind_all = not any(j[0].reads_launch_group for j in judged)
                blind_fit = unless_fit is not None and not any(j[0].reads_launch_group for j in unless_fit)
                plan.append((i, ck, dev, dclass.devices, unrunnable, judged, (launch_arch_key(dev.arch), dev.vendor),
                             unless_fit, lean, blind_all, blind_fit, any(j[0].reads_variants for j in judged)))
            table = kernels.table(family)
            group = table.group_name if table is not None else None
            hit = self._class_plans[key] = (tuple(plan), group, group is not None and any(p[9] or p[10] for p in plan))
        return hit

    def _rule_key(self, rule: Rule, dev, unrunnable: bool) -> int | None:
        """What the rule memo keys ``rule``'s findings on the class of ``dev`` by besides the entry:
        an id of (its code, its device facts, whether the class is of extra targets that cannot run
        the kernel); None where its findings depend on the whole class (no facts)."""
        facts = rule.device_facts(dev)
        if facts is None:
            return None
        return self._rule_keys.setdefault((rule.code, facts, unrunnable), len(self._rule_keys))

    def _device_set(self, targets_id: int, classes, members: tuple, order) -> tuple:
        """The devices of the classes ``members`` (indices into ``classes``) as a merged finding
        names them: their keys (the devices the file names and the user named first, in the
        user's order), their archs (in arch order: sm_86 before sm_120), and the texts that fill a message's placeholders.
        Memoised per (class list, members): an entry's findings mostly share one set, and
        thousands of entries the same few."""
        skey = (targets_id, members)
        hit = self._device_sets.get(skey)
        if hit is None:
            devices = [d for i in members for d in classes[i].devices]
            if order:
                devices = sorted(devices, key=lambda d: order.get(d.key, len(order)))
            archs = tuple(sorted({d.arch for d in devices}, key=arch_order))
            hit = self._device_sets[skey] = (tuple(d.key for d in devices), archs, format_targets(devices),
                                             "/".join(archs))
        return hit

    def _entry_ids(self, kernel_key: tuple, entries: list, texts: list | None) -> list[int]:
        """The id of each of ``entries`` (``(key, entry)`` pairs of a table of the kernel
        ``kernel_key``): one per distinct (kernel, entry values). With the entries' texts
        (:func:`tilefit.entrytext.entry_texts`), an entry whose text was seen before (for this
        kernel) is known by it, without its ``repr``: equal texts parse to equal values."""
        intern = self._intern
        if texts is None:
            return [intern.setdefault((kernel_key, _freeze(entry)), len(intern)) for _key, entry in entries]
        by_text = self._text_ids.get(kernel_key)
        if by_text is None:
            by_text = self._text_ids[kernel_key] = {}
        ids = list(map(by_text.get, texts))
        if None in ids:
            for i, eid in enumerate(ids):
                if eid is None:
                    text = texts[i]
                    eid = by_text.get(text)  # a text that repeats within the table
                    if eid is None:
                        eid = by_text[text] = intern.setdefault((kernel_key, _freeze(entries[i][1])), len(intern))
                    ids[i] = eid
        return ids

    def _check_entries(self, table: ConfigTable, fctx: FileContext, emit, entries=None) -> None:
        """Run the entry and target rules on ``entries`` (``(key, entry)`` pairs; default: the
        table's live entries), handing each finding to ``emit``."""
        meta = table.meta
        kernel_key = table_kernel_key(meta)
        entry_rules = [r for r in self._rules[Scope.ENTRY] if r.families is None or meta.family in r.families]
        target_rules = [r for r in self._rules[Scope.TARGET] if r.families is None or meta.family in r.families]
        walk = merged_of = None
        if target_rules:
            targets_id, classes, class_ids, flags, order = self._file_targets(meta, fctx.named_device)
            if classes:
                walk = self._table_walk(meta, target_rules, targets_id, classes, class_ids, flags, order)
                merged_of = self._merged_memo.get(targets_id)
                if merged_of is None:
                    merged_of = self._merged_memo[targets_id] = {}
        texts = None
        if entries is None:
            entries = table.live_entries()
            texts = entry_texts(table.doc, entries)
        self.stats.entries += len(entries)
        once_seen: set[tuple] = set()
        entry_memo = self._entry_memo
        for (key, entry), eid in zip(entries, self._entry_ids(kernel_key, entries, texts)):
            ectx = None
            if entry_rules:
                found = entry_memo.get(eid)
                if found is None:
                    ectx = EntryContext(fctx, key, entry)
                    found = entry_memo[eid] = tuple((rule, f) for rule in entry_rules for f in rule.check(ectx))
                for rule, finding in found:
                    emit(rule, finding, (key,), entry=entry, eid=eid)
            if walk is None or not isinstance(entry, dict):
                continue
            merged = merged_of.get(eid)
            if merged is None:
                merged = self._merged_findings(fctx, key, entry, eid, ectx, walk, merged_of)
            if not merged:
                continue
            base = (key,)
            batch = batch_size_of(key)
            for m in merged:
                if m.once is not None:
                    if m.once in once_seen:
                        continue
                    once_seen.add(m.once)
                data = dict(m.finding.data)
                data["targets"] = list(m.targets)
                data["archs"] = list(m.archs)
                if batch is not None:
                    data["batch_size"] = batch
                emit(m.rule, m.finding, base, target=m.targets[0], entry=entry, eid=eid, message=m.message,
                     data=data)

    @staticmethod
    def _spans(table: ConfigTable, wanted: list) -> list[Span]:
        """The spans of a table's findings, in their order: ``wanted`` holds, in a table with a
        document, each one's pointer and whether it is about the key (answered by
        :meth:`tilefit.jsonpos.JsonDocument.finding_spans`), else the findings."""
        doc = table.doc
        if doc is not None:
            return doc.finding_spans(wanted)
        return [Engine._offset_span(table, finding) for finding in wanted]

    @staticmethod
    def _offset_span(table: ConfigTable, finding: Finding) -> Span:
        """Where a finding of a file without a document points: its byte offset, else the file's start."""
        if finding.offset is not None and table.data:
            text = table.data[: finding.offset].decode("utf-8", "replace")
            line = text.count("\n") + 1
            col = len(text) - (text.rfind("\n") + 1) + 1
            pos = Position(line, col)
            return Span(pos, pos, finding.offset, finding.offset)
        return FILE_START
