"""From a table entry to the kernels the engine will launch with it.

One entry can feed more than one kernel: an ``int8_w8a16`` table serves both the per-channel
path (the plain fused-MoE kernel with int8 weights) and the group-quantised path (the wNa16
kernel), and the file name does not say which. Each such kernel is a *variant*; the
shared-memory rules judge every variant and report the worst.

Triton's defaults for missing ``num_warps``/``num_stages`` are filled in here; the rest is the
kernel family's that the table's config family launches (:func:`tilefit.kernels.table`, its
``table_variants``), with the engines' launch-time adjustments (vLLM's clamp of BLOCK_SIZE_K to the
quantisation block and its swap of A and B on sm_90, :mod:`tilefit.serving.launch`), so the spec
is what really compiles.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import kernels
from .dtypes import path_of_file_dtype
from .families import TableMeta
from .kernels.spec import Variant
from .parameters import in_domain

# Triton's launch defaults on CUDA (and on ROCm for num_warps).
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES_CUDA = 3
DEFAULT_NUM_STAGES_ROCM = 2
# ``triton.Config(kwargs)``'s own defaults: the autotuner passes them to every launch
# (``Config.all_kwargs``), so on ROCm an autotune config without num_stages runs 3 stages, not
# the HIP launch default of 2.
CONFIG_NUM_WARPS = 4
CONFIG_NUM_STAGES = 3

# the tile keys of the GEMM config tables (fused_moe, w8a8_gemm)
TILE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")

__all__ = ["CONFIG_NUM_STAGES", "CONFIG_NUM_WARPS", "DEFAULT_NUM_STAGES_CUDA", "DEFAULT_NUM_STAGES_ROCM",
           "DEFAULT_NUM_WARPS", "TILE_KEYS", "Variant", "dtype_path", "effective_launch", "is_int", "kernel_variants"]


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
    family = kernels.table(meta.family)
    if family is None or (type(entry) is not dict and not isinstance(entry, Mapping)):
        return ()
    names = family.tile_names
    for k in names:
        v = entry.get(k)
        if type(v) is not int or v <= 0:
            return ()
    warps, stages = effective_launch(entry, vendor)
    if type(warps) is not int or type(stages) is not int or warps <= 0 or stages <= 0:
        return ()
    if not in_domain(meta.family, entry):  # VAL003's: never estimated, never compiled
        return ()
    if dtype_path(meta) is None:
        return ()
    tile = {k: entry[k] for k in names}
    group = family.group_name
    if group:
        tile[group] = entry.get(group, 1) if is_int(entry.get(group, 1)) else 1
    variants = family.table_variants(meta, tile, warps, stages, arch, engine)
    return family.engine_variants(variants, entry, meta, engine, arch)
