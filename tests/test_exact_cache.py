"""Compile cache: JSON records keyed by Triton version, kernel source, arch and spec key."""

from __future__ import annotations

import importlib.util
import json
import multiprocessing

import pytest

from tilefit.smem.exact import ExactResult
from tilefit.kernels.spec import make_spec

HAVE_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed")


def spec_(bk=64, stages=3):
    tile = dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=bk, GROUP_SIZE_M=1)
    return make_spec("fused_moe", "fp16", tile, num_warps=4, num_stages=stages)


def fake_result(shared=12345):
    return ExactResult(arch="sm_89", shared_bytes=shared, num_warps=4, threads=128, stage="alloc", seconds=0.1,
                       triton_version="x")


def test_record_round_trip_and_keying(tmp_path):
    from tilefit.smem.cache import CompileCache

    cache = CompileCache(tmp_path, triton="9.9.9")
    spec = spec_()
    assert cache.get(spec, "sm_89") is None
    path = cache.put(spec, "sm_89", fake_result())
    assert path.is_file() and str(tmp_path) in str(path) and "triton-9.9.9" in str(path)
    assert cache.get(spec, "sm_89").shared_bytes == 12345
    assert cache.get(spec, "sm_90") is None  # other arch
    assert cache.get(spec_(stages=4), "sm_89") is None  # other spec
    assert CompileCache(tmp_path, triton="9.9.8").get(spec, "sm_89") is None  # other Triton
    record = json.loads(path.read_text())
    assert record["key"] == spec.key() and record["result"]["shared_bytes"] == 12345


def test_env_var_overrides_folder(tmp_path, monkeypatch):
    from tilefit.smem.cache import CompileCache, default_cache_dir

    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    assert CompileCache(triton="1").root == tmp_path / "c"


def test_corrupt_records_are_ignored(tmp_path):
    from tilefit.smem.cache import CompileCache

    cache = CompileCache(tmp_path, triton="9.9.9")
    spec = spec_()
    path = cache.put(spec, "sm_89", fake_result())
    for garbage in ("{not json", "", json.dumps({"schema": 1, "key": "other"}), json.dumps([1, 2])):
        path.write_text(garbage)
        assert cache.get(spec, "sm_89") is None
    cache.put(spec, "sm_89", fake_result(777))
    assert cache.get(spec, "sm_89").shared_bytes == 777


def _writer(root, value, n):
    from tilefit.smem.cache import CompileCache

    cache = CompileCache(root, triton="9.9.9")
    spec = spec_()
    seen = 0
    for _ in range(n):
        cache.put(spec, "sm_89", fake_result(value))
        got = cache.get(spec, "sm_89")
        assert got is not None and got.shared_bytes in (1, 2, 3, 4)  # never a torn record
        seen += 1
    return seen


def test_concurrent_writers(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        counts = pool.starmap(_writer, [(str(tmp_path), v, 40) for v in (1, 2, 3, 4)])
    assert counts == [40] * 4
    from tilefit.smem.cache import CompileCache

    got = CompileCache(tmp_path, triton="9.9.9").get(spec_(), "sm_89")
    assert got.shared_bytes in (1, 2, 3, 4)
    leftovers = [p for p in tmp_path.rglob(".tmp-*")]
    assert leftovers == []


@needs_triton
def test_second_lookup_does_not_compile(tmp_path, monkeypatch):
    from tilefit.smem import exact
    from tilefit.smem.cache import ExactEstimator

    spec = spec_(bk=32, stages=2)
    first = ExactEstimator(tmp_path)
    value = first.shared_bytes(spec, "sm_89")
    assert value == 8192 and first.stats["compiles"] == 1

    def boom(*a, **k):
        raise AssertionError("compiled although cached")

    monkeypatch.setattr(exact, "compile_spec", boom)
    second = ExactEstimator(tmp_path)
    assert second.shared_bytes(spec, "sm_89") == value
    assert second.stats == {"hits": 1, "compiles": 0, "errors": 0}


@needs_triton
def test_corrupt_record_is_recompiled_and_rewritten(tmp_path):
    from tilefit.smem.cache import ExactEstimator

    spec = spec_(bk=32, stages=3)
    est = ExactEstimator(tmp_path)
    path = est.cache.path(spec, "sm_89")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\x00garbage")
    assert est.shared_bytes(spec, "sm_89") == 16384
    assert json.loads(path.read_text())["result"]["shared_bytes"] == 16384


@needs_triton
def test_many_in_parallel_with_progress_and_cached_failures(tmp_path):
    from tilefit.smem.cache import ExactEstimator
    from tilefit.smem.exact import CompileFailed

    fp8 = make_spec("fused_moe", "fp8_w8a8", dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=64),
                    quant="per_tensor", num_warps=4, num_stages=3)
    items = [(spec_(bk=64, stages=2), "sm_89"), (spec_(bk=64, stages=2), "sm_90"), (fp8, "sm_80"),
             (spec_(bk=64, stages=2), "sm_89")]  # duplicate
    calls = []
    est = ExactEstimator(tmp_path)
    out = est.many(items, jobs=2, progress=lambda done, total: calls.append((done, total)))
    assert len(out) == 3 and calls[-1] == (3, 3)
    assert out[(spec_(bk=64, stages=2), "sm_89")].shared_bytes == 16384
    assert out[(spec_(bk=64, stages=2), "sm_90")].shared_bytes == 32768
    assert out[(fp8, "sm_80")].error and "fp8e4nv" in out[(fp8, "sm_80")].error
    again = ExactEstimator(tmp_path)
    assert again.many(items) == out and again.stats["compiles"] == 0
    with pytest.raises(CompileFailed):
        again.shared_bytes(fp8, "sm_80")
    with pytest.raises(ValueError):
        est.many([(make_spec("fused_moe", "int4_w4a16", dict(BLOCK_SIZE_M=16, BLOCK_SIZE_N=64,
                                                                BLOCK_SIZE_K=64)), "sm_89")])
