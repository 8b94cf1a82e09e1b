"""The fix planner's shared-memory need per target arch (``FixPlanner.need``), on a real table.

Its memo once keyed answers by arch *family* (sm_80, sm_86, sm_89 and sm_120 share mma_v2's
forms), so the first arch asked answered for all: on SGLang's int8 block GEMM table for the
A100, sm_80's figure (uncalibrated, counted at its upper error bound) came back for sm_89, where
the engine calibration gives the exact bytes, and the fix titles said 83456 where the RTX 4090
needs 82944.
"""

from __future__ import annotations

import pytest

from tilefit.api import CheckOptions
from tilefit.app import run_check
from tilefit.fix import make_planner
from tilefit.variants import kernel_variants

TABLE = ("sglang-0.5.23/sglang/kernels/ops/gemm/configs/"
         "N=1536,K=1536,device_name=NVIDIA_A100-SXM4-80GB,dtype=int8_w8a8,block_shape=[128, 128].json")


def _worst(engine, meta, entry, arch):
    """The estimator's own answer, uncalibrated forms at their upper bound (as the planner counts)."""
    worst = None
    for v in kernel_variants(meta, entry, arch, "NVIDIA", meta.engine):
        est = engine.estimator.estimate(v.spec, arch)
        need = est.shared_bytes + ((est.max_error or 0) if est.status == "uncalibrated" else 0)
        worst = need if worst is None else max(worst, need)
    return worst


@pytest.fixture(scope="module")
def checked(corpus):
    path = str(corpus / TABLE)
    result = run_check([path], CheckOptions(targets=["consumer"], estimator="analytic", use_cache=False))
    return result.tables[path], result.engine


def test_need_is_each_arch_own_figure_whatever_arch_was_asked_first(checked):
    table, engine = checked
    entry = dict(table.value["2048"], num_stages=3)
    by_arch = {arch: _worst(engine, table.meta, entry, arch) for arch in ("sm_80", "sm_89", "sm_120")}
    # the premise: the A100's own arch is uncalibrated (bound added), the consumer archs are exact
    assert by_arch["sm_80"] > by_arch["sm_89"]
    for order in (("sm_80", "sm_89", "sm_120"), ("sm_89", "sm_120", "sm_80")):
        planner = make_planner(engine)
        got = {arch: planner.need(table.meta, entry, arch, "NVIDIA") for arch in order}
        assert got == by_arch, order
        # a second ask is answered from the memo, with the same figure
        assert {arch: planner.need(table.meta, entry, arch, "NVIDIA") for arch in order} == by_arch


def test_fix_titles_quote_the_target_arch_own_bytes(checked, corpus):
    from tilefit.api import CheckOptions as Opts

    path = str(corpus / TABLE)
    result = run_check([path], Opts(targets=["rtx4090"], estimator="analytic", use_cache=False, fix=True))
    fixed = [d for d in result.diagnostics if d.fix is not None and d.target == "rtx4090"]
    assert fixed
    table, engine = checked
    for d in fixed:
        key = d.pointer.split("/")[1]
        chosen = d.fix.expected[f"/{key}"]
        assert f"({_worst(engine, table.meta, chosen, 'sm_89')} of 101376 bytes on sm_89)" in d.fix.title
