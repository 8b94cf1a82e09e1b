"""The variants of a table entry filled in from its launch key's templates
(``tilefit.variants.TableLaunch``, ``KernelFamily.launch_key``) are those the kernel family builds
for that entry itself (``table_variants`` then ``engine_variants``): the same labels, the same
specs field by field, the same pickles; and the in-domain test's containers answer as the rules."""

from __future__ import annotations

import itertools
import pickle

import pytest

from tilefit import kernels
from tilefit.families import classify
from tilefit.parameters import domain_problems, domain_test, in_domain
from tilefit.variants import TableLaunch

VLLM_MOE = "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/"
SGLANG_MOE = "sglang/srt/layers/moe/moe_runner/triton_utils/configs/triton_3_7_1/"
VLLM_GEMM = "vllm-0.33.0/vllm/model_executor/layers/quantization/utils/configs/"
TABLES = [
    VLLM_MOE + "E=8,N=7168,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",  # swaps A and B on sm_90
    VLLM_MOE + "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",  # BK clamp
    VLLM_MOE + "E=64,N=640,device_name=NVIDIA_H100_80GB_HBM3,dtype=int8_w8a16.json",  # two kernels
    SGLANG_MOE + "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json",  # USE_TMA
    SGLANG_MOE + "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3_down.json",
    "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3.json",  # no engine: each engine's kernel
    VLLM_GEMM + "N=3072,K=1536,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json",
    "N=4096,K=4096,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8_channelwise.json",  # scaled_mm, no group
]
ENTRIES = [
    {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g, "num_warps": w,
     "num_stages": s, **({"USE_TMA": tma} if tma is not None else {})}
    for bm, bn, bk, g, w, s, tma in itertools.product((16, 128), (64, 256), (64, 256), (1, 16), (4, 8), (2, 4),
                                                      (None, True, False))
]


def _own(launch: TableLaunch, meta, entry, vendor):
    """The family's own build of the entry, as TableLaunch.variants hands it over."""
    tile = {k: entry[k] for k in launch.names}
    if launch.group:
        tile[launch.group] = entry[launch.group]
    warps, stages = entry["num_warps"], entry["num_stages"]
    return launch._built(meta, entry, tile, warps, stages)


@pytest.mark.parametrize("path", TABLES)
@pytest.mark.parametrize("arch", ["sm_90", "sm_89"])
def test_filled_in_variants_are_the_familys_own(path, arch):
    meta = classify(path)
    family = kernels.table(meta.family)
    assert family.launch_key(meta, arch, meta.engine) is not None  # the path under test is the templated one
    launch = TableLaunch(meta, family, arch, meta.engine)
    filled = 0
    for entry in ENTRIES:
        keys_before = len(launch.templates)
        got = launch.variants(meta, entry, "NVIDIA")
        want = _own(launch, meta, entry, "NVIDIA")
        filled += len(launch.templates) == keys_before
        assert len(got) == len(want) > 0
        for g, w in zip(got, want):
            assert g.label == w.label
            assert g.spec == w.spec and g.spec.key() == w.spec.key()
            assert list(g.spec.__dict__) == list(w.spec.__dict__)
            assert pickle.dumps(g) == pickle.dumps(w)
    assert filled > len(ENTRIES) // 2  # most entries were filled in, not built


def test_templates_tell_swapped_clamped_and_tma_entries_apart():
    swap = classify(TABLES[0])
    launch = TableLaunch(swap, kernels.table(swap.family), "sm_90", swap.engine)
    small_m = dict(ENTRIES[0], BLOCK_SIZE_M=16, BLOCK_SIZE_N=128)
    large_m = dict(small_m, BLOCK_SIZE_M=128)
    assert launch.variants(swap, large_m, "NVIDIA")[0].spec.swap_ab is False
    assert launch.variants(swap, small_m, "NVIDIA")[0].spec.swap_ab is True
    block = classify(TABLES[1])
    launch = TableLaunch(block, kernels.table(block.family), "sm_89", block.engine)
    (v,) = launch.variants(block, dict(ENTRIES[0], BLOCK_SIZE_K=64), "NVIDIA")
    assert v.spec.get("BLOCK_SIZE_K") == 64
    (v,) = launch.variants(block, dict(ENTRIES[0], BLOCK_SIZE_K=256), "NVIDIA")
    assert v.spec.get("BLOCK_SIZE_K") == 128  # vLLM clamps to the quantisation block
    tma = classify(TABLES[3])
    launch = TableLaunch(tma, kernels.table(tma.family), "sm_90", tma.engine)
    plain = dict(ENTRIES[0])
    assert launch.variants(tma, plain, "NVIDIA")[0].spec.extra == ()
    assert dict(launch.variants(tma, dict(plain, USE_TMA=True), "NVIDIA")[0].spec.extra) == {"tma": "b"}


def test_a_family_without_a_launch_key_builds_every_entry(tmp_path):
    meta = classify(TABLES[0])
    family = kernels.table(meta.family)
    launch = TableLaunch(meta, family, "sm_90", meta.engine)
    launch.key_of = None  # as for a family whose launch_key is the default
    for entry in ENTRIES[:8]:
        assert launch.variants(meta, entry, "NVIDIA") == _own(launch, meta, entry, "NVIDIA")
    assert not launch.templates


@pytest.mark.parametrize("family", kernels.table_names())
def test_domain_test_answers_as_the_rules_on_odd_values(family):
    test = domain_test(family)
    for key in ("BLOCK_SIZE_M", "GROUP_SIZE_M", "num_warps", "num_stages", "waves_per_eu", "kpack", "SPLIT_K"):
        for value in (-1, 0, 1, 2, 3, 8, 9, 32, 33, 64, 2 ** 20, 2 ** 20 + 1, 2 ** 31, 2 ** 4000, True, False,
                      1.0, "8", None):
            entry = {key: value}
            assert test(entry) == in_domain(family, entry) == (not domain_problems(family, entry)), (key, value)
