"""What an engine's launcher changes between a table entry and the kernel that compiles.

* **Swap of A and B** (:func:`swaps_ab`): the fused-MoE kernel can compute ``(B A)^T`` so that the
  64-row side of Hopper's wgmma is filled by N when BLOCK_SIZE_M is small. The rule -- fp8 W8A8,
  sm_90, ``BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N`` -- is vLLM's ``enable_swap_ab``; which engines
  apply it is data (the profiles' ``moe.swap_ab``): vLLM does, SGLang's kernel has no swap.
* **BLOCK_SIZE_K clamp** (:func:`launch_block_k`): vLLM launches a block-quantised MoE with
  ``BLOCK_SIZE_K = min(BLOCK_SIZE_K, block_n, block_k)`` (the profiles' ``moe.bk_clamp_to_block``);
  SGLang launches the table's value.

Nothing here imports triton or torch.
"""

from __future__ import annotations

from .data import ENGINES
from .naming import section

SWAP_AB_DTYPE = "fp8_w8a8"
SWAP_AB_ARCH = "sm_90"
SWAP_AB_BLOCK = 64


def swap_ab_tile(block_m: int, block_n: int) -> bool:
    """The tile condition of the swap: ``BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N``."""
    return block_m < SWAP_AB_BLOCK <= block_n


def swap_ab_applies(dtype: str, arch: str, block_m: int, block_n: int) -> bool:
    """Whether a launch that swaps A and B would swap this tile: fp8 W8A8 on sm_90 (``sm_90a``
    too) with ``BLOCK_SIZE_M < 64 <= BLOCK_SIZE_N``."""
    return dtype == SWAP_AB_DTYPE and arch_key(arch) and swap_ab_tile(block_m, block_n)


def arch_key(arch: str) -> bool:
    """What of an arch changes the kernels a table entry launches (the memo key of
    ``tilefit.variants.kernel_variants`` results): whether the swap can happen there."""
    return arch.lower().rstrip("af") in (SWAP_AB_ARCH, SWAP_AB_ARCH.replace("_", ""))


def swap_can_apply(engine: str | None, dtype: str | None) -> bool:
    """Whether ``engine`` can launch an entry of a table of dtype path ``dtype`` with A and B
    swapped on some arch: where it cannot, what :func:`arch_key` says of an arch changes none of
    the table's kernels (the variants of its entries are the same on every arch of one vendor)."""
    return dtype == SWAP_AB_DTYPE and engine_swaps(engine)


def engine_swaps(engine: str | None) -> bool:
    """Whether ``engine``'s fused-MoE launcher swaps A and B at all (None: unknown engine, no)."""
    return engine in ENGINES and bool((section(engine, "fused_moe") or {}).get("swap_ab"))


def swaps_ab(engine: str | None, dtype: str, arch: str, block_m: int, block_n: int) -> bool:
    """Whether ``engine`` launches this fused-MoE tile with A and B swapped on ``arch``."""
    # the tile's condition first: it is false for nearly every entry (and cheaper than the profile's)
    return swap_ab_applies(dtype, arch, block_m, block_n) and engine_swaps(engine)


def clamps_block_k(engine: str | None) -> bool:
    """Whether ``engine`` clamps BLOCK_SIZE_K to the quantisation block of a block-quantised MoE."""
    return engine in ENGINES and bool((section(engine, "fused_moe") or {}).get("bk_clamp_to_block"))


def clamp_block_k(block_k: int, block_shape: tuple[int, int] | None) -> int:
    """BLOCK_SIZE_K clamped to ``min(block_shape)`` (its positive sides), as vLLM launches it."""
    if not block_shape or not any(block_shape):
        return block_k
    return min(block_k, min(int(x) for x in block_shape if int(x) > 0))


def launch_block_k(engine: str | None, block_k: int, block_shape: tuple[int, int] | None) -> int:
    """BLOCK_SIZE_K as ``engine`` launches a fused-MoE entry with this quantisation block."""
    return clamp_block_k(block_k, block_shape) if clamps_block_k(engine) else block_k
