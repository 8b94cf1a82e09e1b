"""A model's shape, read from a local ``config.json`` (never downloaded) or given on the command line.

What the doctor needs from a model:

* the MoE layer: routed experts, shared experts, experts per token, the expert intermediate
  size (``N`` before tensor parallelism) and the hidden size (``K`` of the gate/up GEMM);
* quantisation: the dtype path of the Triton kernels (``fp8_w8a8``, ``int8_w8a8``,
  ``int8_w8a16``, ``int4_w4a16`` or 16-bit), the scale granularity (per-tensor, per-channel,
  block ``[bn, bk]``, group size) and the checkpoint's quantisation method;
* dense projections (for block-quantised checkpoints, whose dense GEMMs run the block-GEMM kernel);
* MLA dimensions (``kv_lora_rank``, ``qk_rope_head_dim``) and the KV-cache dtype.

Hugging Face spells these differently per family; :data:`KEYS` lists the spellings tried, in
order. Multimodal configs keep the language model under ``text_config`` (gemma-4, Qwen3-VL-MoE,
Llama 4, Kimi-VL), ``language_config`` or ``llm_config``; the quantisation config may sit at
either level. Folder inputs also read ModelOpt's ``hf_quant_config.json`` and AutoGPTQ/AutoAWQ's
``quantize_config.json`` / ``quant_config.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from tilefit import dtypes


class ModelConfigError(ValueError):
    """The model folder or config file is missing or unusable (exit code 2)."""


# Spellings tried in order for each field.
KEYS: Mapping[str, tuple[str, ...]] = {
    "num_experts": ("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts", "n_experts"),
    "top_k": ("num_experts_per_tok", "top_k_experts", "moe_top_k", "num_experts_per_token", "top_k"),
    "moe_intermediate_size": ("moe_intermediate_size", "expert_hidden_dim", "expert_intermediate_size"),
    "n_shared_experts": ("n_shared_experts", "num_shared_experts"),
    "shared_expert_intermediate_size": ("shared_expert_intermediate_size",),
    "hidden_size": ("hidden_size", "d_model", "n_embd", "dim"),
    "intermediate_size": ("intermediate_size_mlp", "intermediate_size", "ffn_hidden_size"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads"),
    "num_key_value_heads": ("num_key_value_heads", "num_kv_heads", "n_kv_heads"),
    "head_dim": ("head_dim",),
    "kv_lora_rank": ("kv_lora_rank",),
    "q_lora_rank": ("q_lora_rank",),
    "qk_rope_head_dim": ("qk_rope_head_dim",),
    "qk_nope_head_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
}
NESTED = ("text_config", "language_config", "llm_config")



@dataclass(frozen=True)
class Quant:
    """Quantisation of the MoE experts (and, for block fp8, the dense layers)."""

    dtype: str = "bf16"  # dtype path: fp8_w8a8, int8_w8a8, int8_w8a16, int4_w4a16, bf16, fp16, fp32
    scheme: str = "none"  # none, per_tensor, per_channel, block, group
    block_shape: tuple[int, int] | None = None  # (bn, bk) for block; (0, group) for group
    method: str | None = None  # the checkpoint's quant_method (fp8, compressed-tensors, gptq, awq, ...)
    weight_only: bool = False
    unsupported: str | None = None  # why the Triton MoE/GEMM tables do not apply (nvfp4, mxfp4, ...)

    @property
    def is_quantised(self) -> bool:
        return self.dtype not in dtypes.UNQUANTISED

    @property
    def block(self) -> tuple[int, int] | None:
        return self.block_shape if self.scheme == "block" else None

    @property
    def group_size(self) -> int | None:
        return self.block_shape[1] if self.scheme == "group" and self.block_shape else None

    def describe(self) -> str:
        if self.unsupported:
            return f"{self.method or 'quantised'} ({self.unsupported})"
        if not self.is_quantised:
            return f"{self.dtype} (unquantised)"
        extra = {"per_tensor": "per-tensor scales", "per_channel": "per-channel scales",
                 "block": f"block-wise {self.block_shape[0]}x{self.block_shape[1]}" if self.block_shape else "block",
                 "group": f"group size {self.group_size}", "none": ""}[self.scheme]
        via = f", {self.method}" if self.method else ""
        return f"{self.dtype} ({extra}{via})" if extra else f"{self.dtype}{via}"


@dataclass(frozen=True)
class ModelShape:
    """The sizes of one model, before tensor/expert parallelism divides them."""

    source: str
    architecture: str | None = None
    model_type: str | None = None
    hidden_size: int | None = None
    num_experts: int | None = None  # routed experts
    n_shared_experts: int = 0
    top_k: int | None = None
    moe_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None
    intermediate_size: int | None = None  # dense MLP layers
    has_dense_layers: bool = False
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    activation_dtype: str = "bf16"
    quant: Quant = field(default_factory=Quant)
    kv_cache_dtype: str | None = None  # from the checkpoint (kv_cache_scheme ...): "fp8e4nv" or None
    notes: tuple[str, ...] = ()

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts and self.moe_intermediate_size and self.hidden_size)

    @property
    def is_mla(self) -> bool:
        return bool(self.kv_lora_rank and self.qk_rope_head_dim is not None)

    def to_json(self) -> dict:
        out = asdict(self)
        out["quant"] = asdict(self.quant)
        return out

    def with_(self, **changes) -> "ModelShape":
        return replace(self, **changes)


# --------------------------------------------------------------------------------------------
# reading files


def _read_json(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ModelConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ModelConfigError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def _first(cfg: Mapping, names: tuple[str, ...]) -> Any:
    for name in names:
        if name in cfg and cfg[name] is not None:
            return cfg[name]
    return None


def _int(value: Any, what: str, source: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ModelConfigError(f"{source}: {what} is {value!r}, expected an integer")
    return value


def _language_config(cfg: Mapping) -> Mapping:
    for key in NESTED:
        sub = cfg.get(key)
        if isinstance(sub, Mapping) and ("hidden_size" in sub or any(k in sub for k in KEYS["num_experts"])):
            return sub
    return cfg


def load_model_config(path: str | Path) -> ModelShape:
    """Read a model folder (its ``config.json`` and quantisation side files) or a config file."""
    p = Path(path)
    side: dict[str, dict] = {}
    if p.is_dir():
        config_path = p / "config.json"
        if not config_path.is_file():
            raise ModelConfigError(f"{p}: no config.json in this folder (doctor reads local files only)")
        for name in ("hf_quant_config.json", "quantize_config.json", "quant_config.json"):
            if (p / name).is_file():
                side[name] = _read_json(p / name)
    elif p.exists():
        config_path = p
    else:
        raise ModelConfigError(f"{p}: no such file or folder (doctor never downloads; give a local folder or config.json)")
    cfg = _read_json(config_path)
    return shape_from_config(cfg, str(config_path), side)


def shape_from_config(cfg: Mapping, source: str = "<config>", side: Mapping[str, Mapping] | None = None) -> ModelShape:
    side = side or {}
    lang = _language_config(cfg)
    archs = cfg.get("architectures") or lang.get("architectures") or []
    architecture = archs[0] if isinstance(archs, list) and archs else None
    model_type = cfg.get("model_type") or lang.get("model_type")

    def get(name: str) -> int | None:
        value = _first(lang, KEYS[name])
        if value is None and lang is not cfg:
            value = _first(cfg, KEYS[name])
        return _int(value, name, source)

    notes: list[str] = []
    hidden = get("hidden_size")
    experts = get("num_experts")
    top_k = get("top_k")
    moe_inter = get("moe_intermediate_size")
    inter = get("intermediate_size")
    ffn = lang.get("ffn_config") if isinstance(lang.get("ffn_config"), Mapping) else None
    if ffn is not None:  # DBRX
        experts = experts or _int(ffn.get("moe_num_experts"), "ffn_config.moe_num_experts", source)
        top_k = top_k or _int(ffn.get("moe_top_k"), "ffn_config.moe_top_k", source)
        moe_inter = moe_inter or _int(ffn.get("ffn_hidden_size"), "ffn_config.ffn_hidden_size", source)
    if experts and not moe_inter:
        # Mixtral / Llama 4 / Grok spell the expert size intermediate_size.
        moe_inter = _int(lang.get("intermediate_size"), "intermediate_size", source)
        if moe_inter:
            notes.append("expert intermediate size read from intermediate_size (Mixtral-style config)")
    if experts is not None and experts <= 1:
        experts = None

    shared = get("n_shared_experts") or 0
    shared_inter = get("shared_expert_intermediate_size")
    first_dense = _int(lang.get("first_k_dense_replace"), "first_k_dense_replace", source) or 0
    mlp_only = lang.get("mlp_only_layers") or []
    sparse_step = _int(lang.get("decoder_sparse_step"), "decoder_sparse_step", source) or 1
    has_dense = bool(experts) and (first_dense > 0 or bool(mlp_only) or sparse_step > 1)
    if not experts:
        has_dense = True
    if "intermediate_size_mlp" in lang:  # Llama 4: dense layers interleaved
        has_dense = True

    heads = get("num_attention_heads")
    kv_heads = get("num_key_value_heads") or heads
    head_dim = get("head_dim")
    if head_dim is None and heads and hidden:
        head_dim = hidden // heads

    torch_dtype = cfg.get("torch_dtype") or cfg.get("dtype") or lang.get("torch_dtype") or lang.get("dtype") or "bfloat16"
    act = dtypes.activation_path(str(torch_dtype))

    qcfg = cfg.get("quantization_config") or cfg.get("compression_config") or lang.get("quantization_config")
    quant, kv = parse_quant(qcfg, side, act, source)
    if quant.dtype == "fp32":
        act = "fp32"

    return ModelShape(
        source=source, architecture=architecture, model_type=model_type, hidden_size=hidden,
        num_experts=experts, n_shared_experts=shared, top_k=top_k, moe_intermediate_size=moe_inter,
        shared_expert_intermediate_size=shared_inter, intermediate_size=inter, has_dense_layers=has_dense,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
        q_lora_rank=get("q_lora_rank"), kv_lora_rank=get("kv_lora_rank"),
        qk_rope_head_dim=get("qk_rope_head_dim"), qk_nope_head_dim=get("qk_nope_head_dim"),
        v_head_dim=get("v_head_dim"), activation_dtype=act, quant=quant, kv_cache_dtype=kv, notes=tuple(notes),
    )


def _block(value: Any, source: str) -> tuple[int, int]:
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)):
        return int(value[0]), int(value[1])
    raise ModelConfigError(f"{source}: weight_block_size {value!r} is not two positive integers")


def _kv_scheme(scheme: Any) -> str | None:
    if isinstance(scheme, Mapping) and scheme.get("num_bits") == 8 and scheme.get("type") == "float":
        return "fp8e4nv"
    return None


def parse_quant(qcfg: Any, side: Mapping[str, Mapping], act: str, source: str) -> tuple[Quant, str | None]:
    """(expert quantisation, KV-cache dtype from the checkpoint or None)."""
    kv = None
    hf_quant = side.get("hf_quant_config.json")
    if qcfg is None and hf_quant:
        q = hf_quant.get("quantization", hf_quant)
        qcfg = {"quant_method": "modelopt", **q}
    if qcfg is None:
        legacy = side.get("quantize_config.json") or side.get("quant_config.json")
        if legacy:
            method = "awq" if ("w_bit" in legacy or "q_group_size" in legacy or legacy.get("quant_method") == "awq") else "gptq"
            qcfg = {"quant_method": method, **legacy}
    if qcfg is None:
        return Quant(dtype=act), None
    if not isinstance(qcfg, Mapping):
        raise ModelConfigError(f"{source}: quantization_config is not an object")
    method = str(qcfg.get("quant_method") or qcfg.get("quant_algo") or "").lower()

    if method == "fp8":
        wbs = qcfg.get("weight_block_size")
        if wbs is not None:
            return Quant("fp8_w8a8", "block", _block(wbs, source), method), kv
        return Quant("fp8_w8a8", "per_tensor", None, method), kv
    if method in ("w8a8_fp8",):
        return Quant("fp8_w8a8", "per_channel", None, method), kv
    if method in ("w8a8_int8",):
        return Quant("int8_w8a8", "per_channel", None, method), kv
    if method in ("gptq", "awq", "gptq_marlin", "awq_marlin", "moe_wna16", "auto-round", "autoround"):
        bits = qcfg.get("bits", qcfg.get("w_bit"))
        group = qcfg.get("group_size", qcfg.get("q_group_size", 128))
        if bits not in (4, 8):
            return Quant(act, method=method, unsupported=f"{bits}-bit weights"), kv
        if not isinstance(group, int) or group <= 0:
            group = 128  # -1 (per channel): the wNa16 kernel treats it as one group per row
        dtype = "int4_w4a16" if bits == 4 else "int8_w8a16"
        return Quant(dtype, "group", (0, group), method, weight_only=True), kv
    if method == "compressed-tensors":
        kv = _kv_scheme(qcfg.get("kv_cache_scheme"))
        groups = qcfg.get("config_groups") or {}
        first = next(iter(groups.values()), {}) if isinstance(groups, Mapping) else {}
        w = first.get("weights") or {}
        a = first.get("input_activations")
        bits, wtype, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
        fmt = str(qcfg.get("format") or first.get("format") or "")
        if "nvfp4" in fmt or (bits == 4 and wtype == "float"):
            return Quant(act, method=method, unsupported="FP4 weights (CUTLASS/FlashInfer MoE, no Triton table)"), kv
        if bits == 8 and wtype == "float":
            if not a:
                return Quant(act, method=method, weight_only=True,
                             unsupported="fp8 weight-only (Marlin fp8 MoE, no Triton table)"), kv
            if strategy == "block":
                return Quant("fp8_w8a8", "block", _block(w.get("block_structure"), source), method), kv
            return Quant("fp8_w8a8", "per_channel" if strategy == "channel" else "per_tensor", None, method), kv
        if wtype == "int" and bits == 8 and a and a.get("num_bits") == 8:
            return Quant("int8_w8a8", "per_channel" if strategy == "channel" else "per_tensor", None, method), kv
        if wtype == "int" and bits in (4, 8) and not a:
            group = w.get("group_size") or 128
            return Quant("int4_w4a16" if bits == 4 else "int8_w8a16", "group", (0, int(group)), method,
                         weight_only=True), kv
        return Quant(act, method=method, unsupported=f"compressed-tensors scheme {w!r}"), kv
    if method == "modelopt":
        algo = str(qcfg.get("quant_algo") or "").upper()
        kv_algo = str(qcfg.get("kv_cache_quant_algo") or "").upper()
        kv = "fp8e4nv" if kv_algo == "FP8" else None
        if algo == "FP8":
            return Quant("fp8_w8a8", "per_tensor", None, "modelopt"), kv
        if algo in ("FP8_PB_WO", "FP8_BLOCK"):
            return Quant("fp8_w8a8", "block", (128, 128), "modelopt"), kv
        return Quant(act, method="modelopt", unsupported=f"ModelOpt {algo or 'unknown'} (no Triton table)"), kv
    if method in ("mxfp4", "bitsandbytes", "gguf", "quark", "nvfp4", "w4afp8", "mxfp8", "petit_nvfp4", "fbgemm_fp8"):
        return Quant(act, method=method, unsupported=f"{method} experts (not the Triton fused-MoE table)"), kv
    if not method:
        return Quant(act), kv
    return Quant(act, method=method, unsupported=f"unknown quant_method {method!r}"), kv


# --------------------------------------------------------------------------------------------
# --shape / --dtype


_SHAPE_KEYS = {
    "E": "num_experts", "experts": "num_experts", "N": "moe_intermediate_size", "K": "hidden_size",
    "hidden": "hidden_size", "topk": "top_k", "top_k": "top_k", "shared": "n_shared_experts",
    "kv_lora_rank": "kv_lora_rank", "qk_rope_head_dim": "qk_rope_head_dim", "rope": "qk_rope_head_dim",
    "heads": "num_attention_heads", "kv_heads": "num_key_value_heads", "head_dim": "head_dim",
    "q_lora_rank": "q_lora_rank", "qk_nope_head_dim": "qk_nope_head_dim", "v_head_dim": "v_head_dim",
    "intermediate": "intermediate_size",
}


def parse_shape(text: str, base: ModelShape | None = None) -> ModelShape:
    """``E=128,N=768,K=2048,topk=8[,shared=1][,kv_lora_rank=512,qk_rope_head_dim=64,heads=16]``."""
    values: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _SHAPE_KEYS:
            raise ModelConfigError(f"--shape: {part!r} is not KEY=VALUE with KEY one of {', '.join(sorted(_SHAPE_KEYS))}")
        try:
            number = int(value)
        except ValueError:
            raise ModelConfigError(f"--shape: {key}={value!r} is not an integer") from None
        if number < 0:
            raise ModelConfigError(f"--shape: {key}={number} is negative")
        values[_SHAPE_KEYS[key]] = number
    shape = base or ModelShape(source="--shape")
    shape = replace(shape, **values)
    if shape.num_experts and shape.top_k is None:
        raise ModelConfigError("--shape: topk=... is needed with E=...")
    if shape.num_attention_heads and shape.num_key_value_heads is None:
        shape = replace(shape, num_key_value_heads=shape.num_attention_heads)
    return shape


_DTYPE_RE = re.compile(r"^(?P<dtype>[a-z0-9_]+)(?::(?P<qual>.+))?$")


def parse_dtype(text: str, activation: str = "bf16") -> Quant:
    """``fp8_w8a8`` (per-tensor), ``fp8_w8a8:block=128x128``, ``fp8_w8a8:per_channel``,
    ``int4_w4a16:group=128``, ``int8_w8a8[:per_channel]``, ``bf16``, ``fp16``."""
    m = _DTYPE_RE.match(text.strip().lower())
    aliases = {**dtypes.PATH_ALIASES, "none": activation, "auto": activation}
    if not m:
        raise ModelConfigError(f"--dtype: cannot read {text!r}")
    dtype = aliases.get(m["dtype"], m["dtype"])
    if dtype not in dtypes.PATHS:
        known = dtypes.QUANTISED + dtypes.UNQUANTISED
        raise ModelConfigError(f"--dtype: unknown dtype {m['dtype']!r}; choose from {', '.join(known)}")
    qual = m["qual"] or ""
    if dtype in dtypes.UNQUANTISED:
        if qual:
            raise ModelConfigError(f"--dtype: {dtype} takes no qualifier")
        return Quant(dtype)
    if dtype in ("int4_w4a16", "int8_w8a16"):
        group = 128
        if qual:
            g = re.fullmatch(r"group=(\d+)", qual)
            if not g:
                raise ModelConfigError(f"--dtype: {dtype} takes ':group=SIZE', not {qual!r}")
            group = int(g.group(1))
        return Quant(dtype, "group", (0, group), "--dtype", weight_only=True)
    if not qual or qual in ("per_tensor", "tensor"):
        return Quant(dtype, "per_tensor", None, "--dtype")
    if qual in ("per_channel", "channel"):
        return Quant(dtype, "per_channel", None, "--dtype")
    b = re.fullmatch(r"block=(\d+)[x,](\d+)", qual)
    if b:
        return Quant(dtype, "block", (int(b.group(1)), int(b.group(2))), "--dtype")
    raise ModelConfigError(f"--dtype: unknown qualifier {qual!r} (per_tensor, per_channel, block=BNxBK)")
