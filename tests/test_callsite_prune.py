"""``prune_configs_by={"early_config_prune": f}`` evaluated statically per launch and target (issue 18,
What to build 3): SMEM003 does not warn about a config the prune drops, judges "every config
overflows" over the kept ones, and where ``f`` cannot be evaluated statically keeps its verdict
with the reason. ``f`` is interpreted, never run (the attack prunes leave no marker).

The fixtures (tests/fixtures/callsites/prune) are our own code in the shapes of the engines'
prunes: SGLang's sparse-MLA ``_prune_configs``, its mamba ``prune_oversized_tiles`` factory,
vLLM's flash-maxsim ``_smem_budget`` / ``_prune_configs`` imported from ``_common``. The analytic
estimator keeps the module fast (no compile); the GEMM's figures are the exact ones (147456 B).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.callsites.project import Project
from tilefit.callsites.prune import PruneEvaluator
from tilefit.callsites.sites import build_sites
from tilefit.config import Settings
from tilefit.device_db import load_database
from tilefit.engine import group_devices

FIXTURE = Path(__file__).parent / "fixtures" / "callsites" / "prune"
FILES = [FIXTURE / n for n in ("gemm.py", "_common.py", "tiles.py")]
KERNELS = ("topk_kernel", "wide_only_kernel", "budget_kernel", "capability_kernel", "tiles_kernel",
           "tensor_kernel", "attack_kernel")
BF16 = {f"prune.gemm:{k}": {"a_ptr,b_ptr": ["bf16"]} for k in KERNELS}


@pytest.fixture(scope="module")
def findings(tmp_path_factory, cache_sharing_compiles):
    mp = pytest.MonkeyPatch()
    mp.chdir(tmp_path_factory.mktemp("cwd"))  # where the attack prune would write its marker
    try:
        result = run_check([str(p) for p in FILES], CheckOptions(targets=["rtx4090", "rtx5090"],
                                                                 estimator="analytic"), Settings(kernels=BF16))
        marker = Path("tilefit_prune_marker").exists()
    finally:
        mp.undo()
    by_kernel: dict[str, list] = {}
    for d in result.diagnostics:
        assert d.code == "SMEM003", d.message
        by_kernel.setdefault(d.data["kernel"].rpartition(":")[2], []).append(d)
    return by_kernel, marker


def test_a_prune_that_drops_the_overflowing_config_silences_it(findings):
    by_kernel, _ = findings
    # the same list, unpruned or with a prune that cannot be evaluated, warns about config #1
    for unevaluated in ("tensor_kernel", "attack_kernel"):
        (warn,) = by_kernel[unevaluated]
        assert warn.severity.value == "warning" and "autotune config #1" in warn.message
    # SGLang's sparse-MLA shape (named_args, kwargs, `keep or [candidates[0]]`) and the mamba
    # factory's closure (`prune_oversized_tiles({...})`) drop it for the launch's N=128
    assert "topk_kernel" not in by_kernel and "tiles_kernel" not in by_kernel


def test_a_prune_that_keeps_only_overflowing_configs_is_an_error(findings):
    by_kernel, _ = findings
    (err,) = by_kernel["wide_only_kernel"]
    assert err.severity.value == "error"
    assert err.message.startswith("every autotune config of wide_only_kernel overflows rtx4090, rtx5090")
    assert "1 of 2 configs kept by _keep_wide" in err.message
    assert err.data["prune"] == {"function": "_keep_wide", "evaluated": True, "kept": [1]}


def test_a_prune_that_reads_the_device_is_evaluated_per_target(findings):
    by_kernel, _ = findings
    # vLLM's `_smem_budget` (Triton's driver, in a try) imported from `_common`: drops #1 on the
    # 99 KB parts (keeps it on an H200, test_prune_results_follow_the_launch_values)
    assert "budget_kernel" not in by_kernel
    # `get_device_capability()`: an RTX 5090 (12.0) keeps #1 and overflows; an RTX 4090 (8.9) drops it
    (warn,) = by_kernel["capability_kernel"]
    assert "overflows rtx5090:" in warn.message and "rtx4090" not in warn.message
    assert "2 of 2 configs kept by _keep_from_hopper there" in warn.message
    assert warn.data["targets"] == ["rtx5090"]


def test_an_unevaluable_prune_keeps_the_verdict_and_says_why(findings):
    by_kernel, _ = findings
    (warn,) = by_kernel["tensor_kernel"]
    assert "(the list is pruned at run time by prune_configs_by; prune function not evaluated: `a_ptr`:" \
        in warn.message
    assert warn.data["prune"]["evaluated"] is False and "a_ptr" in warn.data["prune"]["reason"]


def test_the_attack_prune_is_never_run(findings):
    by_kernel, marker = findings
    assert not marker
    (warn,) = by_kernel["attack_kernel"]
    assert "prune function not evaluated: `os`" in warn.message


ATTACKS = {
    "dunder_import": '__import__("os").system("touch " + MARKER)',
    "triton_knobs_os": 'triton.knobs.os.system("touch " + MARKER)',
    "exec_builtin": 'exec("import os; os.system(\'touch " + MARKER + "\')")',
    "open_file": 'open(MARKER, "w").write("x")',
    "dunder_attribute": 'configs.__class__.__init__.__globals__["os"].system("touch " + MARKER)',
    "getattr_builtin": 'getattr(configs, "append")',
    "local_import": "import os",
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_attack_prunes_are_interpreted_never_run(tmp_path, monkeypatch, attack):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "marker"
    (tmp_path / "k.py").write_text(f'''import triton
import triton.language as tl

MARKER = {str(marker)!r}


def _prune(configs, named_args, **kwargs):
    {ATTACKS[attack]}
    return configs


@triton.autotune(configs=[triton.Config({{"BLOCK": 128}}, num_warps=4, num_stages=2)], key=["n"],
                 prune_configs_by={{"early_config_prune": _prune}})
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(x, y):
    scale_kernel[(1,)](x, y, 1024)
''')
    project = Project.scan([str(tmp_path / "k.py")])
    sites = build_sites(project)
    (site,) = sites.autotunes
    dclass = group_devices([load_database().get("rtx4090")])[0]
    got = PruneEvaluator(project.evaluator).result(site, {"n": 1024}, {}, dclass)
    assert got.kept is None and got.reason, got
    assert not marker.exists()


def test_prune_results_follow_the_launch_values():
    """The same prune over other launch values (a scenario's): topk=64 keeps what BLOCK_N <= 64 has,
    and the sparse-MLA fallback `keep or [candidates[0]]` keeps config #1 when nothing passes."""
    project = Project.scan([str(p) for p in FILES])
    site = next(s for s in build_sites(project).autotunes if s.kernel.name == "topk_kernel")
    dclass = group_devices([load_database().get("rtx4090")])[0]
    prunes = PruneEvaluator(project.evaluator)
    assert prunes.result(site, {"topk": 128, "USE_FP8_DOT": False}, {}, dclass).kept == {1}
    assert prunes.result(site, {"topk": 256, "USE_FP8_DOT": False}, {}, dclass).kept == {0, 1}
    assert prunes.result(site, {"topk": 16, "USE_FP8_DOT": False}, {}, dclass).kept == {0}
    # USE_FP8_DOT keeps BLOCK_N 32/64 at 1-2 stages only: none here, so the first candidate
    assert prunes.result(site, {"topk": 128, "USE_FP8_DOT": True}, {}, dclass).reason  # candidates[0] of []
    budget = next(s for s in build_sites(project).autotunes if s.kernel.name == "budget_kernel")
    h200 = group_devices([load_database().get("h200")])[0]
    assert prunes.result(budget, {}, {}, dclass).kept == {1}
    on_h200 = prunes.result(budget, {}, {}, h200)
    assert on_h200.kept == {0, 1} and on_h200.device_read
    missing = prunes.result(site, {"USE_FP8_DOT": False}, {"topk": "q.shape[1] is computed at run time"}, dclass)
    assert missing.kept is None and "topk" in missing.reason and "run time" in missing.reason


@pytest.mark.parametrize("body", [
    "x = [1]\n    for _ in range(40):\n        x.extend(x)",  # a memory bomb: stopped by the size bound
    "x = [1]\n    while True:\n        x = x + x",
    "x = {[1]: 2}",  # an unhashable key: no traceback
    "x = configs[::0]",
])
def test_a_prune_that_grows_or_errs_is_not_evaluated_and_never_crashes(tmp_path, body):
    (tmp_path / "k.py").write_text(f'''import triton
import triton.language as tl


def _prune(configs, named_args, **kwargs):
    {body}
    return configs


@triton.autotune(configs=[triton.Config({{"BLOCK": 128}}, num_warps=4, num_stages=2)], key=["n"],
                 prune_configs_by={{"early_config_prune": _prune}})
@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
''')
    project = Project.scan([str(tmp_path / "k.py")])
    (site,) = build_sites(project).autotunes
    dclass = group_devices([load_database().get("rtx4090")])[0]
    got = PruneEvaluator(project.evaluator).result(site, {"n": 1024}, {}, dclass)
    assert got.kept is None and got.reason, got
