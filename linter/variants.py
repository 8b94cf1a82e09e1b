"""From a table entry to the kernels the engine will launch with it.

One entry can feed more than one kernel: an ``int8_w8a16`` table serves both the per-channel
path (the plain fused-MoE kernel with int8 weights) and the group-quantised path (the wNa16
kernel), and the file name does not say which. Each such kernel is a *variant*; the
shared-memory rules judge every variant and report the worst.

The engines' launch-time adjustments are applied here, so the spec is what really compiles:
Triton's defaults for missing ``num_warps``/``num_stages``, vLLM's clamp of BLOCK_SIZE_K to the
quantisation block, and vLLM's swap of A and B for fp8 on sm_90.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .dtypes import path_of_file_dtype
from .families import TableMeta
from .serving.launch import launch_block_k, swaps_ab
from .smem.spec import KernelSpec, make_spec

# Triton's launch defaults on CUDA (and on ROCm for num_warps).
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES_CUDA = 3
DEFAULT_NUM_STAGES_ROCM = 2
WNA16_DEFAULT_GROUP = 128

TILE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")

@dataclass(frozen=True)
class Variant:
    label: str  # what differs between variants, shown in messages ("" when there is one)
    spec: KernelSpec


def dtype_path(meta: TableMeta) -> str | None:
    return path_of_file_dtype(meta.dtype)


def is_int(value) -> bool:
    return type(value) is int


def effective_launch(entry: Mapping, vendor: str) -> tuple[int, int]:
    """num_warps and num_stages as the launch will see them (Triton defaults filled in)."""
    warps = entry.get("num_warps", DEFAULT_NUM_WARPS)
    default_stages = DEFAULT_NUM_STAGES_ROCM if vendor == "AMD" else DEFAULT_NUM_STAGES_CUDA
    stages = entry.get("num_stages", default_stages)
    return warps, stages


def kernel_variants(meta: TableMeta, entry: Mapping, arch: str, vendor: str, engine: str | None) -> tuple[Variant, ...]:
    """The kernels one entry launches on ``arch``; () when the entry is not launchable as is."""
    if not isinstance(entry, Mapping):
        return ()
    if any(not is_int(entry.get(k)) or entry.get(k) <= 0 for k in TILE_KEYS):
        return ()
    warps, stages = effective_launch(entry, vendor)
    if not is_int(warps) or not is_int(stages) or warps <= 0 or stages <= 0:
        return ()
    path = dtype_path(meta)
    if path is None:
        return ()
    bm, bn, bk = (entry[k] for k in TILE_KEYS)
    tile = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk,
            "GROUP_SIZE_M": entry.get("GROUP_SIZE_M", 1) if is_int(entry.get("GROUP_SIZE_M", 1)) else 1}

    if meta.family == "w8a8_gemm":
        quant = "per_channel" if meta.dtype == "fp8_w8a8_channelwise" else "block"
        block = meta.block_shape if quant == "block" else None
        return (Variant("", make_spec("block_gemm", path, tile, num_warps=warps, num_stages=stages,
                                      quant=quant, block_shape=block)),)

    if meta.family != "fused_moe":
        return ()
    block = meta.block_shape
    if block is not None and (block[0] <= 0 or block[1] <= 0):
        block = None
    if block is not None:
        # vLLM clamps BLOCK_SIZE_K to the quantisation block at launch.
        tile["BLOCK_SIZE_K"] = launch_block_k(engine, bk, block)

    def plain(dtype: str, quant: str, label: str = "") -> Variant:
        swap = swaps_ab(engine, dtype, arch, tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"])
        return Variant(label, make_spec("fused_moe", dtype, tile, num_warps=warps, num_stages=stages,
                                        quant=quant, block_shape=block if quant == "block" else None,
                                        swap_ab=swap))

    def grouped(dtype: str, label: str = "") -> Variant:
        return Variant(label, make_spec("fused_moe_wna16", dtype, tile, num_warps=warps, num_stages=stages,
                                        quant="group", block_shape=(0, WNA16_DEFAULT_GROUP)))

    if path in ("fp8_w8a8", "int8_w8a8"):
        if block is not None:
            return (plain(path, "block"),)
        return (plain(path, "per_channel" if meta.per_channel_quant else "per_tensor"),)
    if path == "int4_w4a16":
        return (grouped(path),)
    if path == "int8_w8a16":
        return (plain(path, "per_channel", "per-channel int8 weights"),
                grouped(path, f"group-quantised int8 weights (group {WNA16_DEFAULT_GROUP})"))
    return (plain(path, "none"),)
