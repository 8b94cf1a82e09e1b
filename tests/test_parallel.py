"""A cold check split over forked workers (tilefit.parallel) gives the serial run's output."""

from __future__ import annotations

import dataclasses
import os

import pytest

from tilefit import parallel
from tilefit.api import CheckOptions, build_engine, run_check
from tilefit.config import Settings

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")


def _check(root, cache_dir, monkeypatch, jobs: str, targets=()):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv(parallel.ENV, jobs)
    settings = Settings()
    opts = CheckOptions(targets=list(targets), estimator="analytic")
    engine = build_engine(settings, opts)
    result = run_check([str(root)], opts, settings, engine)
    return result, engine


def _rows(result):
    return [dataclasses.asdict(d) for d in result.diagnostics]


def _vllm(corpus):
    root = corpus / "vllm-0.33.0"
    return root if root.is_dir() else corpus


def test_workers_give_the_serial_output(corpus, tmp_path, monkeypatch):
    root = _vllm(corpus)
    calls = []
    real = parallel._run_workers
    monkeypatch.setattr(parallel, "_run_workers", lambda *a: calls.append(len(a[1])) or real(*a))
    serial, se = _check(root, tmp_path / "serial", monkeypatch, "1", ["rtx4090"])
    split, pe = _check(root, tmp_path / "split", monkeypatch, "2", ["rtx4090"])
    assert calls == [2], "the run was not split over two workers"
    assert len(serial.diagnostics) > 100
    assert _rows(split) == _rows(serial)
    assert sorted(split.tables) == sorted(serial.tables)
    assert (pe.stats.files, pe.stats.entries) == (se.stats.files, se.stats.entries)
    # the workers' results went into the result cache: a warm run answers from it, unchanged
    warm, _ = _check(root, tmp_path / "split", monkeypatch, "2", ["rtx4090"])
    assert _rows(warm) == _rows(serial)


def test_a_failed_worker_leaves_its_share_to_the_serial_loop(corpus, tmp_path, monkeypatch):
    root = _vllm(corpus)
    serial, _ = _check(root, tmp_path / "serial", monkeypatch, "1")

    def broken(engine, share, limit):
        raise RuntimeError("worker bug")

    monkeypatch.setattr(parallel, "_check_share", broken)
    split, _ = _check(root, tmp_path / "split", monkeypatch, "2")
    assert _rows(split) == _rows(serial)
    assert not split.errors


def test_few_files_or_one_job_stay_serial(monkeypatch):
    monkeypatch.setenv(parallel.ENV, "4")
    assert parallel.jobs_for(parallel.MIN_FILES - 1) == 1
    assert parallel.jobs_for(10 * parallel.MIN_FILES) == 4
    monkeypatch.setenv(parallel.ENV, "1")
    assert parallel.jobs_for(10 * parallel.MIN_FILES) == 1


def test_workers_plan_the_fixes_as_the_serial_loop_does(corpus, tmp_path, monkeypatch):
    """With the fix planner (``--output-format json``, ``full``, ``html``) the workers plan their
    files' fixes too: the same fixes on the same diagnostics, and the planner's plans behind them
    (bound to the fixes as a cache hit's are), as the serial run's."""
    from tilefit.app import run_check as app_check
    from tilefit.fix.stored import table_record

    root = (corpus / "sglang-0.5.23" / "sglang" / "srt" / "layers" / "moe" / "moe_runner" / "triton_utils" / "configs"
            / "triton_3_4_0")  # 33 tables (split from 4 files on: the test's size, not the CLI's)
    monkeypatch.setattr(parallel, "MIN_FILES", 4)
    calls = []
    real = parallel._run_workers
    monkeypatch.setattr(parallel, "_run_workers", lambda *a: calls.append(len(a[1])) or real(*a))

    def check(cache_dir, jobs):
        monkeypatch.setenv("TILEFIT_CACHE_DIR", str(cache_dir))
        monkeypatch.setenv(parallel.ENV, jobs)
        opts = CheckOptions(targets=["rtx4090"], estimator="analytic", fix=True, cache_fixes=True, cache_plans=True)
        return app_check([str(root)], opts, Settings())

    def plans(result):
        out = {}
        for d in result.diagnostics:
            if d.fix is not None:
                plan = result.planner.plan_for(d.fix)
                assert plan is not None, d
                out.setdefault(plan.path, {})[plan.key] = plan
        return {path: table_record(_table_plan(path, by_key)) for path, by_key in out.items()}

    serial = check(tmp_path / "serial", "1")
    split = check(tmp_path / "split", "2")
    assert calls == [2], "the run was not split over two workers"
    assert sum(d.fix is not None for d in serial.diagnostics) >= 20
    assert _rows(split) == _rows(serial)
    assert plans(split) == plans(serial)
    assert not split.errors
    # the workers' plans went into the result cache: a warm run restores them, unchanged
    warm = check(tmp_path / "split", "2")
    assert _rows(warm) == _rows(serial) and plans(warm) == plans(serial)


def _table_plan(path, by_key):
    from tilefit.fix.planner import TablePlan

    return TablePlan(path, plans=dict(sorted(by_key.items())))
