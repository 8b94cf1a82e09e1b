"""How each engine names its tuning tables, read from the engine profiles.

The engine profiles (``data/engine_profiles/<engine>-<version>.json``, :mod:`.profiles`) hold the
file-name grammar of each engine release: which ``dtype=`` string each dtype path gets (or none),
how ``block_shape`` is spelled, whether ``_down`` and ``per_channel_quant`` tables exist, whether
``backend=`` appears, whether the device name is folded (vLLM: every H200 variant to
``NVIDIA_H200`` for fused MoE), and how the runtime's device name is spelled. Everything that
depends on those rules reads them here:

* :func:`moe_file_name`, :func:`gemm_file_name`, :func:`device_file_name` -- the name an engine
  asks for (the doctor's lookup);
* :func:`dead_reasons` -- why an engine can never ask for a file of this name (NAME001);
* :func:`evidence` -- which engine a file name's marks point to (``tilefit.families``);
* :func:`folds_h200` and :func:`device_for_file_name` -- the device a file name's
  ``device_name`` stands for, with the engine's fold (``tilefit.engine``, the tuner).

A profile section is per config family: ``moe`` for ``fused_moe`` tables, ``block_gemm`` for
``w8a8_gemm`` tables (:data:`SECTIONS`). Rules that hold for an engine hold for every profile of
it that we have; with no version known, the newest profile of each engine speaks for it.

Only the profiles' JSON is read (no formula is compiled), so the check path stays light.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

from tilefit.device_db import names as device_names

from .data import ENGINES, raw_profiles

# config family (tilefit.families) -> the profile section with its naming rules
SECTIONS: Mapping[str, str] = {"fused_moe": "moe", "w8a8_gemm": "block_gemm"}
# dtype paths a block-quantised table can have (the only paths with block scales)
BLOCK_QUANT_PATHS = ("fp8_w8a8", "int8_w8a8")


@lru_cache(maxsize=None)
def newest(engine: str) -> Mapping[str, Any]:
    """The newest profile of ``engine`` (raw JSON)."""
    mine = [data for _, data in raw_profiles() if data["engine"] == engine]
    if not mine:
        raise KeyError(engine)
    return mine[-1]


def label(engine: str) -> str:
    """The engine's name as people write it (``vLLM``, ``SGLang``)."""
    return str(newest(engine).get("engine_name", engine))


def section(engine: str, family: str) -> Mapping[str, Any] | None:
    """The naming rules of ``engine`` for config ``family`` (None: the profiles do not cover it)."""
    key = SECTIONS.get(family)
    return newest(engine).get(key) if key else None


def spelling(engine: str) -> str:
    """Which device-name spelling the engine writes (``vllm``: runs of whitespace or ``/`` -> ``_``;
    ``sglang``: each space -> ``_``; :mod:`tilefit.device_db.names`)."""
    return str(newest(engine)["device_name"]["spelling"])


# ------------------------------------------------------------------------------------------------
# the names an engine asks for


def block_text(rules: Mapping[str, Any], block: tuple[int, int] | None) -> str:
    """The ``,block_shape=...`` part of a name (empty without a full block shape)."""
    if not block or not all(block):
        return ""
    return ",block_shape=" + rules.get("block_shape_format", "[{bn}, {bk}]").format(bn=block[0], bk=block[1])


def _raw(profile) -> Mapping[str, Any]:
    return getattr(profile, "raw", profile)


def moe_file_name(profile, E: int, N: int, device: str, dtype_name: str | None,
                  block: tuple[int, int] | None, per_channel: bool, down: bool = False) -> str:
    """The fused-MoE table name ``profile`` (a Profile or its JSON) builds."""
    rules = _raw(profile)["moe"]
    name = f"E={E},N={N},device_name={device}"
    if dtype_name:
        name += f",dtype={dtype_name}"
    name += block_text(rules, block)
    if per_channel and rules.get("per_channel_suffix"):
        name += ",per_channel_quant=True"
    if down:
        name += "_down"
    return name + ".json"


def gemm_file_name(profile, N: int, K: int, device: str, block: tuple[int, int]) -> str:
    """The block-GEMM table name ``profile`` builds (its fp8 path)."""
    rules = _raw(profile)["block_gemm"]
    return f"N={N},K={K},device_name={device},dtype={rules.get('dtype', 'fp8_w8a8')}{block_text(rules, block)}.json"


def device_file_name(torch_name: str, profile, h200_fold: bool) -> str:
    """The device part of a config name as ``profile``'s engine spells the runtime's device name
    (``h200_fold``: the table family's lookup folds H200 variants)."""
    raw = _raw(profile)
    if raw["device_name"]["spelling"] == "vllm":
        name = device_names.vllm_file_name(torch_name)
        if h200_fold and device_names.vllm_moe_folds_to_h200(name):
            return device_names.H200_FILE_NAME
        return name
    return device_names.sglang_file_name(torch_name)


# ------------------------------------------------------------------------------------------------
# which device a file name stands for


def folds_h200(engine: str | None, family: str | None) -> bool:
    """Whether ``engine``'s lookup of ``family`` tables folds every H200 variant to
    ``NVIDIA_H200`` (``family`` None: any of its tables does)."""
    if engine not in ENGINES:
        return False
    if family is None:
        return any(bool((section(engine, f) or {}).get("h200_fold")) for f in SECTIONS)
    return bool((section(engine, family) or {}).get("h200_fold"))


def device_for_file_name(db, name: str, engine: str | None = None, family: str | None = None):
    """``db.by_file_name`` with the engine's H200 fold: the device a config file's
    ``device_name`` value stands for, or None. ``family`` may carry engines.md's prefix
    (``vl.fused_moe``), which names the engine."""
    engine = (engine or device_names.engine_of_family(family) or "").lower() or None
    fold = folds_h200(engine, device_names.family_base(family))
    return db.by_file_name(name, engine=engine, family=family, h200_fold=fold)


# ------------------------------------------------------------------------------------------------
# file names an engine never asks for


def _asked_dtypes(rules: Mapping[str, Any]) -> set[str | None]:
    return set((rules.get("dtype_names") or {}).values())


def _spacing_reason(engine: str, rules: Mapping[str, Any], spaced: bool | None) -> str | None:
    fmt = rules.get("block_shape_format", "[{bn}, {bk}]")
    writes_space = ", " in fmt
    if spaced is None or spaced == writes_space:
        return None
    how = "with" if writes_space else "without"
    return f"{label(engine)} writes block_shape {how} a space ({fmt.format(bn=128, bk=128)})"


def _dtype_reason(engine: str, family: str, rules: Mapping[str, Any], dtype: str | None) -> str | None:
    names = rules.get("dtype_names") or {}
    if dtype in _asked_dtypes(rules):
        return None
    if family == "w8a8_gemm":
        asked = ", ".join(f"dtype={n}" for n in names.values() if n)
        return f"{label(engine)} only looks up {asked} block-GEMM tables, not {dtype}"
    unnamed = [p for p, n in names.items() if n is None]
    plain = "/".join(p for p in unnamed if p not in BLOCK_QUANT_PATHS)
    quantised = " and ".join(p for p in unnamed if p in BLOCK_QUANT_PATHS)
    without = " and ".join(x for x in (plain, quantised) if x)
    fp8 = names.get("fp8_w8a8")
    note = []
    if without:
        note.append(f"{without} use the name without dtype")
    if fp8:
        note.append(f"fp8 uses {fp8}")
    return f"{label(engine)} never asks for dtype={dtype}" + (f" ({', '.join(note)})" if note else "")


def dead_reasons(meta, engine: str) -> list[str]:
    """Why ``engine`` can never load a file of this name (empty when it can). ``meta`` is a
    :class:`tilefit.families.TableMeta`."""
    reasons = []
    dev = meta.device_name or ""
    if " " in dev:
        reasons.append("device names in file names use '_' for spaces")
    rules = section(engine, meta.family)
    if rules is None or (meta.family == "fused_moe" and meta.backend is not None):
        return reasons
    why = _dtype_reason(engine, meta.family, rules, meta.dtype)
    if why:
        reasons.append(why)
    if meta.family == "fused_moe" and meta.block_shape is not None and meta.dtype is None:
        # block scales come with a quantised path; an engine that names every such path never
        # writes block_shape alone
        names = rules.get("dtype_names") or {}
        if all(names.get(p) for p in BLOCK_QUANT_PATHS):
            reasons.append(f"{label(engine)} never writes block_shape without a dtype")
    why = _spacing_reason(engine, rules, meta.block_shape_spaced)
    if why:
        reasons.append(why)
    if meta.family == "fused_moe":
        if (meta.down and not rules.get("down_tables")) or (meta.per_channel_quant and not rules.get("per_channel_suffix")):
            reasons.append(f"{label(engine)} has no _down or per_channel_quant tables")
        if rules.get("h200_fold") and "H200" in dev.split("_") and dev != device_names.H200_FILE_NAME:
            reasons.append(f"{label(engine)} folds every H200 variant to device_name={device_names.H200_FILE_NAME} "
                           "for fused MoE")
    return reasons


# ------------------------------------------------------------------------------------------------
# which engine a name points to


@lru_cache(maxsize=None)
def _writers() -> dict[str, tuple[str, ...]]:
    """Per mark of a file name, the engines whose profiles write it."""
    marks: dict[str, list[str]] = {"triton_folder": [], "down": [], "per_channel_quant": [], "backend": [],
                                   "spaced_block_shape": [], "unspaced_block_shape": []}
    for engine in ENGINES:
        moe = section(engine, "fused_moe") or {}
        if moe.get("triton_folders"):
            marks["triton_folder"].append(engine)
        if moe.get("down_tables"):
            marks["down"].append(engine)
        if moe.get("per_channel_suffix"):
            marks["per_channel_quant"].append(engine)
        if moe.get("backend_key"):
            marks["backend"].append(engine)
        for family in SECTIONS:
            fmt = (section(engine, family) or {}).get("block_shape_format", "[{bn}, {bk}]")
            key = "spaced_block_shape" if ", " in fmt else "unspaced_block_shape"
            if engine not in marks[key]:
                marks[key].append(engine)
    return {k: tuple(v) for k, v in marks.items()}


# the words a finding or `tilefit` output uses for each mark
EVIDENCE = {
    "triton_folder": "triton_X_Y_Z folder",
    "down": "_down suffix",
    "per_channel_quant": "per_channel_quant key",
    "backend": "backend key",
    "spaced_block_shape": "block_shape written with a space",
    "unspaced_block_shape": "block_shape written without a space",
}


def writer_of(mark: str) -> str | None:
    """The one engine that writes file names with ``mark`` (None: both or neither)."""
    who = _writers().get(mark, ())
    return who[0] if len(who) == 1 else None


def evidence(*, triton_folder: bool = False, down: bool = False, per_channel_quant: bool = False,
             backend: bool = False, block_shape_spaced: bool | None = None) -> tuple[str | None, str | None]:
    """``(engine, why)`` from the marks of a file name (first mark that only one engine writes,
    in the order of the arguments), or ``(None, None)``."""
    present = [("triton_folder", triton_folder), ("down", down), ("per_channel_quant", per_channel_quant),
               ("backend", backend), ("spaced_block_shape", block_shape_spaced is True),
               ("unspaced_block_shape", block_shape_spaced is False)]
    for mark, there in present:
        if there:
            engine = writer_of(mark)
            if engine is not None:
                return engine, EVIDENCE[mark]
    return None, None
