"""``entry_problems`` (the one pass VAL002-VAL005 share): its memo of item verdicts never answers
for a value of another type that compares equal (``True == 1 == 1.0``), and the engine checks a
fused-MoE table's entries the way the rules' examples say."""

from __future__ import annotations

from tilefit.parameters import domain_problems, entry_problems

BASE = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}


def test_equal_values_of_other_types_get_their_own_verdicts():
    for first, then in ((1, True), (True, 1), (1, 1.0), (1.0, 1), (64, "64"), ("64", 64)):
        a = entry_problems("fused_moe", "sglang", dict(BASE, num_warps=first))
        b = entry_problems("fused_moe", "sglang", dict(BASE, num_warps=then))
        assert bool(a.wrong_types) == (type(first) is not int), (first, a)
        assert bool(b.wrong_types) == (type(then) is not int), (then, b)


def test_verdicts_by_engine_and_in_key_order():
    entry = dict(BASE, SPLIT_K=3, BLOCK_M=16, num_warps=6, num_stages=12, waves_per_eu=0, USE_TMA=1)
    sglang = entry_problems("fused_moe", "sglang", entry)
    vllm = entry_problems("fused_moe", "vllm", entry)
    assert sglang.unknown == (("SPLIT_K", "sglang"), ("BLOCK_M", None))
    assert vllm.unknown == (("BLOCK_M", None), ("USE_TMA", "vllm"))
    assert entry_problems("fused_moe", None, entry).unknown == (("BLOCK_M", None),)
    assert sglang.wrong_types == vllm.wrong_types == (("USE_TMA", "bool", 1),)
    assert [k for k, _, _ in sglang.out_of_domain] == ["num_warps", "num_stages"]
    assert [hard for _, _, hard in sglang.out_of_domain] == [True, False]
    assert list(sglang.out_of_domain) == domain_problems("fused_moe", entry)
    assert sglang.backend_options == (("waves_per_eu", ("hip",)),)
    assert entry_problems("fused_moe", "sglang", BASE) == entry_problems("fused_moe", "vllm", {}) == type(sglang)()
