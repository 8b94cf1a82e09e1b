"""Compile jobs keyed by Triton's launch specialisation (issue 18 item 5, speed).

The key of an int or float argument is what Triton's own specialiser makes of it, checked here
against ``native_specialize_impl`` itself; launches that differ only in such values are one
compile, with the same shared memory as each compiled alone. Skipped without Triton.
"""

from __future__ import annotations

import pytest

triton = pytest.importorskip("triton")

from fixture_engine import engine_with, evaluated  # noqa: E402
from tilefit.callsites.evaluate import CompileJob, launch_cases  # noqa: E402
from tilefit.callsites.prefetch import prefetch  # noqa: E402
from tilefit.callsites.speckey import arg_key, int_class  # noqa: E402
from tilefit.smem.pool import CompilePool  # noqa: E402

INTS = [1, 0, 2, 15, 16, 17, 32, 4096, 4097, 8192, -1, -16, -17, 2**31 - 16, 2**31 - 1, 2**31, 2**31 + 16,
        -2**31, -2**31 - 1, 2**63 - 16, 2**63, 2**64 - 16]


def _specialised(value):
    """What Triton 3.9's launch specialiser gives ``value`` for every flag setting."""
    from triton._C.libtriton import native_specialize_impl

    from tilefit.smem.exact import parse_arch

    backend, _, _ = parse_arch("sm_89")
    return tuple(native_specialize_impl(backend, value, False, spec, align)
                 for spec in (True, False) for align in (True, False))


def test_ints_of_one_class_are_specialised_alike_and_of_two_classes_not():
    by_class: dict = {}
    for v in INTS:
        by_class.setdefault(int_class(v), set()).add(_specialised(v))
    # each class is one specialisation (its key says everything the compile sees) ...
    assert all(len(seen) == 1 for seen in by_class.values()), by_class
    # ... and different classes are different specialisations (the key drops nothing it needs)
    assert len({next(iter(seen)) for seen in by_class.values()}) == len(by_class)
    assert int_class(4096) == int_class(8192) == int_class(0) != int_class(4097) != int_class(1)


def test_floats_are_one_class_and_other_kinds_keep_their_value():
    assert len({_specialised(v) for v in (0.5, 1.0, -3.25, 1e30)}) == 1
    assert arg_key("float", 0.5) == arg_key("float", 2.0)
    assert arg_key("constexpr", 64) != arg_key("constexpr", 128)  # a constexpr is compiled in
    assert arg_key("ptr", "bf16") == "bf16" and arg_key("bool", True) is True


TWO_VALUES = """
import triton
from engine.ops.gemm_plain import matmul_plain_kernel


def first(a, b, c):
    matmul_plain_kernel[(1,)](a, b, c, 4096, 4096, 4096, 4096, 1, 4096, 1, 4096, 1,
                              BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4)


def second(a, b, c):
    matmul_plain_kernel[(2,)](a, b, c, 8192, 1024, 2048, 2048, 1, 1024, 1, 1024, 1,
                              BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4)


def third(a, b, c):
    matmul_plain_kernel[(3,)](a, b, c, 4097, 4096, 4096, 4097, 1, 4096, 1, 4096, 1,
                              BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4)
"""


def _jobs(tmp_path):
    copy = engine_with(tmp_path, "two_values.py", TWO_VALUES)
    _, sites, ev, classes = evaluated([copy / "ops" / n for n in ("two_values.py", "gemm_plain.py")])
    device = classes[0].first
    jobs = {}
    names = iter(("first", "second", "third"))
    for site in sorted(sites.launches, key=lambda s: s.anchor.start.line):
        (case,) = launch_cases(site)
        (variant,) = ev.variants(case.kernel)
        job = ev.job(case, variant, device)
        assert isinstance(job, CompileJob)
        jobs[next(names)] = job
    return jobs, ev, sites, classes


def test_launches_that_differ_in_ints_of_one_class_compile_once_with_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    jobs, ev, sites, classes = _jobs(tmp_path)
    assert jobs["first"].identity == jobs["second"].identity != jobs["third"].identity
    assert jobs["first"].args != jobs["second"].args  # the values differ, the compile does not
    stats = prefetch(ev, sites, classes, pool=CompilePool(1))
    assert stats.requests >= 3 and stats.distinct == stats.compiled
    # one result serves both launches of one class
    assert ev.cached(jobs["first"]) is ev.cached(jobs["second"]) is not ev.cached(jobs["third"])
    # each launch compiled alone, with its own values, gives the bytes the shared job gave
    from tilefit.smem.worker import compile_plan_limited

    for name, job in jobs.items():
        alone = compile_plan_limited(ev.plan_of(job), job.arch, source=job.src.scratch)
        assert alone.error is None and alone.shared_bytes == ev.cached(job).shared_bytes > 0, name
