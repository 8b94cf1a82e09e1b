"""File-name grammars: every corpus file is classified, with the metadata its name carries."""

from __future__ import annotations

import collections

from tilefit.families import classify


def test_every_corpus_file_is_classified(corpus_files):
    families = collections.Counter()
    for path in corpus_files:
        meta = classify(path)
        assert meta is not None, path
        assert not meta.problems, (path, meta.problems)
        families[meta.family] += 1
    assert families == {
        "fused_moe": 728, "w8a8_gemm": 424, "mamba_ssu": 34, "helion": 14, "lora_moe_base_gemm": 13,
        "helion_table": 9, "lora_csgmv": 7, "lora_plans": 6, "sp_collective": 4, "aiter_gemm": 3,
        "moe_front": 2, "mxfp8_gemv": 1, "minimax_moe": 1,
    }


def test_engine_of_every_main_table_matches_its_wheel(corpus_files):
    for path in corpus_files:
        meta = classify(path)
        if meta.family in ("fused_moe", "w8a8_gemm"):
            wheel = "sglang" if "sglang-0.5.23" in path.parts else "vllm"
            assert meta.engine == wheel, path


def test_sglang_down_block_shape_per_channel_and_empty_device():
    m = classify("configs/triton_3_4_0/E=384,N=128,device_name=,dtype=int4_w4a16_down.json")
    assert (m.family, m.E, m.N, m.device_name, m.dtype, m.down, m.triton_folder) == \
        ("fused_moe", 384, 128, "", "int4_w4a16", True, (3, 4, 0))
    m = classify("E=257,N=256,device_name=NVIDIA_H20,dtype=fp8_w8a8,block_shape=[128, 128]_down.json")
    assert m.block_shape == (128, 128) and m.block_shape_spaced and m.down and m.engine == "sglang"
    m = classify("E=128,N=352,device_name=NVIDIA_L40S,dtype=fp8_w8a8,per_channel_quant=True.json")
    assert m.per_channel_quant and m.engine == "sglang"


def test_vllm_triton_version_backend_and_gemm_names():
    m = classify("E=256,N=256,device_name=AMD_Instinct_MI355_OAM,dtype=int4_w4a16,backend=flydsl.json")
    assert m.backend == "flydsl" and m.engine == "vllm" and not m.is_triton_table
    m = classify("N=1536,K=1536,device_name=NVIDIA_L20,dtype=fp8_w8a8,block_shape=[128,128].json")
    assert (m.family, m.N, m.K, m.block_shape, m.engine) == ("w8a8_gemm", 1536, 1536, (128, 128), "vllm")
    m = classify("N=4096,K=4096,device_name=Intel(R)_Arc(TM)_Pro_B70_Graphics,dtype=fp8_w8a8,block_shape=[128, 128].json")
    assert m.device_name == "Intel(R)_Arc(TM)_Pro_B70_Graphics" and m.engine == "sglang"


def test_names_that_are_no_tuning_table():
    for name in ("package.json", "tsconfig.json", "config.json", "E=1.txt", "notes.json"):
        assert classify(name) is None, name


def test_grammar_problems_are_reported_not_raised():
    m = classify("E=8x,N=14336,device_name=NVIDIA_H100_80GB_HBM3,block_shape=[128].json")
    assert m.family == "fused_moe"
    assert any("E=" in p for p in m.problems) and any("block_shape" in p for p in m.problems)


def test_a_classified_name_is_the_dataclass_its_fields_build(corpus_files):
    """classify builds TableMeta from a dict of every field (build_frozen): equal, with the same
    hash and the same fields, to ``TableMeta(**fields)`` on every corpus file."""
    import dataclasses

    from tilefit.families import TableMeta

    for path in corpus_files:
        meta = classify(path)
        built = TableMeta(**{f.name: getattr(meta, f.name) for f in dataclasses.fields(TableMeta)})
        assert meta == built and hash(meta) == hash(built) and vars(meta) == vars(built), path


def test_the_engine_a_path_names():
    # a folder names it (sglang/, vllm-0.33.0/, any case) before the file name's own mark (a
    # leading sglang-/vllm- token)
    name = "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
    assert classify(f"x/SGLang/{name}").engine == "sglang"
    assert classify(f"vllm-0.33.0/x/{name}").engine == "vllm"
    assert classify(f"sglang-0.5.23/vllm/{name}").engine == "sglang"
    assert classify(f"x/{name}").engine is None
    assert classify(f"x/sglang-x,{name}").engine == "sglang"
    assert classify(f"x/Vllm-1,{name}").engine == "vllm"
    assert classify(f"vllm/sglang-x,{name}").engine == "sglang"
    assert classify(f"sglang/vllm-x,{name}").engine == "sglang"
