"""The fix planner's shortcuts give the answers of the long way, on real tables.

* the breadth-first walk shared by the searches of one space (``FixPlanner._nearest``) leaves
  every plan as a planner that never walked it before makes it.
"""

from __future__ import annotations

import json

from tilefit.api import CheckOptions
from tilefit.app import run_check
from tilefit.fix import make_planner


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
