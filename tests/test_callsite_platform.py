"""Branches resolved per target (issue 18): with targets of one backend, platform tests
(``current_platform.is_rocm()``, ``is_hip()``, ``torch.version.hip``) fold, locals follow only the
assignments that reach the launch, and a launch under ``if is_hip_:`` is no NVIDIA launch. With
targets of both backends, both arms stay."""

from __future__ import annotations

from pathlib import Path

from tilefit.api import CheckOptions, run_check
from tilefit.callsites.project import Project
from tilefit.callsites.sites import build_sites
from tilefit.callsites.values import Lit
from tilefit.config import Settings

FIXTURE = Path(__file__).parent / "fixtures" / "callsites" / "platform" / "decode.py"


def _values(backend):
    project = Project.scan([str(FIXTURE)])
    project.evaluator.backend = backend
    sites = build_sites(project)
    out = {}
    for s in sites.launches:
        vals = set()
        for inst in s.instances:
            b, w, st = inst.args["BLOCK"], inst.options["num_warps"], inst.options["num_stages"]
            vals.add(tuple(v.value if isinstance(v, Lit) else None for v in (b, w, st)))
        out.setdefault(s.launch.scope_name, set()).update(vals)
    return out, sites


def test_nvidia_targets_fold_the_platform_and_drop_the_rocm_only_launch():
    values, sites = _values("cuda")
    assert values == {"decode": {(64, 2, 2)}}  # head_dim=512 default: `elif head_dim >= 1024` folds too
    assert sites.off_platform == 1


def test_amd_targets_take_the_other_branch():
    values, sites = _values("hip")
    assert values["decode"] == {(8, 1, 1)} and values["decode_rocm_only"] == {(16, 4, 1)}
    assert sites.off_platform == 0


def test_mixed_targets_keep_both_arms():
    values, sites = _values(None)
    assert (64, 2, 2) in values["decode"] and (8, 1, 1) in values["decode"] and "decode_rocm_only" in values


def test_check_on_an_nvidia_target_reports_each_launch_once():
    result = run_check([str(FIXTURE)], CheckOptions(targets=["rtx4090"], estimator="analytic", coverage=True,
                                                    extend_select=["EST002"]), Settings())
    assert result.coverage.off_platform == 1
    assert result.coverage.launches == 1
    assert not any("is_hip_" in d.message for d in result.diagnostics), [d.message for d in result.diagnostics]
