"""JSON Schemas of the schema-checked config families (linter/data/schemas/<family>.schema.json).

1. Every schema is a valid draft 2020-12 schema.
2. Every real corpus file of each family (found with ``tilefit.families.classify``) validates.
3. Realistic mistakes, applied to real corpus files, are rejected at the place of the mistake.

The corpus comes from the ``corpus_files`` fixture of conftest.py.
"""

from __future__ import annotations

import copy
import functools
import json
from collections import defaultdict
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tilefit.families import OTHER_FAMILIES, classify

REPO = Path(__file__).resolve().parents[1]
SCHEMA_DIR = REPO / "linter" / "data" / "schemas"

# Files per family in the SGLang 0.5.23 + vLLM 0.33.0 corpus (engines.md 1.4 of the research notes).
EXPECTED_COUNTS = {
    "mamba_ssu": 34,
    "lora_csgmv": 7,
    "lora_moe_base_gemm": 13,
    "sp_collective": 4,
    "moe_front": 2,
    "aiter_gemm": 3,
    "lora_plans": 6,
    "helion": 14,
    "helion_table": 9,
    "mxfp8_gemv": 1,
    "minimax_moe": 1,
}


@pytest.fixture(scope="session")
def family_files(corpus_files) -> dict[str, tuple[Path, ...]]:
    found: dict[str, list[Path]] = defaultdict(list)
    for path in corpus_files:
        meta = classify(path)
        if meta is not None and meta.family in OTHER_FAMILIES:
            found[meta.family].append(path)
    return {family: tuple(sorted(paths)) for family, paths in found.items()}


@functools.lru_cache(maxsize=None)
def validator(family: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{family}.schema.json").read_text())
    return Draft202012Validator(schema)


@functools.lru_cache(maxsize=None)
def _load(path: Path):
    return json.loads(path.read_text())


def _corpus_path(family_files, family: str, name_part: str) -> Path:
    """The first corpus file of `family` whose path contains `name_part`."""
    paths = [p for p in family_files.get(family, ()) if name_part in str(p)]
    assert paths, f"no {family} corpus file matching {name_part!r}"
    return paths[0]


@functools.lru_cache(maxsize=None)
def _is_valid(family: str, path: Path) -> bool:
    return validator(family).is_valid(_load(path))


def _all_errors(errors):
    for error in errors:
        yield error
        yield from _all_errors(error.context or ())


# ---------------------------------------------------------------------------------------------
# 1. The schemas themselves


def test_every_family_has_a_schema():
    missing = [f for f in OTHER_FAMILIES if not (SCHEMA_DIR / f"{f}.schema.json").is_file()]
    assert not missing


@pytest.mark.parametrize("path", sorted(SCHEMA_DIR.glob("*.schema.json")), ids=lambda p: p.name)
def test_schema_is_valid_draft_2020_12(path):
    schema = json.loads(path.read_text())
    assert schema.get("$schema") == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)
    assert schema.get("description"), "every schema says what it covers"


# ---------------------------------------------------------------------------------------------
# 2. The whole corpus validates


@pytest.mark.parametrize("family", OTHER_FAMILIES)
def test_corpus_files_validate(family, family_files):
    paths = family_files.get(family, ())
    assert len(paths) == EXPECTED_COUNTS[family]
    failures = []
    for path in paths:
        for error in validator(family).iter_errors(_load(path)):
            failures.append(f"{path.name}: {list(error.absolute_path)}: {error.message[:160]}")
    assert not failures, "\n".join(failures[:20])


# ---------------------------------------------------------------------------------------------
# 3. Realistic mistakes are rejected
#
# Each mutation edits a real corpus document in place and returns the JSON location (list of
# keys / indices) it broke. The test checks that the original is valid, the mutation changed
# something, and that an error is reported at that location or at its parent object (where
# 'required', 'propertyNames' and conditional rules report).


def _batch_key(obj: dict) -> str:
    return next(k for k in obj if k.isdigit())


def _parent(doc, path):
    for part in path[:-1]:
        doc = doc[part]
    return doc


def _set(loc, value):
    def mutate(doc):
        path = loc(doc)
        _parent(doc, path)[path[-1]] = copy.deepcopy(value)
        return path
    return mutate


def _drop(loc):
    def mutate(doc):
        path = loc(doc)
        del _parent(doc, path)[path[-1]]
        return path
    return mutate


def _rename(loc, new_key):
    """Replace the key at loc by new_key (keeping the value); the error sits on the parent object."""
    def mutate(doc):
        path = loc(doc)
        parent = _parent(doc, path)
        parent[new_key] = parent.pop(path[-1])
        return [*path[:-1], new_key]
    return mutate


def _entry(doc):
    return [_batch_key(doc)]


def _in_entry(key):
    return lambda doc: [_batch_key(doc), key]


def _moe_sites(doc):
    return ["scenarios", 0, "tiles", 0, "sites"]


DENSE = "dense/configs/default"  # 18 rows; row 2 is an all_slots row
MOE = "moe/configs/sm90"
HELION_FILE = "dynamic_per_token_scaled_fp8_quant/nvidia_b200"  # 42 entries: keeps the test fast
RS16 = ["configs", "reduce_scatter", "16"]
AG16 = ["configs", "all_gather", "16"]


def _front(key=None):
    """The first entry of a moe_front table (or one of its keys)."""
    return lambda d: ["configs", _batch_key(d["configs"])] + ([key] if key else [])


def _helion_cfg(key):
    return lambda doc: [0, "config", key]


MUTATIONS = [
    # mamba_ssu
    ("mamba_ssu", "", "wrong type", _set(_in_entry("BLOCK_SIZE_M"), "16")),
    ("mamba_ssu", "", "missing num_warps", _drop(_in_entry("num_warps"))),
    ("mamba_ssu", "", "non-integer batch key", _rename(_entry, "16.5")),
    ("mamba_ssu", "", "bad num_warps", _set(_in_entry("num_warps"), 3)),
    ("mamba_ssu", "", "BLOCK_SIZE_M not a power of two", _set(_in_entry("BLOCK_SIZE_M"), 48)),
    # lora_csgmv
    ("lora_csgmv", "lora_expand", "wrong type", _set(_in_entry("BLOCK_K"), "64")),
    ("lora_csgmv", "lora_expand", "missing BLOCK_N", _drop(_in_entry("BLOCK_N"))),
    ("lora_csgmv", "lora_expand", "non-integer chunk key", _rename(_entry, "chunk16")),
    ("lora_csgmv", "lora_expand", "bad num_warps", _set(_in_entry("num_warps"), 6)),
    ("lora_csgmv", "lora_expand", "BLOCK_K below tl.dot minimum", _set(_in_entry("BLOCK_K"), 8)),
    ("lora_csgmv", "lora_expand", "negative num_stages", _set(_in_entry("num_stages"), -1)),
    # lora_moe_base_gemm
    ("lora_moe_base_gemm", "", "wrong type", _set(lambda d: ["buckets", _batch_key(d["buckets"]), "token_width"], "64")),
    ("lora_moe_base_gemm", "", "missing buckets", _drop(lambda d: ["buckets"])),
    ("lora_moe_base_gemm", "", "non-integer bucket key", _rename(lambda d: ["buckets", _batch_key(d["buckets"])], "M16")),
    ("lora_moe_base_gemm", "", "token_width not a power of two", _set(lambda d: ["tiles", 0, "token_width"], 48)),
    ("lora_moe_base_gemm", "", "zero persistent_clusters", _set(lambda d: ["tiles", 0, "persistent_clusters"], 0)),
    ("lora_moe_base_gemm", "", "unknown field", _set(lambda d: ["num_warps"], 4)),
    ("lora_moe_base_gemm", "", "non-string version", _set(lambda d: ["version", "cutedsl"], 4.6)),
    # sp_collective
    ("sp_collective", "GB300", "wrong type", _set(lambda d: [*RS16, "block_size"], "512")),
    ("sp_collective", "GB300", "missing num_blocks", _drop(lambda d: [*RS16, "num_blocks"])),
    ("sp_collective", "GB300", "non-integer bucket key", _rename(lambda d: AG16, "16k")),
    ("sp_collective", "GB300", "push block_size above 512", _set(lambda d: [*RS16, "block_size"], 1024)),
    ("sp_collective", "GB300", "block_size not a warp multiple", _set(lambda d: [*AG16, "block_size"], 200)),
    ("sp_collective", "GB300", "strategy of the other kind", _set(lambda d: [*RS16, "strategy"], "direct")),
    ("sp_collective", "GB300", "misspelt kind", _rename(lambda d: ["configs", "all_gather"], "allgather")),
    # moe_front
    ("moe_front", "epilogue", "wrong type", _set(_front("cast_first"), "false")),
    ("moe_front", "epilogue", "missing cast_vec", _drop(_front("cast_vec"))),
    ("moe_front", "epilogue", "non-integer token key", _rename(_front(), "1.5")),
    ("moe_front", "epilogue", "unsupported block_size", _set(_front("block_size"), 256)),
    ("moe_front", "epilogue", "unsupported cast_vec", _set(_front("cast_vec"), 16)),
    ("moe_front", "strategy", "unknown strategy", _set(_front(), "merged")),
    ("moe_front", "strategy", "missing configs", _drop(lambda d: ["configs"])),
    # aiter_gemm
    ("aiter_gemm", "", "wrong type", _set(lambda d: ["any", "BLOCK_SIZE_M"], "64")),
    ("aiter_gemm", "", "missing NUM_KSPLIT", _drop(lambda d: ["M_LEQ_8", "NUM_KSPLIT"])),
    ("aiter_gemm", "", "bad bucket name", _rename(lambda d: ["M_LEQ_16"], "M_LE_16")),
    ("aiter_gemm", "", "bad num_warps", _set(lambda d: ["M_LEQ_64", "num_warps"], 3)),
    ("aiter_gemm", "", "num_warps above the AMD limit", _set(lambda d: ["M_LEQ_64", "num_warps"], 32)),
    ("aiter_gemm", "", "unknown launch key", _set(lambda d: ["M_LEQ_4", "SPLIT_K"], 2)),
    ("aiter_gemm", "", "missing any", _drop(lambda d: ["any"])),
    ("aiter_gemm", "", "BLOCK_SIZE_N not a power of two", _set(lambda d: ["any", "BLOCK_SIZE_N"], 48)),
    # lora_plans (dense)
    ("lora_plans", DENSE, "wrong type", _set(lambda d: ["rows", 0, "max_tokens"], "32")),
    ("lora_plans", DENSE, "missing num_stages", _drop(lambda d: ["rows", 0, "spec", "a_tiles", "num_stages"])),
    ("lora_plans", DENSE, "bad num_warps", _set(lambda d: ["rows", 0, "spec", "b_tiles", "num_warps"], 3)),
    ("lora_plans", DENSE, "block_size below 16", _set(lambda d: ["rows", 0, "spec", "block_size"], 8)),
    ("lora_plans", DENSE, "unknown b_tiles key", _set(lambda d: ["rows", 0, "spec", "b_tiles", "SPLIT_K"], 2)),
    ("lora_plans", DENSE, "unknown SPLIT_MODE", _set(lambda d: ["rows", 0, "spec", "a_tiles", "SPLIT_MODE"], "parallel")),
    ("lora_plans", DENSE, "all_slots A with grouped B", _set(lambda d: ["rows", 2, "spec", "b_family"], "grouped")),
    ("lora_plans", DENSE, "grouped A tile below 16", _set(lambda d: ["rows", 0, "spec", "a_tiles", "BLOCK_SIZE_N"], 8)),
    ("lora_plans", DENSE, "unknown row field", _set(lambda d: ["rows", 0, "max_batch"], 8)),
    # lora_plans (MoE)
    ("lora_plans", MOE, "wrong type (MoE)", _set(lambda d: [*_moe_sites(d), "gate_up_a", "BLOCK_SIZE_K"], "128")),
    ("lora_plans", MOE, "missing base_gemm_rows (MoE)", _drop(lambda d: ["scenarios", 0, "base_gemm_rows"])),
    ("lora_plans", MOE, "bad num_warps (MoE)", _set(lambda d: [*_moe_sites(d), "down_b", "num_warps"], 3)),
    ("lora_plans", MOE, "routing_block_size below 16 (MoE)", _set(lambda d: [*_moe_sites(d), "routing_block_size"], 8)),
    ("lora_plans", MOE, "unknown site (MoE)", _set(lambda d: [*_moe_sites(d), "gate_up_c"], {})),
    ("lora_plans", MOE, "empty tile ladder (MoE)", _set(lambda d: ["scenarios", 0, "tiles"], [])),
    ("lora_plans", MOE, "missing fallback (MoE)", _drop(lambda d: ["fallback"])),
    ("lora_plans", MOE, "gate_up_a_b overlap without standalone B (MoE)",
     _set(lambda d: ["scenarios", 0, "plan", "act_family"], "b_activation")),
    ("lora_plans", MOE, "B row tile differs from routing_block_size (MoE)",
     _set(lambda d: [*_moe_sites(d), "gate_up_b", "BLOCK_SIZE_M"], 32)),
    ("lora_plans", MOE, "grouped A site without GROUP_SIZE_M (MoE)",
     _drop(lambda d: [*_moe_sites(d), "gate_up_a", "GROUP_SIZE_M"])),
    ("lora_plans", MOE, "zero num_stages (MoE)", _set(lambda d: [*_moe_sites(d), "gate_up_b", "num_stages"], 0)),
    # helion (vLLM)
    ("helion", HELION_FILE, "wrong type", _set(_helion_cfg("num_stages"), "3")),
    ("helion", HELION_FILE, "missing block_sizes", _drop(_helion_cfg("block_sizes"))),
    ("helion", HELION_FILE, "bad num_warps", _set(_helion_cfg("num_warps"), 12)),
    ("helion", HELION_FILE, "block size not a power of two", _set(lambda d: [0, "config", "block_sizes", 0], 48)),
    ("helion", HELION_FILE, "unknown pid_type", _set(_helion_cfg("pid_type"), "grid")),
    ("helion", HELION_FILE, "string problem size", _set(lambda d: [0, "key", "num_tokens"], "256")),
    ("helion", HELION_FILE, "missing config", _drop(lambda d: [0, "config"])),
    # helion_table (SGLang loose Helion tables)
    ("helion_table", "update_sconv_cache_sm_90", "wrong type", _set(lambda d: ["hash_configs", next(iter(d["hash_configs"]))], "1")),
    ("helion_table", "update_sconv_cache_sm_90", "missing hash_configs", _drop(lambda d: ["hash_configs"])),
    ("helion_table", "update_sconv_cache_sm_90", "non-integer config index", _rename(lambda d: ["useful_configs", "1"], "one")),
    ("helion_table", "update_sconv_cache_sm_90", "parsed config instead of repr string",
     _set(lambda d: ["useful_configs", "1"], {"num_warps": 4})),
    # mxfp8_gemv
    ("mxfp8_gemv", "", "wrong type", _set(lambda d: ["configs", "gfx950:1152:5120:1"], 16)),
    ("mxfp8_gemv", "", "missing large_m", _drop(lambda d: ["large_m"])),
    ("mxfp8_gemv", "", "unknown M bucket", _rename(lambda d: ["configs", "gfx950:1152:5120:1"], "gfx950:1152:5120:3")),
    ("mxfp8_gemv", "", "bad waves", _set(lambda d: ["configs", "gfx950:1152:5120:1"], "w6s1r16t16k")),
    ("mxfp8_gemv", "", "bucket 32 with 16 tokens", _set(lambda d: ["configs", "gfx950:1152:5120:32"], "w8s1r16t16k")),
    ("mxfp8_gemv", "", "bad num_warps in large_m", _set(lambda d: ["large_m", "gfx950:1152:5120:64"], "64,64,256,3,5")),
    ("mxfp8_gemv", "", "split_k missing in large_m", _set(lambda d: ["large_m", "gfx950:1152:5120:64"], "64,64,256,4")),
    # minimax_moe
    ("minimax_moe", "", "wrong type", _set(lambda d: ["tokens", "1", "best_gemm1", "block_m"], "64")),
    ("minimax_moe", "", "missing best_gemm2", _drop(lambda d: ["tokens", "1", "best_gemm2"])),
    ("minimax_moe", "", "non-integer token key", _rename(lambda d: ["tokens", "1"], "one")),
    ("minimax_moe", "", "bad num_warps", _set(lambda d: ["tokens", "1", "best_gemm2", "num_warps"], 3)),
    ("minimax_moe", "", "negative num_stages", _set(lambda d: ["tokens", "1", "best_gemm1", "num_stages"], -1)),
]


def test_every_family_has_mutations():
    per_family = defaultdict(set)
    for family, _, name, _ in MUTATIONS:
        per_family[family].add(name)
    for family in OTHER_FAMILIES:
        assert "wrong type" in per_family[family], family
        assert len(per_family[family]) >= 4, family


@pytest.mark.parametrize(
    "family,name_part,what,mutate", MUTATIONS, ids=[f"{m[0]}-{m[2].replace(' ', '_')}" for m in MUTATIONS]
)
def test_mutation_is_rejected(family, name_part, what, mutate, family_files):
    path = _corpus_path(family_files, family, name_part)
    assert _is_valid(family, path), "the unmodified corpus file must be valid"
    doc = copy.deepcopy(_load(path))
    check = validator(family)
    before = json.dumps(doc, sort_keys=True)
    location = mutate(doc)
    assert json.dumps(doc, sort_keys=True) != before, "mutation changed nothing"
    errors = list(_all_errors(check.iter_errors(doc)))
    assert errors, f"{what}: mutated document still validates"
    places = {tuple(e.absolute_path) for e in errors}
    wanted = {tuple(location), tuple(location[:-1])}
    assert places & wanted, f"{what}: errors at {sorted(places)}, expected one at {location}"
