"""The compile pool and the prefetch of call-site compiles (issue 18, speed).

Real compiles of the fixture engine's kernels for sm_89 (ahead of time, no GPU), each into a
fresh cache folder; skipped without Triton.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

from fixture_engine import ENGINE, PLAIN, engine_with, evaluated  # noqa: E402
from tilefit.api import CheckOptions, run_check  # noqa: E402
from tilefit.callsites.checks import SiteChecks  # noqa: E402
from tilefit.callsites.evaluate import CompileJob, launch_cases  # noqa: E402
from tilefit.callsites.prefetch import prefetch  # noqa: E402
from tilefit.config import Settings  # noqa: E402
from tilefit.smem import pool as pool_mod  # noqa: E402
from tilefit.smem.pool import CompilePool, default_size  # noqa: E402

FILES = [ENGINE / "ops" / n for n in ("launcher.py", "gemm_plain.py", "tiles.py")]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_default_size_follows_the_cores_and_the_environment(monkeypatch):
    monkeypatch.delenv(pool_mod.ENV, raising=False)
    assert default_size() == min(pool_mod.MAX_SIZE, len(os.sched_getaffinity(0)))
    monkeypatch.setenv(pool_mod.ENV, "3")
    assert default_size() == 3
    monkeypatch.setenv(pool_mod.ENV, "zero")  # not a count: the cores again
    assert default_size() == min(pool_mod.MAX_SIZE, len(os.sched_getaffinity(0)))


TWICE = """
import triton
from engine.ops.gemm_plain import matmul_plain_kernel


def first(a, b, c, M, N, K):
    matmul_plain_kernel[(1,)](a, b, c, M, N, K, a.stride(0), 1, b.stride(0), 1, c.stride(0), 1,
                              BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4)


def second(x, y, z, M, N, K):
    matmul_plain_kernel[(2,)](x, y, z, M, N, K, x.stride(0), 1, y.stride(0), 1, z.stride(0), 1,
                              BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4)
"""


def test_prefetch_compiles_each_specialisation_once_and_the_rules_compile_nothing(cache, tmp_path):
    copy = engine_with(tmp_path, "twice.py", TWICE)
    engine, sites, ev, classes = evaluated([copy / "ops" / n for n in ("twice.py", "gemm_plain.py")])
    assert len(sites.launches) == 2
    stats = prefetch(ev, sites, classes, pool=CompilePool(2))
    # two launches with the same constexprs, options and argument specialisation: one compile
    # (and one per num_stages level the fix search tries: 4 overflows, so 3 is compiled, ...)
    assert stats.requests > stats.distinct == stats.compiled > 0
    assert stats.cached == 0 and stats.refused == 0 and ev.compiles == stats.compiled
    before = ev.compiles
    checks = SiteChecks(ev, classes)
    verdicts = [v for s in sites.launches for v in checks.launch(s)]
    assert len(verdicts) == 2 and all(v.outcome.ok and v.over for v in verdicts)
    assert verdicts[0].outcome.shared == verdicts[1].outcome.shared
    suggestion = checks.suggest(verdicts[0].case, verdicts)
    assert suggestion is not None and suggestion.name == "num_stages"
    assert ev.compiles == before  # every outcome, the fix search's too, came from the prefetch
    # the levels below the one that fits were not compiled
    case, variant, device = verdicts[0].case, verdicts[0].variant, verdicts[0].device
    for s in range(suggestion.new - 1, 0, -1):
        job = ev.job(case.with_value("num_stages", s), variant, device)
        assert isinstance(job, CompileJob) and ev.cached(job) is None
    assert stats.distinct == 1 + (4 - suggestion.new)


def test_pool_results_equal_one_child_one_after_another(cache):
    _, sites, ev, classes = evaluated(FILES)
    jobs = []
    for site in sites.launches:
        for case in launch_cases(site):
            for variant in ev.variants(case.kernel):
                job = ev.job(case, variant, classes[0].first)
                if isinstance(job, CompileJob) and all(j.identity != job.identity for j in jobs):
                    assert ev.scratch_ready(job) is None
                    jobs.append(job)
    assert len(jobs) >= 2
    planned = [(ev.plan_of(j), j.arch, j.src.scratch) for j in jobs]
    seen = []
    arrived = {}
    with CompilePool(2) as pool:
        parallel = pool.compile_plans(planned, progress=lambda done, total: seen.append((done, total)),
                                      on_result=arrived.__setitem__)
    with CompilePool(1) as pool:
        serial = pool.compile_plans(planned)
    assert [r.shared_bytes for r in parallel] == [r.shared_bytes for r in serial]
    assert all(r.error is None and r.shared_bytes > 0 for r in parallel)
    assert seen[-1] == (len(jobs), len(jobs)) and sorted(seen) == seen
    assert [arrived[i] for i in range(len(jobs))] == parallel  # each result as it arrived


def test_a_recycled_child_still_answers(cache):
    _, sites, ev, classes = evaluated(FILES)
    site = sites.launches[0]
    (case, *_) = launch_cases(site)
    job = ev.job(case, ev.variants(case.kernel)[0], classes[0].first)
    assert ev.scratch_ready(job) is None
    planned = [(ev.plan_of(job), job.arch, job.src.scratch)] * 3
    with CompilePool(1, recycle_after=1) as pool:
        results = pool.compile_plans(planned)
        (worker,) = pool._workers
    assert len({r.shared_bytes for r in results}) == 1 and results[0].error is None
    assert worker.started == 3  # a new child for each compile


def test_check_with_the_pool_gives_the_findings_of_the_serial_path(cache, monkeypatch):
    settings = Settings(kernels=PLAIN)
    opts = CheckOptions(targets=["rtx4090"])
    monkeypatch.setenv(pool_mod.ENV, "2")
    # the scratch modules' triton.language paths are resolved in the compile child, never in this
    # process (resolving them imports Triton: ~76 MB resident, issue 18 item 5), on both paths
    from tilefit.pysource import extract

    def resolved_here(paths):
        raise AssertionError(f"triton.language paths resolved in the parent: {sorted(paths)[:3]}")

    monkeypatch.setattr(extract, "check_members", resolved_here)
    pooled = run_check([str(p) for p in FILES], opts, settings)
    # the serial path: no prefetch (every compile asked by the rules, one at a time), fresh cache
    import tilefit.callsites.prefetch as pre

    monkeypatch.setattr(pre, "prefetch", lambda *a, **k: pre.PrefetchStats())
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(cache.parent / "other"))
    serial = run_check([str(p) for p in FILES], opts, settings)
    assert [(d.code, d.path, d.span.start.line, d.message) for d in pooled.diagnostics] == \
        [(d.code, d.path, d.span.start.line, d.message) for d in serial.diagnostics]
    assert any(d.code == "SMEM002" for d in pooled.diagnostics)


def test_a_child_past_the_memory_limit_is_replaced_and_its_answers_stand(cache):
    _, sites, ev, classes = evaluated(FILES)
    (case, *_) = launch_cases(sites.launches[0])
    job = ev.job(case, ev.variants(case.kernel)[0], classes[0].first)
    assert ev.scratch_ready(job) is None
    planned = [(ev.plan_of(job), job.arch, job.src.scratch)] * 3
    with CompilePool(1) as pool:  # the default limit: one child serves them all
        kept = pool.compile_plans(planned)
        (worker,) = pool._workers
        assert worker.started == 1 and 0 < worker.rss_mb < pool_mod.RECYCLE_RSS_MB
        assert pool_mod.RSS_KEY not in kept[0].to_json()
    with CompilePool(1, recycle_mb=worker.rss_mb / 2) as pool:  # every child is past this one
        replaced = pool.compile_plans(planned)
        (worker,) = pool._workers
        assert worker.started == 3 and worker.peak_mb > 0
    assert [r.shared_bytes for r in replaced] == [r.shared_bytes for r in kept]
    assert kept[0].error is None and kept[0].shared_bytes > 0


def test_the_memory_limit_follows_the_environment(monkeypatch):
    monkeypatch.setenv(pool_mod.RSS_ENV, "900")
    assert pool_mod.recycle_rss_mb() == 900.0
    monkeypatch.setenv(pool_mod.RSS_ENV, "lots")  # not a number: the default
    assert pool_mod.recycle_rss_mb() == pool_mod.RECYCLE_RSS_MB


TINY = Path(__file__).parent / "kernels" / "tiny_gemm"
TINY_TABLE = "tiny_gemm,N=4096,K=4096,device_name=NVIDIA_GB10,dtype=fp16.json"


def test_the_second_pass_takes_the_call_sites_of_the_first(cache, tmp_path, monkeypatch, request):
    """A table whose kernel has no proven form defers its compile to a second pass over the
    files; the Python call sites are evaluated (scanned, compiled) in the first pass only."""
    import json

    from tilefit import api, kernels, pyengine

    folder = tmp_path / "families" / "tiny_gemm"
    shutil.copytree(TINY, folder)
    registered = kernels.registered(folder.parent)
    registered.__enter__()
    request.addfinalizer(lambda: registered.__exit__(None, None, None))
    tables = tmp_path / "t"
    tables.mkdir()
    entry = {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "num_warps": 4, "num_stages": 2}
    (tables / TINY_TABLE).write_text(json.dumps({"1": entry}, indent=4) + "\n")
    calls = {"python": 0, "passes": 0}
    real_python, real_pass = pyengine.check_python, api._run_check

    def counted_python(*a, **k):
        calls["python"] += 1
        return real_python(*a, **k)

    def counted_pass(*a, **k):
        calls["passes"] += 1
        return real_pass(*a, **k)

    monkeypatch.setattr(pyengine, "check_python", counted_python)
    monkeypatch.setattr(api, "_run_check", counted_pass)
    paths = [str(tables)] + [str(p) for p in FILES]
    opts = CheckOptions(targets=["rtx4090"], use_cache=False)
    both = run_check(paths, opts, Settings(kernels=PLAIN))
    assert calls == {"python": 1, "passes": 2}  # the table's compile made a second pass
    alone = run_check([str(p) for p in FILES], opts, Settings(kernels=PLAIN))
    py = [(d.code, d.path, d.span.start.line, d.message) for d in both.diagnostics if d.path.endswith(".py")]
    assert py == [(d.code, d.path, d.span.start.line, d.message) for d in alone.diagnostics]
    assert any(code == "SMEM002" for code, *_ in py)
    assert any(d.path.endswith(".json") for d in both.diagnostics) or both.files_checked == 1 + len(FILES)
