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


BYTES = '''import torch
import triton
import triton.language as tl


@triton.jit
def gather_rows(src, dst, ROW: tl.constexpr):
    cols = tl.arange(0, ROW)
    tl.store(dst + cols, tl.load(src + cols))


def gather(compressed, out):
    heads, dim = compressed.shape[1:]
    row = heads * dim * compressed.element_size()
    gather_rows[(1,)](compressed.view(torch.uint8), out.view(torch.uint8), ROW=row)
'''


def test_a_byte_copy_of_a_cache_in_two_dtypes_is_judged_once_per_dtype_as_bytes(tmp_path):
    """SGLang's QSA gather copies the compressed index keys ([slots, 1, 128], bf16 or fp8) as raw
    bytes: a row is 256 or 128 bytes, and the kernel gets uint8 views whatever the cache holds."""
    path = tmp_path / "qsa_gather.py"
    path.write_text(BYTES)
    project = Project.scan([str(path)])
    scenarios = resolve(["qwen4-exp-qsa"])
    sites = build_scenario_sites(project, scenarios, "cuda", frozenset({89}))
    (site,) = [s for s in sites.launches if s.kernel.name == "gather_rows"]
    ev = CallsiteEvaluator(project, kernels={}, mode="exact", allow_import=False, estimator=None,
                           scenarios=scenarios, triton=False)
    device = SimpleNamespace(arch="sm_89", triton_fp8_dtypes=None)
    compiled = set()
    for case in launch_cases(site):
        for variant in ev.variants(case.kernel):
            out = ev.job(case, variant, device)
            if isinstance(out, Outcome) and "this arm is for" in out.detail:
                continue  # the other dtype's arm
            args, _, _, _ = ev.plan(case, variant, "sm_89")
            ptrs = {a.name: a.value for a in args if a.kind == "ptr"}
            assert ptrs == {"src": "u8", "dst": "u8"}, ptrs  # the views' bytes, whatever the variant
            compiled.add((variant.dtype_of("src"), case.value("ROW")))
    # a 2-byte cache's arm (256 bytes a row) with the 2-byte variants, the fp8 arm (128) with fp8
    assert compiled == {("bf16", 256), ("fp16", 256), ("fp8e4nv", 128)}, compiled


def test_the_qsa_index_cache_facts_are_checked_as_sglang_checks_them():
    import pytest

    from tilefit.callsites.scenarios import ScenarioError

    base = {"qsa_compress_ratio": 4, "qsa_budget": 2048, "page_size": 64, "qsa_index_head_dim": 128}
    s = from_facts("q", {**base, "qsa_indexer_dtypes": ["bf16", "fp8e4nv"]})
    assert s.values["compressed.shape[1]"] == 1 and s.values["compressed.shape[2]"] == 128
    assert s.dtypes_of("compressed") == ("bf16", "fp8e4nv")
    with pytest.raises(ScenarioError, match="qsa_index_kv_heads must be 1"):
        from_facts("q", {**base, "qsa_index_kv_heads": 2})
    with pytest.raises(ScenarioError, match="not one of bf16, fp8e4nv"):
        from_facts("q", {**base, "qsa_indexer_dtypes": ["fp16"]})
