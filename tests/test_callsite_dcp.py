"""Decode context parallelism (DCP) as scenario variants (issue 18.4). vLLM 0.33.0 combines the
attention output across a DCP group with launches whose constexprs are the group's size (read
from ``cp_group.world_size`` or the receive buffer's first dimension) and the heads per rank (the
gathered heads over the group size); SGLang 0.5.23 builds per-rank KV indices with the group's
size and rank as constexprs (``self.dcp_size``, ``self.dcp_rank``). Neither engine runs those
launches without DCP (size 1), so a scenario without fact ``dcp_sizes`` does not judge them, and
a scenario with it judges them once per size (rank 0), labelled ``decode context parallel N``.
The fixtures are our own code in the shape of those launchers."""

from __future__ import annotations

import pytest

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import ScenarioError, dcp_sizes, dcp_values, from_facts, resolve, with_roles
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, branches

SOURCE = '''import torch
import triton
import triton.language as tl


@triton.jit
def pack_kernel(out_ptr, buf_ptr, N: tl.constexpr, HEAD_DIM: tl.constexpr, H_PER_RANK: tl.constexpr,
                LSE_PACK_DIM: tl.constexpr, HAS_MASK: tl.constexpr, NUM_SEQS_POW2: tl.constexpr):
    offs = tl.arange(0, HEAD_DIM)
    tl.store(buf_ptr + offs, tl.load(out_ptr + offs))


@triton.jit
def combine_kernel(buf_ptr, out_ptr, N: tl.constexpr, HEAD_DIM: tl.constexpr):
    offs = tl.arange(0, HEAD_DIM)
    tl.store(out_ptr + offs, tl.load(buf_ptr + offs))


@triton.jit
def plain_copy(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 0)


def _buffers(shape, dtype):
    return torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype)


def _lse_pack_dim(output_dtype):
    bits = torch.finfo(output_dtype).bits
    if bits == 16:
        return 2
    return 1


def _pack(cp_attn_out, send_buffer, world_size: int, h_per_rank: int, head_dim: int, seq_lens=None):
    has_mask = seq_lens is not None
    num_seqs = seq_lens.shape[0] if has_mask else 0
    pack_kernel[(cp_attn_out.shape[0], h_per_rank)](cp_attn_out, send_buffer, N=world_size, HEAD_DIM=head_dim,
                                                    H_PER_RANK=h_per_rank,
                                                    LSE_PACK_DIM=_lse_pack_dim(cp_attn_out.dtype),
                                                    HAS_MASK=has_mask,
                                                    NUM_SEQS_POW2=triton.next_power_of_2(max(num_seqs, 1)))


def _combine(recv_buffer, head_dim: int):
    world_size, num_tokens, h_per_rank, _ = recv_buffer.shape
    out = torch.empty((num_tokens, h_per_rank, head_dim), dtype=recv_buffer.dtype)
    combine_kernel[(num_tokens, h_per_rank)](recv_buffer, out, N=world_size, HEAD_DIM=head_dim)
    return out


def lse_reduce(cp_attn_out, cp_attn_lse, cp_group, seq_lens=None):
    world_size = cp_group.world_size
    if world_size == 1:
        return cp_attn_out
    B, H, D = cp_attn_out.shape
    H_per_rank = H // world_size
    send_buffer, recv_buffer = _buffers((world_size, B, H_per_rank, D + 1), cp_attn_out.dtype)
    _pack(cp_attn_out, send_buffer, world_size, H_per_rank, D, seq_lens=seq_lens)
    return _combine(recv_buffer, D)


@triton.jit
def dcp_kv_indices_kernel(req_to_token_ptr, kv_indices_ptr, dcp_size: tl.constexpr, dcp_rank: tl.constexpr):
    BLOCK: tl.constexpr = 512
    offs = tl.arange(0, BLOCK) * dcp_size + dcp_rank
    tl.store(kv_indices_ptr + offs, tl.load(req_to_token_ptr + offs) // dcp_size)


class Backend:
    def _dcp_kv_indices(self, req_to_token, kv_indices):
        dcp_kv_indices_kernel[(1,)](req_to_token, kv_indices, self.dcp_size, self.dcp_rank)

    def copy(self, x):
        plain_copy[(1,)](x, BLOCK=128)
'''


def _sites(tmp_path, names):
    path = tmp_path / "dcp_ops.py"
    path.write_text(SOURCE)
    return build_scenario_sites(Project.scan([str(path)]), resolve(names), "cuda", frozenset({120}))


def _site(sites, kernel):
    (site,) = [s for s in sites.launches if s.kernel.name == kernel]
    return site


def _lit(inst, name):
    v = inst.value(name)
    return v.value if isinstance(v, Lit) else None


def test_each_dcp_size_is_a_labelled_variant_of_the_combine(tmp_path):
    sites = _sites(tmp_path, ["deepseek-v3-tp8"])
    pack = _site(sites, "pack_kernel")
    got = {(_lit(i, "N"), _lit(i, "H_PER_RANK"), _lit(i, "HEAD_DIM")) for i in pack.instances}
    # 16 query heads per TP rank gathered over N ranks, scattered back 16 per rank; the absorbed
    # MLA output's head size is kv_lora_rank (512), not the Q/K head size 576
    assert got == {(2, 16, 512), (4, 16, 512), (8, 16, 512)}, got
    assert all(f"(decode context parallel {_lit(i, 'N')}, rank 0)" in i.label for i in pack.instances)
    # the output is the activation dtype (bf16): the LSE packs into 2 of its 16-bit elements
    assert {_lit(i, "LSE_PACK_DIM") for i in pack.instances} == {2}
    # seq_lens is passed (vLLM's MLA decode, the empty-shard mask over the batch) or not
    masks = {(_lit(i, "HAS_MASK"), _lit(i, "NUM_SEQS_POW2")) for i in pack.instances}
    assert {(True, b) for b in (1, 32, 256, 1024)} | {(False, 1)} <= masks, masks
    combine = _site(sites, "combine_kernel")
    assert {(_lit(i, "N"), _lit(i, "HEAD_DIM")) for i in combine.instances} == {(2, 512), (4, 512), (8, 512)}


def test_a_scenario_without_dcp_does_not_judge_the_combine(tmp_path):
    sites = _sites(tmp_path, ["llama-gqa-128"])
    for kernel in ("pack_kernel", "combine_kernel"):
        site = _site(sites, kernel)
        ns = [v for i in site.instances for _, v in branches(i.value("N"))]
        assert ns and not any(isinstance(v, Lit) for v in ns), (kernel, ns)
        assert not any("decode context parallel" in i.label for i in site.instances)


def test_sglang_shaped_rank_constexprs_take_size_and_rank_zero(tmp_path):
    sites = _sites(tmp_path, ["deepseek-v3-tp8"])
    site = _site(sites, "dcp_kv_indices_kernel")
    assert {(_lit(i, "dcp_size"), _lit(i, "dcp_rank")) for i in site.instances} == {(2, 0), (4, 0), (8, 0)}
    plain = _site(sites, "plain_copy")  # reads no DCP value: judged once, no variant
    assert [i.label for i in plain.instances] == [""]


def test_dcp_sizes_must_divide_the_tensor_parallel_size():
    base = {"heads": 16, "kv_heads": 1, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "tp": 8}
    assert dcp_sizes({**base, "dcp_sizes": [2, 8]}) == (2, 8)
    with pytest.raises(ScenarioError, match="size 3 does not divide the tensor-parallel size 8"):
        with_roles([from_facts("x", {**base, "dcp_sizes": [3]})])
    with pytest.raises(ScenarioError, match="at least 2"):
        dcp_sizes({**base, "dcp_sizes": [1]})
    values, dims = dcp_values(4, {"num_heads": 16, "v_head_dim": 512})
    assert values["cp_attn_out.shape[1]"] == 64 and values["recv_buffer.shape[0]"] == 4
    assert values["head_dim"] == 512 and dims["dcp_size"] == 4 and dims["dcp_rank"] == 0
