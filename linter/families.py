"""File-name grammars of the engines' tuning tables (see docs/engines.md of the research notes).

``classify(path)`` reads a file's name (and, where the name is ambiguous, its folder) and
returns a :class:`TableMeta`: which config family the file is, which engine writes and reads it,
and the metadata its name carries (E, N, K, device name, dtype, block shape, ...). It never
opens the file.

Families:

=====================  ==========================================================  =========
family                 grammar                                                     kernel
=====================  ==========================================================  =========
``fused_moe``          ``E=,N=,device_name=[,dtype=][,block_shape=][,per_channel_  Triton
                       quant=True][,backend=][_down].json``
``w8a8_gemm``          ``N=,K=,device_name=,dtype=[,block_shape=].json``           Triton
``mamba_ssu``          ``headdim=,dstate=,device_name=,cache_dtype=.json``         Triton
``lora_csgmv``         ``lora_shrink|lora_expand,K=,R=,S=,device=.json``           Triton
``lora_moe_base_gemm`` ``provider=,E=,N1=,N2=,K=,device_name=.json``               CuTe DSL
``sp_collective``      ``world=,H=,device_name=.json``                             CUDA
``moe_front``          ``epilogue|strategy,E=,topk=,device_name=.json``            CUDA
``aiter_gemm``         ``GEMM-A8W8_BLOCKSCALE_PRESHUFFLED-N=-K=.json``             Triton
``lora_plans``         ``default|sm90|sm100.plans.json``                           Triton
``helion``             ``helion/configs/<kernel>/<platform>.json``                 Helion
``helion_table``       loose ``causal_conv1d_*``/``update_sconv_cache_*`` tables   Helion
``mxfp8_gemv``         ``mxfp8_gemv_gfx95_configs.json``                           HIP/Triton
``minimax_moe``        ``minimax_*_moe.json``                                      Triton
=====================  ==========================================================  =========
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath

from . import kernels
from .model import build_frozen
from .serving import naming

# A comma starts a new pair only when an identifier and '=' follow (block_shape holds commas).
_PAIR_SPLIT = re.compile(r",(?=[A-Za-z_][A-Za-z0-9_]*=)")
_TRITON_FOLDER = re.compile(r"^triton_(\d+)_(\d+)_(\d+)$")
_AITER = re.compile(r"^(?P<tag>[A-Z0-9_]+(?:-[A-Z0-9_]+)*?)-N=(?P<N>\d+)-K=(?P<K>\d+)$")
_BLOCK_SHAPE = re.compile(r"^\[\s*(-?\d+)\s*,(\s*)(-?\d+)\s*\]$")
_INT = re.compile(r"^\d+$")

# Families whose entries are Triton launch configs of a kernel we model are the kernel registry's
# (tilefit.kernels.table_names(): each kernel family folder declares the config family that
# launches it and its file-name grammar). Families whose content is only schema-checked:
OTHER_FAMILIES = (
    "mamba_ssu", "lora_csgmv", "lora_moe_base_gemm", "sp_collective", "moe_front", "aiter_gemm",
    "lora_plans", "helion", "helion_table", "mxfp8_gemv", "minimax_moe",
)


@dataclass(frozen=True)
class TableMeta:
    """What a config file's name (and folder) says about it."""

    family: str
    stem: str  # the file name without ``.json`` (and without ``_down``)
    pairs: tuple[tuple[str, str], ...] = ()  # ordered key=value pairs of the name
    tag: str | None = None  # a leading token without '=' (lora_shrink, epilogue, ...)
    engine: str | None = None  # "sglang", "vllm" or None when both read this name
    engine_evidence: str | None = None
    E: int | None = None
    N: int | None = None
    K: int | None = None
    device_name: str | None = None  # None: the name has no device; "" : an empty device name
    dtype: str | None = None
    block_shape: tuple[int, int] | None = None
    block_shape_spaced: bool | None = None
    per_channel_quant: bool = False
    down: bool = False
    backend: str | None = None
    triton_folder: tuple[int, int, int] | None = None  # SGLang's configs/triton_X_Y_Z folder
    # the engine the folders name (sglang/, vllm-0.33.0/) where the name's marks point to the other
    # one (the name decides `engine`; NAME001 says when the folder's engine never loads the file)
    path_engine: str | None = None
    problems: tuple[str, ...] = field(default=())  # grammar defects found in the name

    @property
    def is_triton_table(self) -> bool:
        return self.backend is None and kernels.table(self.family) is not None

    def get(self, key: str) -> str | None:
        for k, v in self.pairs:
            if k == key:
                return v
        return None


def kernel_key(meta: "TableMeta") -> tuple:
    """What of a table's name decides its entries' kernels: family, dtype, block shape, per-channel
    quantisation, engine, ``_down`` and Triton folder (what the engine's, the variants' and the fix
    planner's memos key a table's kernel by)."""
    return (meta.family, meta.dtype, meta.block_shape, meta.per_channel_quant, meta.engine, meta.down,
            meta.triton_folder)


def has_down_tables(family: str | None) -> bool:
    """Whether the config family's names take the ``_down`` suffix (SGLang's down-GEMM tables)."""
    return bool(family) and bool(_grammar(family).get("down_suffix"))


def _grammar(family: str) -> dict:
    owner = kernels.table(family)
    return (owner.table.get("file_name") or {}) if owner is not None else {}


def _linted_family(tag: str | None, keys: list[str]) -> str | None:
    """The registered config family whose file-name grammar the name follows: its ``tag`` (a
    leading token without '='; grammars with one are tried first) or its leading keys, and the
    keys it requires."""
    global _LINTED
    registered = kernels.snapshot()
    if _LINTED[0] is not registered:  # a family registered or forgotten since: anew
        _LINTED = (registered, {})
    memo = _LINTED[1]
    key = (tag, tuple(keys))
    try:
        return memo[key]
    except KeyError:
        pass
    found = memo[key] = _find_linted_family(kernels.table_names(), tag, keys)
    return found


# (the registry's families mapping, {(tag, keys) -> config family}): a corpus's file names repeat a
# few key lists; the registry replaces its mapping whenever a family comes or goes
_LINTED: tuple[object, dict[tuple, str | None]] = (None, {})


def _find_linted_family(names: tuple, tag: str | None, keys: list[str]) -> str | None:
    for name in sorted(names, key=lambda n: _grammar(n).get("tag") is None):
        grammar = _grammar(name)
        lead = grammar.get("leading_keys") or []
        if grammar.get("tag") is not None and tag != grammar["tag"]:
            continue
        if keys[:len(lead)] == lead and all(k in keys for k in grammar.get("requires", ())):
            return name
    return None


def split_pairs(stem: str) -> tuple[str | None, list[tuple[str, str]]]:
    """Split ``a=1,b=[1, 2],c=x`` into pairs; a leading token without '=' is the tag."""
    tag = None
    pairs: list[tuple[str, str]] = []
    for token in _PAIR_SPLIT.split(stem):
        if "=" in token:
            key, value = token.split("=", 1)
            pairs.append((key, value))
        elif not pairs and tag is None:
            tag = token
        else:
            pairs.append((token, ""))
    return tag, pairs


def _parse_int(value: str | None, name: str, problems: list[str]) -> int | None:
    if value is None:
        return None
    if _INT.match(value):
        return int(value)
    problems.append(f"{name}={value!r} is not a non-negative integer")
    return None


def _parse_block_shape(value: str | None, problems: list[str]) -> tuple[tuple[int, int] | None, bool | None]:
    if value is None:
        return None, None
    m = _BLOCK_SHAPE.match(value)
    if not m:
        problems.append(f"block_shape={value!r} is not a list of two integers")
        return None, None
    return (int(m.group(1)), int(m.group(3))), bool(m.group(2))


def _triton_folder(parts: list[str]) -> tuple[int, int, int] | None:
    m = _TRITON_FOLDER.match(parts[-2]) if len(parts) > 1 else None
    return tuple(int(x) for x in m.groups()) if m else None  # type: ignore[return-value]


def _engine_from_path(parts_list: list[str]) -> str | None:
    """The engine the path's folders (or its file name) name: sglang/, vllm-0.33.0/, ..."""
    folder = "/".join(parts_list[:-1])
    marks = _FOLDER_ENGINES.get(folder)
    if marks is None:
        marks = _FOLDER_ENGINES[folder] = _engine_marks(parts_list[:-1])
    if marks[0]:
        return "sglang"
    # the file name's own mark (_engine_marks of the name alone: a name ending in .json is never
    # "sglang" or "vllm" itself), read only when the folders name no SGLang
    name = parts_list[-1].lower()
    if name.startswith("sglang-"):
        return "sglang"
    if marks[1] or name.startswith("vllm-"):
        return "vllm"
    return None


def _engine_marks(parts_list: list[str]) -> tuple[bool, bool]:
    parts = {p.lower() for p in parts_list}
    return ("sglang" in parts or any(p.startswith("sglang-") for p in parts),
            "vllm" in parts or any(p.startswith("vllm-") for p in parts))


# folder -> whether its parts name sglang, vllm: a corpus's files share a few hundred folders
_FOLDER_ENGINES: dict[str, tuple[bool, bool]] = {}


def classify(path: str | PurePath) -> TableMeta | None:
    """Classify a file by its name and folder; None for JSON files that are no tuning table."""
    # plain string splitting: PurePath costs more than the rest of classify (1000s of files)
    parts = str(path).replace("\\", "/").split("/")
    name = parts[-1]

    def parent(n: int) -> str:
        return parts[-1 - n] if len(parts) > n else ""

    if not name.endswith(".json"):
        return None
    stem = name[: -len(".json")]

    if stem == "mxfp8_gemv_gfx95_configs":
        return TableMeta("mxfp8_gemv", stem, engine="sglang", engine_evidence="file name")
    if stem.endswith(".plans"):
        return TableMeta("lora_plans", stem, tag=stem[: -len(".plans")], engine="sglang", engine_evidence="file name")
    if parent(2) == "configs" and parent(3) == "helion":
        return TableMeta("helion", stem, tag=parent(1), device_name=stem, engine="vllm",
                         engine_evidence="helion/configs folder")
    if stem.startswith(("causal_conv1d_", "update_sconv_cache_")):
        return TableMeta("helion_table", stem, engine="sglang", engine_evidence="file name")
    if stem.startswith("minimax_") and stem.endswith("_moe"):
        return TableMeta("minimax_moe", stem, engine="sglang", engine_evidence="file name")
    m = _AITER.match(stem)
    if m and "=" not in m.group("tag"):
        return TableMeta("aiter_gemm", stem, pairs=(("N", m["N"]), ("K", m["K"])), tag=m["tag"],
                         N=int(m["N"]), K=int(m["K"]), engine="sglang", engine_evidence="file name")
    if "=" not in stem:
        return None

    down = False
    body = stem
    if body.endswith("_down"):
        down = True
        body = body[: -len("_down")]
    tag, pairs = split_pairs(body)
    keys = [k for k, _ in pairs]
    values = dict(pairs)
    problems: list[str] = []
    folder = _triton_folder(parts)
    path_engine = _engine_from_path(parts)

    def dev(key: str = "device_name") -> str | None:
        return values.get(key)

    family = _linted_family(tag, keys)
    if family is not None:
        pass
    elif keys[:2] == ["headdim", "dstate"]:
        family = "mamba_ssu"
    elif tag in ("lora_shrink", "lora_expand") and "device" in keys:
        family = "lora_csgmv"
    elif keys[:1] == ["provider"]:
        family = "lora_moe_base_gemm"
    elif keys[:2] == ["world", "H"]:
        family = "sp_collective"
    elif tag in ("epilogue", "strategy") and "topk" in keys:
        family = "moe_front"
    else:
        return None

    if down and not _grammar(family).get("down_suffix"):
        # `_down` is glued to the last value of other families: keep it in the value.
        down = False
        tag, pairs = split_pairs(stem)
        values = dict(pairs)

    block_shape, spaced = _parse_block_shape(values.get("block_shape"), problems)
    per_channel = values.get("per_channel_quant")
    if per_channel is not None and per_channel != "True":
        problems.append(f"per_channel_quant={per_channel!r}: the engines only write True")
    dtype = values.get("dtype")

    # Which engine reads this name: the folder first, then marks only one engine writes.
    # (tilefit.serving.naming: the marks only one engine's profiles write)
    engine, evidence = naming.evidence(triton_folder=folder is not None, down=down,
                                       per_channel_quant=per_channel is not None,
                                       backend=values.get("backend") is not None, block_shape_spaced=spaced)
    if engine is None and path_engine is not None:
        engine, evidence = path_engine, "path"
    if family in ("mamba_ssu",):
        engine, evidence = "vllm", "file name"
    elif family in ("lora_csgmv", "lora_moe_base_gemm", "sp_collective", "moe_front"):
        engine, evidence = "sglang", "file name"

    # every field given: built from a dict in C (build_frozen), not through the frozen
    # dataclass's __init__ (a field at a time): discovery classifies every file of a corpus
    return build_frozen(TableMeta, {
        "family": family,
        "stem": stem if not down else stem[: -len("_down")],
        "pairs": tuple(pairs),
        "tag": tag,
        "engine": engine,
        "engine_evidence": evidence,
        "E": _parse_int(values.get("E"), "E", problems) if "E" in values else None,
        "N": _parse_int(values.get("N"), "N", problems) if "N" in values else None,
        "K": _parse_int(values.get("K"), "K", problems) if "K" in values else None,
        "device_name": dev("device") if family == "lora_csgmv" else dev(),
        "dtype": dtype,
        "block_shape": block_shape,
        "block_shape_spaced": spaced,
        "per_channel_quant": per_channel == "True",
        "down": down,
        "backend": values.get("backend"),
        "triton_folder": folder,
        "path_engine": path_engine if path_engine not in (None, engine) else None,
        "problems": tuple(problems),
    })
