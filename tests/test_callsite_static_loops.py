"""Loop variables over literal sequences, and shapes a ``view`` spells out (issue 18.4). SGLang
0.5.23's MiniCPM sparse attention compresses its keys at two levels in one loop over a literal
tuple of (buffer, kernel size, kernel stride) entries, the sizes being its caller's parameters
(the backend's ``k1_kernel_size``, ...), and reads the KV heads from the cache it viewed as
``[tokens, heads, head dim]``. Each entry of the loop is one arm (the variables of one entry
together), and ``x.view(-1, a, b).shape[1]`` is ``a``. The fixture is our own code in the shape
of that launcher."""

from __future__ import annotations

import pytest

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import ScenarioError, from_facts, resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, Unknown, branches

SOURCE = '''import triton
import triton.language as tl


@triton.jit
def compress_kernel(k_ptr, out_ptr, heads: tl.constexpr, dim: tl.constexpr, size: tl.constexpr,
                    stride: tl.constexpr, BLOCK: tl.constexpr, GRID: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(k_ptr + offs * stride))


def compress_one(out, key_cache, size, stride, max_len):
    heads = key_cache.shape[1]
    dim = key_cache.shape[2]
    chunks = max(0, (max_len - size) // stride + 1)
    compress_kernel[(1,)](key_cache, out, heads, dim, size, stride, triton.next_power_of_2(dim),
                          min(chunks, 1024))


def compress_both(layer, pool, out1, out2, k1_kernel_size, k1_kernel_stride, k2_kernel_size, k2_kernel_stride,
                  max_len: int = 32768):
    key_cache = pool.get_key_buffer(layer.layer_id).view(-1, layer.tp_k_head_num, layer.head_dim)
    for out, size, stride in ((out1, k1_kernel_size, k1_kernel_stride), (out2, k2_kernel_size, k2_kernel_stride)):
        compress_one(out, key_cache, size, stride, max_len)


def each_literal(x):
    for block in (16, 32):
        compress_kernel[(1,)](x, x, 1, 64, 8, 8, block, 1)
'''


def _sites(tmp_path, names):
    path = tmp_path / "sparse_utils.py"
    path.write_text(SOURCE)
    return build_scenario_sites(Project.scan([str(path)]), resolve(names), "cuda", frozenset({89}))


def _lit(inst, name):
    v = inst.value(name)
    return v.value if isinstance(v, Lit) else None


def test_each_entry_of_the_loop_is_one_arm_with_its_own_sizes(tmp_path):
    sites = _sites(tmp_path, ["minicpm-sala"])
    site = [s for s in sites.launches if s.kernel.name == "compress_kernel" and s.caller is not None]
    got = {(_lit(i, "heads"), _lit(i, "dim"), _lit(i, "size"), _lit(i, "stride"), _lit(i, "GRID"))
           for s in site for i in s.instances}
    # 2 KV heads of 128 (the view's sizes); 32 / 16 and 4 x both; (32768 - 128) // 64 + 1 = 511 chunks
    assert got == {(2, 128, 32, 16, 1024), (2, 128, 128, 64, 511)}, got
    labels = {i.label for s in site for i in s.instances}
    assert all("taking entry" in lab for lab in labels), labels


def test_a_loop_over_literals_judges_each_value(tmp_path):
    sites = _sites(tmp_path, ["llama-gqa-128"])
    (site,) = [s for s in sites.launches if s.kernel.name == "compress_kernel" and "each_literal" in s.where]
    assert sorted(_lit(i, "BLOCK") for i in site.instances) == [16, 32]


def test_without_the_model_the_sizes_stay_unknown(tmp_path):
    sites = _sites(tmp_path, ["llama-gqa-128"])
    site = [s for s in sites.launches if s.kernel.name == "compress_kernel" and "each_literal" not in s.where]
    sizes = [v for s in site for i in s.instances for _, v in branches(i.value("size"))]
    assert sizes and not any(isinstance(v, Lit) for v in sizes), sizes
    assert all(isinstance(v, Unknown) for v in sizes)


def test_the_infllm_facts_are_checked():
    with pytest.raises(ScenarioError, match="the stride dividing the size"):
        from_facts("m", {"heads": 32, "kv_heads": 2, "head_dim": 128, "infllm_kernel_size": 32,
                         "infllm_kernel_stride": 12})
