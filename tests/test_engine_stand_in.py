"""vLLM's int8 block-GEMM tables judged with SGLang's kernel, and SGLang's gfx1250 block GEMM.

vLLM 0.33.0 has no int8 block-scaled GEMM kernel; its ``dtype=int8_w8a8`` tables hold SGLang
0.5.23's entries, so SGLang's proven forms stand in (``family.json`` ``engines.vllm.stand_in``).
On gfx1250 SGLang launches ``_w8a8_block_fp8_matmul_gfx1250`` with one stage; the calibration
compiled every corpus entry there, so each is answered with the engine's compiled figure."""

from __future__ import annotations

import json

import pytest

from tilefit.kernels import registry
from tilefit.kernels.spec import make_spec
from tilefit.smem.engine_model import EngineModel

VLLM_CFG = "vllm-0.33.0/vllm/model_executor/layers/quantization/utils/configs"
SGL_CFG = "sglang-0.5.23/sglang/kernels/ops/gemm/configs"


def _int8_tables(corpus):
    return sorted((corpus / VLLM_CFG).glob("*dtype=int8_w8a8,block_shape=*.json"))


def test_vllm_int8_tables_are_sglangs_entries(corpus):
    tables = _int8_tables(corpus)
    assert len(tables) == 39
    for t in tables:
        twin = corpus / SGL_CFG / t.name.replace("[128,128]", "[128, 128]")
        assert twin.is_file(), twin
        assert json.loads(t.read_text()) == json.loads(twin.read_text()), t.name


def _spec(dtype, bm, bn, bk, w, s, engine):
    return make_spec("block_gemm", dtype, dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=1),
                     num_warps=w, num_stages=s, quant="block", block_shape=(128, 128)).evolve(engine=engine)


@pytest.mark.parametrize("arch", ["sm_110", "sm_89", "sm_86", "sm_120", "sm_121", "sm_90", "sm_100"])
def test_vllm_int8_stands_in_with_sglangs_proven_form(corpus, arch):
    fam = registry.get("block_gemm")
    spec = _spec("int8_w8a8", 64, 128, 128, 4, 3, "vllm")
    assert not fam.engine_launches("vllm", spec, arch)
    sub = fam.stand_in("vllm", spec)
    assert sub is not None and sub[0] == "sglang"
    assert fam.stand_in("vllm", _spec("fp8_w8a8", 64, 128, 128, 4, 3, "vllm")) is None
    answer = EngineModel("3.9.0").answer(spec.evolve(engine="sglang"), arch)
    assert answer is not None and answer.proven, answer


def test_gfx1250_corpus_entries_are_compiled_figures(corpus):
    em = EngineModel("3.9.0")
    entries = 0
    for t in sorted((corpus / SGL_CFG).glob("*device_name=AMD_Instinct_MI455X,dtype=fp8_w8a8*.json")):
        for cfg in json.loads(t.read_text()).values():
            spec = _spec("fp8_w8a8", cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"],
                         cfg.get("num_warps", 4), cfg.get("num_stages", 1), "sglang")
            got = em.answer(spec, "gfx1250")
            assert got is not None and got.compiled, (t.name, cfg, got)
            # one stage whatever the entry says: the same figure at the entry's num_stages and at 1
            assert got.shared_bytes == em.answer(spec.evolve(num_stages=1), "gfx1250").shared_bytes
            entries += 1
    assert entries >= 56
    fam = registry.get("block_gemm")
    fn, _args = fam.engine_launch("sglang", _spec("fp8_w8a8", 64, 64, 128, 4, 3, "sglang"), "gfx1250")
    assert fn == "_w8a8_block_fp8_matmul_gfx1250"
    assert fam.engine_options("sglang", _spec("fp8_w8a8", 64, 64, 128, 4, 3, "sglang"), "gfx1250") == {"num_stages": 1}
