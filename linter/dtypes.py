"""Data types: every name, alias, element size and dtype path tilefit knows, in one place.

Two kinds of names:

* **Element types** in Triton's spelling (``fp16``, ``bf16``, ``fp8e4nv``, ``i8``, ``u8``, ...):
  what a pointer points to or a ``tl.constexpr`` dtype holds. :func:`triton_type` turns the
  other spellings into them: Triton's ``tl.*`` attribute names (``tl.bfloat16`` ->
  ``bf16``, :data:`TL_NAMES`), torch's (``float8_e4m3fn``), the engines' KV-cache names
  (``fp8``, ``fp8_e5m2``) and the short ones (``int8``). :data:`ELEMENT_BYTES` has their sizes.
* **Dtype paths** (``bf16``, ``fp8_w8a8``, ``int4_w4a16``, ...): how a GEMM kernel's operands
  are typed and quantised, the names the engines use in config file names. :data:`PATHS` gives
  each path's operand element types and :func:`operand_bytes` the bytes per logical element of
  A, B and the output (packed int4 weights: half a byte), as the shared-memory and performance
  models use them.

``auto`` (the engines' ``--kv-cache-dtype auto``) is not a type: it means "the model's dtype".
:func:`kv_cache_type` returns None for it (the caller knows the model), :func:`triton_type`
resolves it to its ``auto`` argument (bf16 unless the caller knows better).

MI300 (gfx940/941/942) runs fp8 in the ``fnuz`` formats: :func:`on_arch` maps an element type
to the one the engines allocate there.

Nothing here imports triton or torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

# ------------------------------------------------------------------------------------------------
# element types

ELEMENT_BYTES: Mapping[str, int] = {
    "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8,
    "fp8e4nv": 1, "fp8e5": 1, "fp8e4b8": 1, "fp8e4b15": 1, "fp8e5b16": 1,
    "i1": 1, "i8": 1, "u8": 1, "i16": 2, "i32": 4, "i64": 8, "u32": 4,
}
TRITON_TYPES = frozenset(ELEMENT_BYTES)

# ``triton.language`` attribute names of the element types (``tl.bfloat16``).
TL_NAMES: Mapping[str, str] = {
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
    "float8e4nv": "fp8e4nv", "float8e5": "fp8e5", "float8e4b8": "fp8e4b8", "float8e4b15": "fp8e4b15",
    "float8e5b16": "fp8e5b16", "int1": "i1", "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint32": "u32",
}
# torch's names of the types the kernels' launchers and checks allocate.
TORCH_NAMES: Mapping[str, str] = {
    "fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64", "fp8e4nv": "float8_e4m3fn",
    "fp8e5": "float8_e5m2", "fp8e4b8": "float8_e4m3fnuz", "fp8e5b16": "float8_e5m2fnuz", "i8": "int8",
    "u8": "uint8", "i16": "int16", "i32": "int32", "i64": "int64",
}
# Other spellings (torch, the engines' --kv-cache-dtype, short names) -> element type.
ALIASES: Mapping[str, str] = {
    **TL_NAMES,
    **{torch: ty for ty, torch in TORCH_NAMES.items()},
    "half": "fp16", "float": "fp32",
    "fp8": "fp8e4nv", "fp8_e4m3": "fp8e4nv", "fp8e4m3": "fp8e4nv", "fp8_e5m2": "fp8e5",
}

# ``torch.finfo(dtype)``'s fields of the float types, as literals (a kernel's ``FP8_MAX:
# tl.constexpr = float8_info.max`` with ``float8_info = torch.finfo(...)`` at module level: the
# extraction folds them so the kernel compiles without importing torch or the file). Each value
# follows from the format (exponent bits e, mantissa bits m, bias): IEEE types max (2 - 2^-m) *
# 2^(2^(e-1) - 1); e4m3fn (no infinities) 1.75 * 2^8; the fnuz types a bias one larger.
# tests/test_compile_isolation.py checks them against those formulas.
FINFO: Mapping[str, Mapping[str, float]] = {
    "fp16": {"bits": 16, "max": 65504.0, "min": -65504.0, "eps": 0.0009765625, "tiny": 6.103515625e-05},
    "bf16": {"bits": 16, "max": 3.3895313892515355e+38, "min": -3.3895313892515355e+38, "eps": 0.0078125,
             "tiny": 1.1754943508222875e-38},
    "fp32": {"bits": 32, "max": 3.4028234663852886e+38, "min": -3.4028234663852886e+38,
             "eps": 1.1920928955078125e-07, "tiny": 1.1754943508222875e-38},
    "fp8e4nv": {"bits": 8, "max": 448.0, "min": -448.0, "eps": 0.125, "tiny": 0.015625},
    "fp8e5": {"bits": 8, "max": 57344.0, "min": -57344.0, "eps": 0.25, "tiny": 6.103515625e-05},
    "fp8e4b8": {"bits": 8, "max": 240.0, "min": -240.0, "eps": 0.125, "tiny": 0.0078125},
}

AUTO = "auto"
# --kv-cache-dtype values the doctor accepts (the engines' spellings).
KV_CACHE_NAMES = ("auto", "bf16", "bfloat16", "fp16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")

# gfx940/941/942 (MI300) use the "fnuz" fp8 formats; the engines allocate float8_e4m3fnuz there.
FNUZ_ARCHS = frozenset({"gfx940", "gfx941", "gfx942"})
_FNUZ = {"fp8e4nv": "fp8e4b8", "fp8e5": "fp8e5b16"}


def triton_type(name: str, auto: str = "bf16") -> str:
    """The element type of ``name`` (``bfloat16`` -> ``bf16``, ``fp8`` -> ``fp8e4nv``, ``int8`` ->
    ``i8``); ``auto`` resolves to the ``auto`` argument (the model's dtype when the caller knows
    it). Unknown names come back unchanged."""
    if name == AUTO:
        return auto
    return ALIASES.get(name, name)


def element_bytes(name: str, default: int | None = None) -> int | None:
    """Bytes per element of an element type or alias (``default`` when unknown)."""
    return ELEMENT_BYTES.get(triton_type(name), default)


def is_fp8(name: str | None) -> bool:
    """Whether ``name`` (an element type or alias) is an fp8 format."""
    return bool(name) and triton_type(str(name)).startswith("fp8")


def kv_cache_type(name: str | None) -> str | None:
    """The element type of a ``--kv-cache-dtype`` value; None for ``auto`` or None (the model's
    dtype). Raises KeyError for a name the engines do not accept."""
    if name is None or name == AUTO:
        return None
    if name not in KV_CACHE_NAMES and triton_type(name) not in ("bf16", "fp16", "fp8e4nv", "fp8e5"):
        raise KeyError(name)
    return triton_type(name)


def on_arch(name: str, arch: str) -> str:
    """The element type the engines allocate for ``name`` on ``arch`` (fnuz fp8 on MI300)."""
    return _FNUZ.get(name, name) if arch.lower() in FNUZ_ARCHS else name


# ------------------------------------------------------------------------------------------------
# dtype paths


@dataclass(frozen=True)
class DtypePath:
    """How a GEMM's operands are typed: ``a`` the activation, ``b`` the weight as stored in global
    memory (int4 weights are packed two per ``u8``), ``c`` the output; ``weight_bits`` the bits of
    one logical weight element."""

    name: str
    a: str
    b: str
    c: str
    weight_bits: int

    @property
    def quantised(self) -> bool:
        return self.weight_bits < 16

    @property
    def operand_bytes(self) -> tuple[float, float, float]:
        """Bytes per logical element of A, B and the output (int4: 0.5 for B)."""
        wb = self.weight_bits
        return ELEMENT_BYTES[self.a], (wb // 8 if wb % 8 == 0 else wb / 8), ELEMENT_BYTES[self.c]

    @property
    def operand_types(self) -> dict[str, str]:
        return {"a": self.a, "b": self.b, "c": self.c}


PATHS: Mapping[str, DtypePath] = {p.name: p for p in (
    DtypePath("fp16", "fp16", "fp16", "fp16", 16),
    DtypePath("bf16", "bf16", "bf16", "bf16", 16),
    DtypePath("fp32", "fp32", "fp32", "fp32", 32),
    DtypePath("fp8_w8a8", "fp8e4nv", "fp8e4nv", "bf16", 8),
    DtypePath("int8_w8a8", "i8", "i8", "bf16", 8),
    DtypePath("int8_w8a16", "bf16", "i8", "bf16", 8),
    DtypePath("int4_w4a16", "bf16", "u8", "bf16", 4),
)}
UNQUANTISED = tuple(n for n, p in PATHS.items() if not p.quantised)  # fp16, bf16, fp32
QUANTISED = tuple(n for n, p in PATHS.items() if p.quantised)

# Quantisation granularity of the scales.
QUANT_MODES = ("none", "per_tensor", "per_channel", "block", "group")


def operand_bytes(path: str) -> tuple[float, float, float]:
    """(A, B, output) bytes per element of a dtype path (2, 2, 2 for an unknown one)."""
    p = PATHS.get(path)
    return p.operand_bytes if p is not None else (2, 2, 2)


def missing_fp8_type(path: str | None, fp8_types) -> str | None:
    """The fp8 element type of dtype path ``path`` that a device's Triton backend lacks (its
    ``triton_fp8_dtypes``: ``fp8e4nv`` exists from sm_89 on), or None when the path runs there
    (also when the device's fp8 types are unknown). Triton refuses to compile such a kernel, so
    the engines do not run it there (vLLM and SGLang take a Marlin or another kernel instead)."""
    p = PATHS.get(path) if path is not None else None
    if p is None or fp8_types is None:
        return None
    for ty in (p.a, p.b):
        if ty.startswith("fp8") and ty not in fp8_types:
            return ty
    return None


# File-name ``dtype=`` values -> dtype path. None (no dtype in the name) is the 16-bit path.
FILE_NAME_PATHS: Mapping[str | None, str] = {
    None: "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "float32": "fp32",
    "fp8_w8a8": "fp8_w8a8",
    "float8": "fp8_w8a8",
    "int8_w8a8": "int8_w8a8",
    "int8_w8a16": "int8_w8a16",
    "fp8_w8a16": "int8_w8a16",  # 1-byte weights, 16-bit activations: same buffers
    "int4_w4a16": "int4_w4a16",
    "fp8_w8a8_channelwise": "fp8_w8a8",
}

# ``--dtype`` spellings of the doctor -> dtype path ("auto"/"none": the model's activation dtype).
PATH_ALIASES: Mapping[str, str] = {
    "fp8": "fp8_w8a8", "int8": "int8_w8a8", "w4a16": "int4_w4a16", "w8a16": "int8_w8a16",
    "bfloat16": "bf16", "float16": "fp16", "float32": "fp32",
}


def path_of_file_dtype(dtype: str | None) -> str | None:
    """The dtype path of a config file name's ``dtype=`` value (None: not one we model)."""
    return FILE_NAME_PATHS.get(dtype)


def file_dtype_of(path: str) -> str | None:
    """A ``dtype=`` value that names ``path`` in a file name (None for the 16-bit default)."""
    for name, p in FILE_NAME_PATHS.items():
        if p == path:
            return name
    raise KeyError(path)


def activation_path(torch_dtype: str, default: str = "bf16") -> str:
    """The 16-bit (or fp32) path of a checkpoint's ``torch_dtype`` (``bfloat16``, ``torch.float16``)."""
    name = triton_type(str(torch_dtype).replace("torch.", ""), auto=default)
    return name if name in UNQUANTISED else default
