"""Compile children are started only when a compile needs one (issue 19, the suite's time: a
start imports Triton again, ~0.7 s of CPU): a change of a setting the child reads as it goes
(the cache folder) is sent to the running child, and the idle children of a closed pool serve
the next pool of the same process. Real compiles for sm_89 (no GPU); skipped without Triton."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from tilefit.kernels.plan import Arg, LaunchPlan  # noqa: E402
from tilefit.kernels.spec import make_spec  # noqa: E402
from tilefit.pysource.extract import extract_kernel  # noqa: E402
from tilefit.smem import worker as worker_mod  # noqa: E402
from tilefit.smem.worker import CompileWorker, compile_plan_limited, compile_spec_limited  # noqa: E402

SPEC = make_spec("fused_moe", "fp16", dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=1),
                 num_warps=4, num_stages=2)
COPY = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    tl.store(y_ptr + offs, tl.load(x_ptr + offs))\n")


def _compile(worker, spec=SPEC):
    got = compile_spec_limited(spec, "sm_89", worker=worker, timeout=300)
    assert got.error is None and got.shared_bytes == 8192, got
    return worker._proc.pid if worker._proc is not None else None


def _spare_pids():
    return [p.pid for p in worker_mod._spares]


def test_a_new_cache_folder_reaches_the_running_child(tmp_path, monkeypatch):
    """The child writes a scratch module it is sent into the cache folder of the caller's
    current settings: the new folder, with no new child started."""
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "first"))
    worker = CompileWorker(reuse=True)
    try:
        pid = _compile(worker)
        src = tmp_path / "copy.py"
        src.write_text(COPY)
        scratch = extract_kernel(str(src), "copy_kernel")  # not written by this process
        plan = LaunchPlan("copy", scratch.name, "copy_kernel",
                          (Arg("x_ptr", "ptr", "fp32"), Arg("y_ptr", "ptr", "fp32"), Arg("BLOCK", "constexpr", 128)),
                          4, 1)
        monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "second"))
        got = compile_plan_limited(plan, "sm_89", source=scratch, worker=worker, timeout=300)
        assert got.error is None, got.error
        assert worker._proc.pid == pid  # the same child
        assert (tmp_path / "second" / "scratch" / f"{scratch.name}.py").read_text() == scratch.source
        assert not (tmp_path / "first" / "scratch").exists()
        worker.close()
        assert pid in _spare_pids()
        # a setting read when the child starts (the kernel registry's folders) starts another,
        # and the idle child started without it is not taken
        monkeypatch.setenv("TILEFIT_KERNEL_PATH", str(tmp_path / "families"))
        other = _compile(worker)
        assert other != pid and pid in _spare_pids()
    finally:
        worker.close(keep=False)


def test_a_closed_pools_child_serves_the_next_pool():
    first = CompileWorker(reuse=True)
    pid = _compile(first)
    first.close()
    assert first._proc is None and _spare_pids()[-1] == pid
    second = CompileWorker(reuse=True)
    try:
        assert _compile(second) == pid and pid not in _spare_pids()
    finally:
        second.close()
    assert _spare_pids()[-1] == pid
    # a worker that does not ask for reuse starts its own child and stops it when closed
    own = CompileWorker()
    try:
        mine = _compile(own)
        assert mine not in _spare_pids()
    finally:
        own.close()
    assert mine not in _spare_pids() and _spare_pids()[-1] == pid


def test_a_forked_process_does_not_take_its_parents_idle_child():
    """tilefit.parallel forks workers: one that asked for a compile child must not share the
    parent's socket to an idle one (two readers of one answer)."""
    import os

    first = CompileWorker(reuse=True)
    pid = _compile(first)
    first.close()
    assert _spare_pids()[-1] == pid
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked process
        try:
            taken = worker_mod._take_spare()
            os.write(w, b"took" if taken is not None else b"none")
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        said = fh.read()
    os.waitpid(child, 0)
    assert said == b"none" and _spare_pids()[-1] == pid


def test_only_a_child_fit_to_serve_is_kept(monkeypatch):
    from tilefit.smem import pool as pool_mod

    worn = CompileWorker(reuse=True)
    pid = _compile(worn)
    child = worn._proc
    child.served = pool_mod.RECYCLE_AFTER  # as many compiles as the pool's recycling allows
    worn.close()
    assert pid not in _spare_pids() and not child.is_alive()
    big = CompileWorker(reuse=True)
    pid = _compile(big)
    child = big._proc
    monkeypatch.setenv(pool_mod.RSS_ENV, str(child.rss_mb / 2))  # past the memory limit
    big.close()
    assert pid not in _spare_pids() and not child.is_alive()


def test_a_timed_out_child_is_stopped_not_kept():
    worker = CompileWorker(reuse=True)
    try:
        pid = _compile(worker)
        big = make_spec("fused_moe", "fp8_w8a8", dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128,
                                                      GROUP_SIZE_M=1), num_warps=8, num_stages=4, quant="per_tensor")
        timed = compile_spec_limited(big, "sm_89", worker=worker, timeout=0.001)
        assert timed.error_stage == "timeout" and worker._proc is None  # killed, not kept
        assert pid not in _spare_pids()
        assert _compile(worker) != pid
    finally:
        worker.close()
