"""Bounded evaluation (issue 18): folding a launch's values stops within a budget per site (steps
and seconds), says so in the reason, and the next site starts with a fresh budget. vLLM's
``lora_shrink_op.py`` (one 420-line file) had ``tilefit check`` run for over 300 s."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.callsites.project import Project
from tilefit.callsites.sites import build_sites
from tilefit.callsites.values import Lit, Unknown, branches
from tilefit.config import Settings

FIXTURE = Path(__file__).parent / "fixtures" / "callsites" / "bounded" / "widening.py"


def _block_values(sites):
    out = []
    for s in sites.launches:
        for inst in s.instances:
            out.append((s.launch.scope_name, s.caller is not None, inst.args.get("BLOCK")))
    return out


def test_a_widening_fold_stops_within_its_budget_and_the_next_site_is_evaluated():
    project = Project.scan([str(FIXTURE)])
    project.evaluator.max_seconds = 1.0
    t0 = time.monotonic()
    sites = build_sites(project)
    assert time.monotonic() - t0 < 30
    by_caller = {(s.launch.scope_name, s.caller is not None): s for s in sites.launches}
    stopped = [s for s in sites.launches if s.launch.scope_name == "launch"]
    values = [v for s in stopped for inst in s.instances for _, v in branches(inst.args["BLOCK"])]
    assert values and all(isinstance(v, Unknown) and "bounded evaluation" in v.reason for v in values), values
    plain = by_caller[("plain", False)]
    assert [inst.args["BLOCK"].value for inst in plain.instances] == [128]
    assert all(isinstance(inst.args["BLOCK"], Lit) for inst in plain.instances)


def test_check_reports_the_stopped_site_as_est002_with_the_reason():
    t0 = time.monotonic()
    result = run_check([str(FIXTURE)], CheckOptions(targets=["rtx4090"], estimator="analytic",
                                                    extend_select=["EST002"]), Settings())
    assert time.monotonic() - t0 < 60
    notes = [d.message for d in result.diagnostics if d.code == "EST002"]
    assert any("bounded evaluation" in m and "BLOCK" in m for m in notes), notes


def test_a_chain_of_dict_methods_on_a_run_time_object_is_evaluated_once_per_link(tmp_path):
    """``cfg.get(..).get(..)`` on a receiver that is not a static dict: each link's receiver is
    evaluated once (it used to be evaluated for the dict-method check and again as the callee, 2**n
    steps for n links, so a 40-link chain ran out of budget instead of saying why it is unknown)."""
    chain = "cfg" + '.get("k")' * 40
    (tmp_path / "chain.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def k(x_ptr, BLOCK: tl.constexpr):\n    tl.store(x_ptr + tl.arange(0, BLOCK), 0)\n\n\n"
        f"def launch(x, cfg):\n    k[(1,)](x, BLOCK={chain}, num_warps=4, num_stages=2)\n")
    project = Project.scan([str(tmp_path / "chain.py")])
    (site,) = build_sites(project).launches
    values = [v for inst in site.instances for _, v in branches(inst.args["BLOCK"])]
    assert values and all(isinstance(v, Unknown) for v in values), values
    assert not any("bounded evaluation" in v.reason for v in values), values
    assert project.evaluator._steps < 2000, project.evaluator._steps


def test_the_time_budget_counts_this_threads_cpu_not_the_clock():
    """A loaded machine stretches a site's wall time, not its CPU time: waiting (another process
    on the core) spends none of the budget, computing does."""
    from tilefit.callsites import values as values_mod

    ev = Project.scan([str(FIXTURE)]).evaluator
    ev.max_seconds = 0.3
    ev.max_steps = 10**9
    ev.begin_site()
    time.sleep(0.6)  # twice the budget of wall time, no CPU
    for _ in range(1024):
        ev._spend()
    assert ev.exhausted is None
    t0 = time.thread_time()
    while time.thread_time() - t0 < 0.4:  # past the budget of CPU
        pass
    with pytest.raises(values_mod._OutOfBudget):
        for _ in range(1024):
            ev._spend()
    assert "bounded evaluation" in ev.exhausted and ev.stopped_by_time == 1
    ev.end_site()
