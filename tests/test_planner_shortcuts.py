"""The fix planner's shortcuts give the answers of the long way, on real tables.

* ``Engine.entry_signature`` (what a candidate's rule re-check compares, through the planner's
  ``_signature``, also for values whose text ``json.load`` reads back otherwise) is the signature of
  ``check_table`` on a one-entry table built from the candidate's JSON text, the way the planner
  used to find it;
* the breadth-first walk shared by the searches of one space (``FixPlanner._nearest``) leaves
  every plan as a planner that never walked it before makes it.
"""

from __future__ import annotations

import json

import pytest

from corpus_tables import triton_tables
from tilefit.api import CheckOptions
from tilefit.app import run_check
from tilefit.fix import make_planner
from tilefit.jsonpos import JsonDocument
from tilefit.tables import ConfigTable


def _probe_signature(engine, table, key, entry) -> frozenset:
    """The signature the long way: the entry's JSON text as a table of its own, checked."""
    data = json.dumps({key: entry}).encode()
    probe = ConfigTable(table.path, table.meta, data, JsonDocument.parse(data))
    sig = set()
    for d in engine.check_table(probe):
        for t in d.data.get("targets") or [d.target]:
            sig.add((d.code, d.pointer, t))
    return frozenset(sig)


def _variations(entry: dict):
    """The entry and configs a fix search would ask about: a stage more or less, other blocks
    and warps, an out-of-domain group, a dropped key."""
    yield entry
    for k, f in (("num_stages", lambda v: v + 1), ("num_stages", lambda v: max(1, v - 2)),
                 ("BLOCK_SIZE_N", lambda v: v * 2), ("BLOCK_SIZE_K", lambda v: v * 4),
                 ("num_warps", lambda v: v * 4), ("GROUP_SIZE_M", lambda v: 0)):
        if type(entry.get(k)) is int:
            yield dict(entry, **{k: f(entry[k])})
    if "num_warps" in entry:
        yield {k: v for k, v in entry.items() if k != "num_warps"}
    # values whose JSON text json.load does not give back as they are (a table's Infinity, NaN)
    yield dict(entry, num_stages=float("inf"))
    yield dict(entry, BLOCK_SIZE_K=float("nan"))


# per-file ignores, whole files and one batch key's entry (a shorter prefix than the prober's selection)
IGNORES = {"**/*.json": ["SMEM"], "**/*.json#/64": ["THR001", "VAL"]}


@pytest.mark.parametrize("ignores, every", [({}, 9), (IGNORES, 27)])
def test_entry_signature_is_the_one_entry_tables_check(corpus_files, ignores, every):
    from tilefit.config import Settings

    paths = [str(p) for p, _ in triton_tables(corpus_files, every)]
    result = run_check(paths, CheckOptions(targets=["consumer"], estimator="analytic", use_cache=False),
                       Settings(per_file_ignores=ignores))
    planner = make_planner(result.engine)
    prober = planner.prober
    compared = nonempty = 0
    for path in paths:
        table = result.tables[path]
        for key, entry in list(table.value.items())[::3]:
            if not isinstance(entry, dict):
                continue
            for cand in _variations(entry):
                fast = planner._signature(table, key, cand)
                assert fast == _probe_signature(prober, table, key, cand), (path, key, cand)
                compared += 1
                nonempty += bool(fast)
    assert compared > 1000 // (every // 9) and nonempty > 300 // (every // 9), (compared, nonempty)


def test_entry_signature_refuses_an_engine_with_file_rules(corpus_files):
    path, table = next(triton_tables(corpus_files, 50))
    result = run_check([str(path)], CheckOptions(estimator="analytic", use_cache=False))
    key, entry = next(iter(table.value.items()))
    with pytest.raises(ValueError):
        result.engine.entry_signature(table, key, entry)


def test_a_search_planned_after_others_of_its_space_is_planned_as_alone(corpus):
    """vLLM's Mixtral table repeats configs across batch sizes: every plan of the table, planned
    together (later searches take the walk of an earlier one's space), is the plan a fresh
    planner makes for that entry alone."""
    path = str(corpus / "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs"
                        "/E=8,N=14336,device_name=NVIDIA_H200.json")
    result = run_check([path], CheckOptions(targets=["consumer"], estimator="analytic", use_cache=False))
    table = result.tables[path]
    diagnostics = [d for d in result.diagnostics if d.path == path]
    together = make_planner(result.engine).plan_table(table, diagnostics)
    configs = [json.dumps(table.value[k], sort_keys=True) for k in together.plans]
    assert len(together.plans) > 5 and len(set(configs)) < len(configs)  # the premise: shared spaces
    for key, plan in together.plans.items():
        alone = make_planner(result.engine).plan_table(
            table, [d for d in diagnostics if d.pointer.split("/")[1] == key]).plans[key]
        assert (plan.entry, plan.changes, plan.predicted, plan.source, plan.fix.title) == \
            (alone.entry, alone.changes, alone.predicted, alone.source, alone.fix.title), key


def _reference_distance(space, entry) -> int:
    """Edit distance the plain way: positions found with ``tuple.index``."""
    node = space.node_of(entry)
    total = 0
    for values, a, b in zip(space.domain, space.start, node):
        if a != b:
            total += abs(values.index(a) - values.index(b)) if (a in values and b in values) else 1
    if space.has_group and entry.get("GROUP_SIZE_M") != dict(space.original).get("GROUP_SIZE_M"):
        total += 1
    return total


def test_distance_and_steps_count_positions_along_each_dimension(corpus_files):
    """``ConfigSpace.distance`` and ``steps_from`` (one positions memo per space) count what
    ``tuple.index`` counts, on the lattice around corpus entries (several layers deep, group
    values changed, a value outside the domain)."""
    from tilefit.fix.space import ConfigSpace

    checked = 0
    for _path, table in triton_tables(corpus_files, 40):
        for _key, entry in list(table.value.items())[::4]:
            if not isinstance(entry, dict) or any(type(entry.get(k)) is not int for k in
                                                  ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")):
                continue
            space = ConfigSpace.for_entry(table.meta, entry, "NVIDIA", 32)
            steps = space.steps_from(entry)
            for layer in space.layers(3):
                for node in layer:
                    for group in ((None,) + tuple(space.group_values(entry.get("GROUP_SIZE_M")))[:2]):
                        cand = space.to_entry(node, group)
                        assert space.distance(cand) == _reference_distance(space, cand), (entry, cand)
                        assert steps(cand) == space.steps(entry, cand), (entry, cand)
                        checked += 1
            odd = dict(entry, BLOCK_SIZE_N=48)  # outside the domain: one step
            assert space.distance(odd) == _reference_distance(space, odd)
    assert checked > 5000, checked


def test_the_thread_test_of_a_fit_is_every_groups_own(corpus):
    """The fit check tests a config's warps against the fewest warps per block of each vendor's
    groups (``_TableContext.warp_caps``): on an MI300X table (64-wide wavefronts, 16 per block)
    checked for NVIDIA consumer cards too (32 warps), every warp count fits exactly where it
    fits each group's own limit (and the shared memory)."""
    path = str(corpus / "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs"
                        "/E=8,N=14336,device_name=AMD_Instinct_MI300X.json")
    result = run_check([path], CheckOptions(targets=["consumer"], estimator="analytic", use_cache=False))
    table = result.tables[path]
    planner = make_planner(result.engine)
    ctx = planner._table_context(table)
    caps = {(g.vendor, g.max_threads) for g in ctx.groups if g.max_threads is not None}
    assert {v for v, _ in caps} == {"AMD", "NVIDIA"} and len({c for _, c in caps}) == 2, caps  # the premise
    small = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 1, "num_stages": 2}
    answers = {}
    for warps in (1, 2, 4, 8, 16, 32, 64):
        entry = dict(small, num_warps=warps)
        threads_ok = all(warps <= g.max_threads for g in ctx.groups if g.max_threads is not None)
        smem_ok = all(planner.need(table.meta, entry, g.arch, g.vendor) is None
                      or planner.need(table.meta, entry, g.arch, g.vendor) <= g.limit
                      for g in ctx.groups if g.limit is not None)
        answers[warps] = planner.fits(ctx, entry)
        assert answers[warps] == (threads_ok and smem_ok), warps
    assert answers[4] and not answers[32], answers


@pytest.mark.parametrize("ignores", [{}, {"**/*.json": ["SMEM"]}, {"**/*.json": ["THR", "VAL00"]}])
def test_a_candidate_is_judged_by_the_rules_the_check_runs_on_its_file(corpus_files, ignores):
    """The prober's signature of each entry as it stands is what the check reported for that
    entry (its entry and target rules), per-file ignores of a shorter prefix than a code
    included: a user who ignores SMEM in a file gets no candidate rejected for SMEM001 there."""
    from tilefit.config import Settings
    from tilefit.rules import RULES, Scope

    paths = [str(p) for p, _ in triton_tables(corpus_files, 27)]
    result = run_check(paths, CheckOptions(targets=["consumer"], estimator="analytic", use_cache=False),
                       Settings(per_file_ignores=ignores))
    prober = make_planner(result.engine).prober
    # file rules are not the prober's; a once-per-file rule's finding is reported at one entry only
    skipped = {code for code, cls in RULES.items() if cls.scope is Scope.FILE or getattr(cls, "once_per_file", False)}
    reported: dict = {}
    for d in result.diagnostics:
        if d.code not in skipped and d.pointer:
            key = d.pointer.split("/")[1]
            for t in d.data.get("targets") or [d.target]:
                reported.setdefault((d.path, key), set()).add((d.code, d.pointer, t))
    compared = smem = 0
    for path in paths:
        table = result.tables[path]
        for key, entry in table.live_entries():
            if not isinstance(entry, dict):
                continue
            sig = {s for s in prober.entry_signature(table, key, entry) if s[0] not in skipped}
            assert sig == reported.get((path, key), set()), (path, key)
            compared += 1
            smem += any(code == "SMEM001" for code, _, _ in sig)
    assert compared > 100
    assert (smem > 0) == ("SMEM" not in ignores.get("**/*.json", []))
