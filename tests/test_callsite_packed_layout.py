"""KV-cache dimensions that pack a fixed number of bytes, per KV dtype (issue 18.4). vLLM 0.33.0's
head-major (5-D) key cache is [blocks, kv_heads, head_size // x, block_size, x] with
x = 16 // element size, and its reshape-and-cache launcher reads ``x = key_cache.shape[4]``: under
a scenario whose KV cache is bf16 or fp8, x is 8 or 16, one arm per element type, and each arm is
compiled only with the dtype variants that pass the cache with that element size. The fixture is
our own code in the shape of that launcher."""

from __future__ import annotations

from types import SimpleNamespace

from tilefit.callsites.evaluate import CallsiteEvaluator, Outcome, default_dtype, launch_cases
from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import PerDtype, from_facts, resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, label_dtypes

SOURCE = '''import torch
import triton
import triton.language as tl


@triton.jit
def cache_write(key_ptr, key_cache_ptr, block_size: tl.constexpr, x: tl.constexpr, HEAD_MAJOR: tl.constexpr,
                TILE: tl.constexpr):
    offs = tl.arange(0, TILE)
    v = tl.load(key_ptr + offs)
    if HEAD_MAJOR:
        tl.store(key_cache_ptr + (offs // x) * block_size * x + offs % x, v)
    else:
        tl.store(key_cache_ptr + offs, v)


def write_cache(key, key_cache, slot_mapping):
    head_major = key_cache.ndim == 5
    if head_major:
        block_size = key_cache.shape[3]
        x = key_cache.shape[4]
    else:
        block_size = key_cache.shape[1]
        x = 1
    cache_write[(slot_mapping.shape[0],)](key_ptr=key, key_cache_ptr=key_cache, block_size=block_size, x=x,
                                          HEAD_MAJOR=head_major, TILE=128)
'''


def _site(tmp_path):
    path = tmp_path / "cache_ops.py"
    path.write_text(SOURCE)
    project = Project.scan([str(path)])
    sites = build_scenario_sites(project, resolve(["llama-gqa-128"]), "cuda", frozenset({89}))
    (site,) = [s for s in sites.launches if s.kernel.name == "cache_write"]
    return project, site


def test_x_is_sixteen_bytes_of_the_caches_element_type(tmp_path):
    _, site = _site(tmp_path)
    got = set()
    for inst in site.instances:
        x = inst.value("x")
        assert isinstance(x, Lit), (inst.label, x)
        got.add((x.value, label_dtypes(inst.label).get("key_cache")))
    assert got == {(8, "bf16"), (16, "fp8e4nv"), (1, None)}, got


def test_each_arm_compiles_only_with_the_variants_of_its_element_size(tmp_path):
    project, site = _site(tmp_path)
    ev = CallsiteEvaluator(project, kernels={}, mode="exact", allow_import=False, estimator=None, triton=False)
    device = SimpleNamespace(arch="sm_89", triton_fp8_dtypes=None)
    seen = set()
    for case in launch_cases(site):
        dt = label_dtypes(case.label).get("key_cache")
        for variant in ev.variants(case.kernel):
            info = ev.info(case.kernel)  # the cache is only stored to: an output, bf16 beside an fp8 sweep
            passed = variant.dtype_of("key_cache_ptr") or default_dtype(info.pointers["key_cache_ptr"], variant, info)
            out = ev.job(case, variant, device)
            off = isinstance(out, Outcome) and out.status == "unsupported" and "this arm is for" in out.detail
            size = {"bf16": 2, "fp16": 2, "fp8e4nv": 1}
            assert off == (dt is not None and size[dt] != size[passed]), (case.label, passed, out)
            seen.add((case.value("x"), passed, off))
    # x = 16 is never compiled with a 2-byte cache; x = 8 and x = 1 are
    assert (16, "bf16", True) in seen and (8, "bf16", False) in seen and (1, "bf16", False) in seen
    assert not any(x == 16 and size_of in ("bf16", "fp16") and not off for x, size_of, off in seen)


def test_a_scenario_binds_the_packed_dimension_per_kv_dtype():
    s = from_facts("x", {"heads": 8, "kv_heads": 8, "head_dim": 128, "kv_dtypes": ["bf16", "fp8e4nv"]})
    assert s.values["key_cache.shape[4]"] == PerDtype("key_cache", (("bf16", 8), ("fp8e4nv", 16)))
    assert "key_cache.shape[4]" not in from_facts("y", {"experts": 8, "hidden": 1024}).values
