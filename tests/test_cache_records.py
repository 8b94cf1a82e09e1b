"""Issue 12: caches. Every key is deterministic (the same run gets the same key whatever
PYTHONHASHSEED is), ``TILEFIT_CACHE_DIR=""`` turns every cache off, and every record is checked
when it is read: a bad one is a miss and is rebuilt, never trusted."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.config import Settings
from tilefit.resultcache import ResultCache

HAVE_TRITON = importlib.util.find_spec("triton") is not None
H100 = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
TABLE = ('{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, '
         '"num_stages": 2},\n "4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, '
         '"GROUP_SIZE_M": 32, "num_warps": 8, "num_stages": 4}}\n')


def _key_in_child(seed: int) -> str:
    code = ("from tilefit.api import CheckOptions, build_engine\nfrom tilefit.config import Settings\n"
            "from tilefit.resultcache import _code_fingerprint, run_key\n"
            "s = Settings(per_file_ignores={'a/*.json': ['VAL004'], 'b/*.json': ['KEY001']})\n"
            "o = CheckOptions(targets=['consumer', 'h100'], estimator='analytic')\n"
            "print(run_key(build_engine(s, o), s, o), _code_fingerprint())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONHASHSEED=str(seed)))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_run_key_is_the_same_across_hash_seeds():
    """The run key, and the code fingerprint in it, must not depend on the process's hash seed
    (a set of paths iterated in seed order made each new process miss the whole cache)."""
    keys = {_key_in_child(seed) for seed in (0, 1, 2, 3, 4)}
    assert len(keys) == 1, keys


def test_identical_runs_with_other_hash_seeds_share_one_result_file(tmp_path):
    (tmp_path / H100).write_text(TABLE)
    cache = tmp_path / "cache"
    outputs = set()
    for seed in (0, 1, 2):
        r = subprocess.run([sys.executable, "-m", "tilefit", "check", str(tmp_path), "-t", "rtx4090", "--isolated",
                            "--estimator", "analytic"], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONHASHSEED=str(seed), TILEFIT_CACHE_DIR=str(cache)))
        assert r.returncode == 1, r.stderr
        outputs.add(r.stdout)
    assert len(outputs) == 1
    assert len(list((cache / "results").iterdir())) == 1


def test_an_empty_cache_dir_turns_every_cache_off(tmp_path, monkeypatch):
    from tilefit.smem.cache import CompileCache, ExactEstimator, default_cache_dir
    from tilefit.pysource.extract import scratch_dir

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("TILEFIT_CACHE_DIR", "")
    assert default_cache_dir() is None and CompileCache(triton="1").root is None
    assert ExactEstimator().cache.put(_spec(), "sm_89", _result()) is None
    private = scratch_dir()
    assert not str(private).startswith(str(home)) and os.stat(private).st_mode & 0o077 == 0
    (tmp_path / H100).write_text(TABLE)
    r = run_check([str(tmp_path / H100)], CheckOptions(targets=["rtx4090"]), Settings())
    assert [d.code for d in r.diagnostics] == ["SMEM001"]
    assert not home.exists(), list(home.rglob("*"))


@pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed")
def test_an_empty_cache_dir_keeps_exact_compiles_off_disk(tmp_path):
    (tmp_path / H100).write_text(TABLE)
    home = tmp_path / "home"
    env = dict(os.environ, TILEFIT_CACHE_DIR="", HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    r = subprocess.run([sys.executable, "-m", "tilefit", "check", str(tmp_path / H100), "-t", "rtx4090",
                        "--isolated", "--estimator", "exact"], capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "SMEM001" in r.stdout, r.stderr
    assert not home.exists(), list(home.rglob("*"))


# -- the result cache ----------------------------------------------------------------------------


def _bad_files():
    from tilefit.resultcache import FORMAT

    good_row = ["SMEM001", 0, 2, 3, 2, 9, 20, 26, "error", 1, "a10", 2, "fp"]
    values = ["msg", "/1/num_stages", {"targets": ["a10"]}]
    deep = "[" * 50000 + "]" * 50000
    yield "not json", "{"
    yield "deep", '{"format": ' + str(FORMAT) + ', "values": ' + deep + ', "files": {}}'
    yield "files a list", json.dumps({"format": FORMAT, "values": values, "files": []})
    yield "entry not a pair", json.dumps({"format": FORMAT, "values": values, "files": {"P": "abc"}})
    yield "rows not a list", json.dumps({"format": FORMAT, "values": values, "files": {"P": ["D", 7]}})
    for col, bad in ((0, 5), (1, "0"), (1, 99), (2, None), (8, ["error"]), (8, "fatal"), (9, 0), (10, 3),
                     (11, 0), (11, -1), (12, None)):
        row = list(good_row)
        row[col] = bad
        yield f"column {col} = {bad!r}", json.dumps({"format": FORMAT, "values": values, "files": {"P": ["D", [row]]}})
    yield "short row", json.dumps({"format": FORMAT, "values": values, "files": {"P": ["D", [good_row[:5]]]}})
    yield "data not a dict", json.dumps({"format": FORMAT, "values": ["m", None, [1]],
                                         "files": {"P": ["D", [good_row[:11] + [2, "fp"]]]}})


@pytest.mark.parametrize("name, text", list(_bad_files()), ids=[n for n, _ in _bad_files()])
def test_a_bad_result_cache_record_is_a_miss_and_is_rebuilt(tmp_path, monkeypatch, name, text):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / H100
    path.write_text(TABLE)
    opts = CheckOptions(targets=["rtx4090"], estimator="analytic")
    clean = run_check([str(path)], CheckOptions(targets=["rtx4090"], estimator="analytic", use_cache=False))
    from tilefit.api import build_engine
    from tilefit.resultcache import run_key

    key = run_key(build_engine(Settings(), opts), Settings(), opts)
    digest = ResultCache.digest(path.read_bytes())
    file = tmp_path / "cache" / "results" / f"{key}.json"
    file.parent.mkdir(parents=True)
    file.write_text(text.replace('"P"', json.dumps(str(path))).replace('"D"', json.dumps(digest)))
    first = run_check([str(path)], opts)
    assert [(d.code, d.message, d.pointer) for d in first.diagnostics] == \
           [(d.code, d.message, d.pointer) for d in clean.diagnostics]
    stored = json.loads(file.read_text())  # rebuilt: the next run is a hit with the same result
    assert ResultCache(key).get(str(path), digest) == first.diagnostics
    from tilefit.resultcache import FORMAT

    assert stored["format"] == FORMAT


# -- compile records -------------------------------------------------------------------------------


def _spec():
    from tilefit.kernels.spec import make_spec

    return make_spec("fused_moe", "fp16", dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=1),
                     num_warps=4, num_stages=3)


def _result(**changes):
    from tilefit.smem.exact import ExactResult

    base = dict(arch="sm_89", shared_bytes=16384, num_warps=4, threads=128, stage="alloc", seconds=0.1,
                triton_version="x")
    base.update(changes)
    return ExactResult(**base)


@pytest.mark.parametrize("result", [
    {"shared_bytes": "16384"}, {"shared_bytes": True}, {"shared_bytes": -1}, {"shared_bytes": 1.5},
    {"shared_bytes": None}, {"error": ["x"], "shared_bytes": None}, {"num_warps": "4"}, {"arch": 89},
    {"error": "boom", "shared_bytes": 5}, {"error": "late", "shared_bytes": None, "error_stage": "timeout"},
    {"seconds": None},
], ids=str)
def test_a_compile_record_of_the_wrong_types_is_not_trusted(tmp_path, result):
    from tilefit.smem.cache import CompileCache

    cache = CompileCache(tmp_path, triton="9.9.9")
    path = cache.put(_spec(), "sm_89", _result())
    record = json.loads(path.read_text())
    record["result"].update(result)
    path.write_text(json.dumps(record))
    assert cache.get(_spec(), "sm_89") is None
    for garbage in (json.dumps([record]), json.dumps(dict(record, result=[1])), "[" * 50000 + "]" * 50000):
        path.write_text(garbage)
        assert cache.get(_spec(), "sm_89") is None


def test_a_bad_engine_kernel_record_is_not_trusted(tmp_path):
    from tilefit.smem.engine_kernels import EngineKernels

    ek = EngineKernels(str(tmp_path), cache_dir=tmp_path / "c")
    path = tmp_path / "r.json"
    spec = _spec()
    good = {"shared_bytes": 1024, "error": None, "guessed": [], "dropped": [], "source": "s", "function": "f"}
    path.write_text(json.dumps({"key": spec.key(), "engine": ek.engine, "stop": ek.stop, "result": good}))
    assert ek._cache_get(path, spec).shared_bytes == 1024
    for bad in ({"shared_bytes": "1"}, {"guessed": "abc"}, {"guessed": [1]}, {"source": None},
                {"shared_bytes": None}, {"error": 3}):
        path.write_text(json.dumps({"key": spec.key(), "engine": ek.engine, "stop": ek.stop,
                                    "result": dict(good, **bad)}))
        assert ek._cache_get(path, spec) is None, bad
    path.write_text("[" * 50000 + "]" * 50000)
    assert ek._cache_get(path, spec) is None


SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs))
'''


def test_a_truncated_scratch_module_is_rewritten_not_loaded(tmp_path):
    from tilefit.pysource.extract import extract_kernel

    src = tmp_path / "kern.py"
    src.write_text(SOURCE)
    scratch = extract_kernel(str(src), "copy_kernel")
    folder = tmp_path / "scratch"
    path = scratch.write(folder)
    full = path.read_text()
    path.write_text(full[: len(full) // 2])  # a killed writer, a full disk
    assert scratch.write(folder) == path and path.read_text() == full
    path.write_text(full + "\nimport os  # planted\n")
    scratch.write(folder)
    assert path.read_text() == full
    if HAVE_TRITON:
        path.write_text(full[:40])
        assert hasattr(scratch.load(folder), "copy_kernel")
