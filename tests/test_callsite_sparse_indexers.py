"""Sparse indexers (issue 18.4): what a launcher asserts, a package scanned below its root, the DSA
KPool and Qwen QSA scenarios.

SGLang 0.5.23's DSA KPool launchers (srt/layers/attention/dsa/kpool_fp8_index.py) read their
tile sizes from the pool and the index-K cache (``PAGE_SIZE=pool.index_page_size``,
``BUF_NUMEL_PER_PAGE=buf.shape[1]``, ``POOL_SIZE=pool.index_kpool``, ``TAIL_SIZE=tail_k.shape[1]``)
and assert some of them first (``assert pool.index_page_size == BLOCK_SIZE_K``). The fixture is
our own code in that shape, in a folder without ``__init__.py`` four levels below its package
``pkg`` (as ``sglang/srt/layers/attention/dsa``), importing a constant from a sibling module by
its absolute name.
"""

from __future__ import annotations

import pytest

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import ScenarioError, builtin, from_facts, resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, Unknown

UTILS = '''PRESHUFFLE_TILE = 16


def can_preshuffle() -> bool:
    return False
'''

SOURCE = '''import triton
import triton.language as tl

from pkg.srt.layers.attention.dsa.utils import PRESHUFFLE_TILE, can_preshuffle

BLOCK_SIZE_K = 64
HEAD = 128


def _tile() -> int:
    return PRESHUFFLE_TILE if can_preshuffle() else 0


@triton.jit
def gather_kernel(buf_ptr, out_ptr, PAGE: tl.constexpr, ROW: tl.constexpr, TILE: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    offs = tl.arange(0, BLOCK_D)
    tl.store(out_ptr + offs, tl.load(buf_ptr + offs * ROW // PAGE))


def gather(pool, buf, out):
    assert buf.is_contiguous()
    assert pool.index_page_size == BLOCK_SIZE_K
    gather_kernel[(1,)](buf, out, PAGE=pool.index_page_size, ROW=buf.shape[1], TILE=_tile(),
                        BLOCK_D=triton.next_power_of_2(HEAD))


def gather_reassigned(pool, buf, out):
    assert pool.index_page_size == BLOCK_SIZE_K
    pool = pool.other
    gather_kernel[(1,)](buf, out, PAGE=pool.index_page_size, ROW=64, TILE=0, BLOCK_D=128)


def gather_in_branch(pool, buf, out, flag):
    if flag:
        assert pool.index_page_size == BLOCK_SIZE_K
    gather_kernel[(1,)](buf, out, PAGE=pool.index_page_size, ROW=64, TILE=0, BLOCK_D=128)


@triton.jit
def tail_kernel(tail_ptr, POOL_SIZE: tl.constexpr, TAIL_SIZE: tl.constexpr, N: tl.constexpr,
                BLOCK_D: tl.constexpr):
    offs = tl.arange(0, BLOCK_D)
    tl.store(tail_ptr + offs, tl.load(tail_ptr + offs + POOL_SIZE * TAIL_SIZE * N))


def write_tail(pool, tail_k, num_draft_tokens: int):
    assert tail_k.shape[2] == HEAD
    kpool = pool.index_kpool
    tail_kernel[(1,)](tail_k, POOL_SIZE=kpool, TAIL_SIZE=tail_k.shape[1], N=num_draft_tokens,
                      BLOCK_D=triton.next_power_of_2(tail_k.shape[2]))
'''


def _sites(tmp_path, scenarios=()):
    root = tmp_path / "pkg"
    dsa = root / "srt" / "layers" / "attention" / "dsa"
    dsa.mkdir(parents=True)
    for folder in (root, root / "srt", root / "srt" / "layers", root / "srt" / "layers" / "attention"):
        (folder / "__init__.py").write_text("")
    (dsa / "utils.py").write_text(UTILS)
    (dsa / "kpool.py").write_text(SOURCE)
    # only the launcher's file is named (utils.py is read on demand)
    project = Project.scan([str(dsa / "kpool.py")])
    sites = build_scenario_sites(project, list(scenarios), "cuda", frozenset({89}))
    return {s.where.split(" in ")[-1]: s for s in sites.launches if s.caller is None}


def test_an_asserted_equality_gives_the_value_and_an_absolute_import_below_the_root_resolves(tmp_path):
    site = _sites(tmp_path)["gather()"]
    (inst,) = site.instances
    page = inst.value("PAGE")
    assert isinstance(page, Lit) and page.value == 64 and page.via == "asserted at line 23"
    assert inst.value("TILE").value == 0  # PRESHUFFLE_TILE found in pkg/layers/dsa/utils.py; the test folds
    row = inst.value("ROW")  # nothing says what the cache's row is
    assert isinstance(row, Unknown) and "buf.shape" in row.reason


def test_an_assert_does_not_hold_after_the_name_is_reassigned_nor_from_inside_a_branch(tmp_path):
    sites = _sites(tmp_path)
    for where in ("gather_reassigned()", "gather_in_branch()"):
        (inst,) = sites[where].instances
        assert isinstance(inst.value("PAGE"), Unknown), where


def test_the_dsa_kpool_scenario_binds_the_pool_and_its_caches(tmp_path):
    (dsa,) = resolve(["dsa-kpool4"])
    assert dsa.facts["index_kpool"] == 4 and dsa.dims["kpool"] == 4 and dsa.dims["index_page_size"] == 64
    # a page of the index-K cache: 64 tokens of 128 fp8 bytes and one fp32 scale each
    assert dsa.values["buf.shape[1]"] == 64 * (128 + 4) and dsa.values["tail_k.shape[1]"] == 4
    assert dsa.values["topk_result.shape[1]"] == 2048  # the pooled selection expanded to index_topk tokens
    sites = _sites(tmp_path, [dsa, builtin()["llama-gqa-128"]])
    (inst,) = sites["gather()"].instances
    assert inst.value("ROW").value == 8448 and "scenario dsa-kpool4" in inst.label
    (inst,) = sites["write_tail()"].instances  # the GQA model has no DSA pool: its instance is not judged
    assert [inst.value(k).value for k in ("POOL_SIZE", "TAIL_SIZE", "N", "BLOCK_D")] == [4, 4, 1, 128]
    assert "scenario dsa-kpool4" in inst.label


def test_a_pooled_indexer_needs_its_page_and_head_sizes():
    with pytest.raises(ScenarioError, match="index_page_size and index_head_dim"):
        from_facts("mine", {"index_kpool": 4})
    s = from_facts("mine", {"index_kpool": 2, "index_page_size": 64, "index_head_dim": 128, "tail_extra_slots": 3})
    assert s.values["tail_k.shape[1]"] == 5 and s.values["slot_k.shape[1]"] == 2


QSA = '''import triton
import triton.language as tl


@triton.jit
def expand_kernel(block_indices, query_positions, sequence_lengths, output, BLOCK_TOPK: tl.constexpr,
                  COMPRESS_RATIO: tl.constexpr, TOKEN_TOPK: tl.constexpr, FINAL_TOPK: tl.constexpr,
                  OUTPUT_BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, OUTPUT_BLOCK_SIZE)
    n = tl.load(sequence_lengths + row)
    blocks = tl.load(block_indices + row * BLOCK_TOPK + cols // COMPRESS_RATIO, mask=cols < TOKEN_TOPK, other=-1)
    tl.store(output + row * FINAL_TOPK + cols, blocks * COMPRESS_RATIO + cols % COMPRESS_RATIO, mask=cols < n)


def expand(block_indices, query_positions, sequence_lengths, compress_ratio: int, token_topk: int):
    rows, block_topk = block_indices.shape
    final_topk = token_topk + compress_ratio - 1
    output = block_indices.new_empty((rows, final_topk))
    expand_kernel[(rows,)](block_indices, query_positions, sequence_lengths, output, BLOCK_TOPK=block_topk,
                           COMPRESS_RATIO=compress_ratio, TOKEN_TOPK=token_topk, FINAL_TOPK=final_topk,
                           OUTPUT_BLOCK_SIZE=triton.next_power_of_2(final_topk))


class Backend:
    def expand_block_indices(self, indices, metadata):
        if indices.shape[1] != self.qsa_profile.block_topk:
            return indices
        return expand(indices, metadata.positions, metadata.seqlens, self.compress_ratio, self.qsa_profile.budget)
'''


def test_the_qsa_scenario_binds_the_compressed_indexer_through_the_backend(tmp_path):
    (qsa,) = resolve(["qwen4-exp-qsa"])
    assert qsa.dims["compress_ratio"] == 4 and qsa.dims["budget"] == 2048 and qsa.dims["block_topk"] == 512
    assert qsa.dims["qsa_compressed_page_size"] == 64 // 4 and qsa.dtypes["block_indices,query_positions,sequence_lengths"] == ("i32",)
    (tmp_path / "qsa.py").write_text(QSA)
    project = Project.scan([str(tmp_path / "qsa.py")])
    sites = build_scenario_sites(project, [qsa, builtin()["llama-gqa-128"]], "cuda", frozenset({89}))
    for site in sites.launches:  # at the launcher (its parameters by name) and where the backend calls it
        (inst,) = site.instances
        got = [inst.value(k).value for k in ("BLOCK_TOPK", "COMPRESS_RATIO", "TOKEN_TOPK", "FINAL_TOPK",
                                             "OUTPUT_BLOCK_SIZE")]
        assert got == [512, 4, 2048, 2051, 4096] and "scenario qwen4-exp-qsa" in inst.label, site.where
    assert sites.launches


def test_a_qsa_budget_the_engine_refuses_is_a_scenario_error():
    for facts in ({"qsa_compress_ratio": 4}, {"qsa_compress_ratio": 4, "qsa_budget": 4096},
                  {"qsa_compress_ratio": 1, "qsa_budget": 512}):
        with pytest.raises(ScenarioError, match="(?i)qsa"):
            from_facts("mine", facts)
    assert from_facts("mine", {"qsa_compress_ratio": 4, "qsa_budget": 8192}).dims["block_topk"] == 2048
