"""What a launcher asserts, a package scanned below its root, and the DSA KPool scenario (issue 18.4).

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
