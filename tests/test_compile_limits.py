"""Issue 12: every compile runs in a child process under a time limit (``compile-timeout``,
``--compile-timeout``); a compile that runs out of time is EST001 (EST002 for a call site), is
never cached (neither its compile record nor the file's results), and a child that dies costs
only its own compile. An MI300X entry with num_stages=16 had ``auto`` compile for over 500 s."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("triton")

from tilefit.api import CheckOptions, run_check  # noqa: E402
from tilefit.config import Settings  # noqa: E402

H100 = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
RTX = "E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"
# 98304 B on sm_89: within the 4096-byte margin of the RTX 4090's 101376, so `auto` compiles it
NEAR = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, "num_warps": 8,
        "num_stages": 3}
OVER = dict(NEAR, num_stages=4)
FIXTURES = Path(__file__).parent / "fixtures" / "callsites"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """A fresh cache folder and a fresh process-wide exact estimator (no result of an earlier
    test remembered in memory)."""
    from tilefit.smem import cache as compile_cache

    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compile_cache, "_default", None)
    yield tmp_path / "cache"
    from tilefit.smem.worker import set_default_timeout

    set_default_timeout(None)


def test_a_compile_over_the_limit_is_est001_and_nothing_of_it_is_cached(cli, tmp_path, cache):
    path = tmp_path / H100
    path.write_text(json.dumps({"4096": OVER}))
    r = cli("check", path, "-t", "rtx4090", "--isolated", "--estimator", "exact", "--compile-timeout", "0.01")
    assert r.exit_code == 1, r.output
    assert "EST001" in r.output and "did not finish within 0.01 s (compile-timeout)" in r.output
    assert "SMEM001" not in r.output
    assert not (cache / "exact").exists()  # no compile record of a timeout
    r = cli("check", path, "-t", "rtx4090", "--isolated", "--estimator", "exact")
    assert r.exit_code == 1 and "SMEM001" in r.output and "EST001" not in r.output, r.output


def test_auto_does_not_fall_back_to_the_closed_form_it_asked_a_compile_to_confirm(tmp_path, monkeypatch):
    # without an engine calibration of this point (a proven engine form answers without a compile)
    from tilefit.smem.engine_model import EngineModel

    monkeypatch.setattr(EngineModel, "answer", lambda self, spec, arch, forms_only=False: None)
    path = tmp_path / RTX
    path.write_text(json.dumps({"4096": NEAR}))
    timed = run_check([str(path)], CheckOptions(estimator="auto", compile_timeout=0.01, use_cache=False),
                      Settings())
    assert [(d.code, d.data.get("reason")) for d in timed.diagnostics] == [("EST001", "compile-timeout")]
    fine = run_check([str(path)], CheckOptions(estimator="auto", use_cache=False), Settings())
    assert fine.diagnostics == []


def test_compile_timeout_in_the_configuration(cli, tmp_path, monkeypatch):
    (tmp_path / RTX).write_text(json.dumps({"4096": NEAR}))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.tilefit]\ncompile-timeout = 0\n")
    r = cli("check", ".", "--no-cache")
    assert r.exit_code == 2 and "compile-timeout must be a positive number" in r.output
    (tmp_path / "pyproject.toml").write_text("[tool.tilefit]\ncompile-timeout = 600\n")
    r = cli("check", ".", "--no-cache", "--estimator", "exact")
    assert r.exit_code == 0, r.output
    from tilefit.smem.worker import default_timeout

    assert default_timeout() == 600


def test_a_child_that_dies_costs_only_its_own_compile():
    from tilefit.kernels.spec import make_spec
    from tilefit.smem.worker import CompileWorker, result_of

    spec = make_spec("fused_moe", "fp16", dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32, GROUP_SIZE_M=1),
                     num_warps=4, num_stages=2)
    worker = CompileWorker()
    try:
        answers = []
        t = threading.Thread(target=lambda: answers.append(worker.request(("spec", spec, "sm_89", "alloc"), 300)))
        t.start()
        for _ in range(600):
            if worker._proc is not None and worker._proc.is_alive():
                break
            time.sleep(0.05)
        os.kill(worker._proc.pid, 9)  # a compiler crash, the OOM killer
        t.join(60)
        crashed = result_of(answers[0], "sm_89", 4)
        assert crashed.error_stage == "crash" and "died" in crashed.error
        again = result_of(worker.request(("spec", spec, "sm_89", "alloc"), 300), "sm_89", 4)
        assert again.error is None and again.shared_bytes == 8192
    finally:
        worker.close()


def test_many_compiles_each_under_the_limit(tmp_path):
    from tilefit.kernels.spec import make_spec
    from tilefit.smem.cache import ExactEstimator

    items = [(make_spec("fused_moe", "fp16", dict(BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=bk,
                                                  GROUP_SIZE_M=1), num_warps=4, num_stages=2), "sm_89")
             for bk in (32, 64)]
    est = ExactEstimator(tmp_path, timeout=0.01)
    out = est.many(items, jobs=2)
    assert {r.error_stage for r in out.values()} == {"timeout"}
    assert not list(tmp_path.rglob("*.json"))  # timeouts are not cached
    again = ExactEstimator(tmp_path).many(items, jobs=2)
    assert [again[i].shared_bytes for i in items] == [8192, 16384]


def test_a_call_site_compile_over_the_limit_is_est002_with_the_reason(tmp_path):
    kernels = {"engine.attention.mla_decode:_mla_grouped_stage1": {
        "kv_cache": ["bf16"], "Att_Out": ["fp32"], "kv_group_num": [16], "q_head_num": [16], "NUM_KV_SPLITS": [4]}}
    files = [str(p) for p in (FIXTURES / "engine" / "attention").glob("*.py")]
    r = run_check(files, CheckOptions(targets=["rtx4090"], compile_timeout=0.01), Settings(kernels=kernels))
    notes = [d for d in r.diagnostics if d.code == "EST002"]
    assert notes and all("compile-timeout" in d.message for d in notes), [d.message for d in r.diagnostics]
    assert not r.errors
