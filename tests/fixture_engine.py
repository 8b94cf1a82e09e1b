"""The fixture engine (tests/fixtures/callsites/engine) set up for call-site evaluation.

Shared by the tests of compile jobs and the compile pool: a copy of the engine with a module of
the test's own launches added, and the engine, sites, evaluator and device classes of a check
of some of its files.

    copy = engine_with(tmp_path, "twice.py", TWICE)
    engine, sites, ev, classes = evaluated([copy / "ops" / "twice.py", copy / "ops" / "gemm_plain.py"])
"""

from __future__ import annotations

import shutil
from pathlib import Path

ENGINE = Path(__file__).parent / "fixtures" / "callsites" / "engine"
PLAIN = {"engine.ops.gemm_plain:matmul_plain_kernel": {"a_ptr,b_ptr": ["bf16"]}}


def engine_with(tmp_path: Path, name: str, text: str) -> Path:
    """A copy of the fixture engine under ``tmp_path`` with ``ops/<name>`` holding ``text``."""
    copy = tmp_path / "engine"
    shutil.copytree(ENGINE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "ops" / name).write_text(text)
    return copy


def evaluated(files, kernels=PLAIN, targets=("rtx4090",)):
    """(engine, sites, evaluator, device classes) of a check of ``files`` for ``targets``."""
    from tilefit.api import CheckOptions, build_engine
    from tilefit.callsites.evaluate import CallsiteEvaluator
    from tilefit.callsites.project import Project
    from tilefit.callsites.sites import build_sites
    from tilefit.config import Settings

    engine = build_engine(Settings(kernels=kernels), CheckOptions(targets=list(targets)))
    project = Project.scan([str(p) for p in files])
    sites = build_sites(project)
    evaluator = CallsiteEvaluator(project, kernels=kernels, mode=engine.estimator.mode, estimator=engine.estimator)
    return engine, sites, evaluator, engine._targets(None)
