"""Serving sizes as scenario values (issue 18.4): sizes the server allocates rather than the
model has. SGLang 0.5.23's QSA backend sizes a prefix sum's tile by the rows of the per-token
top-k indices (``batch, topk = topk_indices.shape``; ``BLOCK_B = next_power_of_2(batch)``), from
decode (one row per request: the batch sizes) and from extend (at most a prefill chunk: SGLang's
default ``--chunked-prefill-size`` per GPU memory, names.json token_rows); its DSA KPool decode
update takes the request pool's rows and a page table's columns as constexprs that only clamp
an index (names.json serving_sizes, facts ``request_slots`` and ``pages_per_request``). The
fixtures are our own code in the shape of those launchers."""

from __future__ import annotations

import pytest

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import ScenarioError, from_facts, names_table, prefill_rows, resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit

SOURCE = '''import torch
import triton
import triton.language as tl


@triton.jit
def _valid_counts(lens_ptr, idx_ptr, counts_ptr, topk: tl.constexpr, BLOCK_TOPK: tl.constexpr):
    cols = tl.arange(0, BLOCK_TOPK)
    got = tl.load(idx_ptr + cols, mask=cols < topk, other=-1)
    tl.store(counts_ptr, tl.sum((got >= 0).to(tl.int32), axis=0))


@triton.jit
def _row_prefix_sum(counts_ptr, cu_ptr, rows, BLOCK_B: tl.constexpr):
    offs = tl.arange(0, BLOCK_B)
    got = tl.load(counts_ptr + offs, mask=offs < rows, other=0)
    tl.store(cu_ptr + offs + 1, tl.cumsum(got, 0), mask=offs < rows)


def cu_seqlens(lens, indices, counts, cu, rows, topk, block_b=None):
    block_b = block_b or triton.next_power_of_2(rows)
    _valid_counts[(rows,)](lens, indices, counts, topk, BLOCK_TOPK=triton.next_power_of_2(topk))
    _row_prefix_sum[(1,)](counts, cu, rows, BLOCK_B=block_b)


class SparseBackend:
    def forward(self, lens, topk_indices):
        rows, topk = topk_indices.shape
        counts = torch.empty(rows, dtype=torch.int32)
        cu = torch.empty(rows + 1, dtype=torch.int32)
        cu_seqlens(lens, topk_indices, counts, cu, rows, topk)


@triton.jit
def _tail_update(tail_ptr, table_ptr, req_ptr, REQ_POOL_SIZE: tl.constexpr, COLS: tl.constexpr,
                 HEAD_DIM: tl.constexpr):
    req = tl.minimum(tl.maximum(tl.load(req_ptr), 0), REQ_POOL_SIZE - 1)
    page = tl.minimum(tl.load(table_ptr + req), COLS - 1)
    offs = tl.arange(0, HEAD_DIM)
    tl.store(tail_ptr + page * HEAD_DIM + offs, tl.load(tail_ptr + req * HEAD_DIM + offs))


def tail_update(tail_k, block_tables, req_pool_indices):
    _tail_update[(req_pool_indices.shape[0],)](tail_k, block_tables, req_pool_indices,
                                               REQ_POOL_SIZE=tail_k.shape[0], COLS=block_tables.shape[1],
                                               HEAD_DIM=128)
'''


def _sites(tmp_path, names):
    path = tmp_path / "serving_ops.py"
    path.write_text(SOURCE)
    return build_scenario_sites(Project.scan([str(path)]), resolve(names), "cuda", frozenset({89, 120}))


def _site(sites, kernel):
    (site,) = [s for s in sites.launches if s.kernel.name == kernel]
    return site


def _lit(inst, name):
    v = inst.value(name)
    return v.value if isinstance(v, Lit) else None


def test_token_rows_are_the_decode_batches_and_the_prefill_chunks(tmp_path):
    site = _site(_sites(tmp_path, ["llama-gqa-128"]), "_row_prefix_sum")
    got = {_lit(i, "BLOCK_B"): i.label for i in site.instances}
    # decode: one row per request of each batch size; extend: each default chunk of SGLang
    assert set(got) == {1, 32, 256, 1024, 2048, 4096, 8192, 16384}, got
    assert "(batch size 32)" in got[32], got[32]
    assert "(prefill chunk of 4096 token rows)" in got[4096] and "batch size" not in got[4096], got[4096]
    assert names_table()["token_rows"]["prefill"] == [2048, 4096, 8192, 16384]


def test_a_launch_that_reads_no_rows_is_not_multiplied_by_the_chunks(tmp_path):
    # the counts launch reads the same tensor's second dimension only (the top-k width): it is
    # not rebuilt for a prefill chunk, so no instance of it carries a chunk label
    site = _site(_sites(tmp_path, ["llama-gqa-128"]), "_valid_counts")
    assert not any("prefill chunk" in i.label for i in site.instances), [i.label for i in site.instances]


def test_a_local_read_again_through_the_memo_still_marks_the_launch(tmp_path):
    # both launches of cu_seqlens() read `rows` of the caller; the second one reads it from the
    # evaluator's memo of locals: it must still count as reading the batch (was judged at batch 1 only)
    site = _site(_sites(tmp_path, ["qwen-gqa-64"]), "_row_prefix_sum")
    assert {1, 32, 256, 1024} <= {_lit(i, "BLOCK_B") for i in site.instances}


def test_prefill_rows_fact_and_its_validation():
    attention = {"heads": 32, "kv_heads": 8, "head_dim": 128}
    assert prefill_rows(attention) == (2048, 4096, 8192, 16384)
    assert prefill_rows({**attention, "prefill_rows": [8192]}) == (8192,)
    assert prefill_rows({"experts": 8, "top_k": 2}) == ()  # no attention: no forward rows to judge
    with pytest.raises(ScenarioError, match="prefill_rows must be positive integers"):
        prefill_rows({**attention, "prefill_rows": [0]})


def test_request_slots_and_page_table_columns_bind_the_kpool_clamps(tmp_path):
    site = _site(_sites(tmp_path, ["dsa-kpool4"]), "_tail_update")
    # dsa-kpool4: 2048 requests + SGLang's sentinel slot, 131072-token tables in 64-token pages
    assert {(_lit(i, "REQ_POOL_SIZE"), _lit(i, "COLS")) for i in site.instances} == {(2049, 2048)}
    # a scenario without the serving sizes does not judge it (another scenario binds them)
    other = _site(_sites(tmp_path, ["llama-gqa-128"]), "_tail_update")
    assert not any(_lit(i, "REQ_POOL_SIZE") for i in other.instances)


def test_serving_size_facts_are_positive_integers():
    assert from_facts("x", {"request_slots": 9, "pages_per_request": 4}).values["tail_k.shape[0]"] == 9
    with pytest.raises(ScenarioError, match="request_slots must be a positive integer"):
        from_facts("x", {"request_slots": 0})


def test_the_row_counts_and_offsets_are_int32_in_attention_scenarios():
    # SGLang allocates the per-row valid counts and their prefix sum as int32: typed so, not swept
    # through the float dtypes (an int32 cumsum takes twice the shared memory of a bf16 one)
    llama = resolve(["llama-gqa-128"])[0]
    assert llama.dtypes_of("counts") == ("i32",) and llama.dtypes_of("cu_k") == ("i32",)
    assert resolve(["mixtral-8x7b"])[0].dtypes_of("counts") == ("i32",)  # an attention model too
    assert from_facts("moe only", {"experts": 8, "top_k": 2}).dtypes_of("counts") == ()
