"""Kernel family fused_moe: fused MoE grouped GEMM: fp16/bf16/fp32, fp8/int8 W8A8 (per-tensor,
per-channel, block scales), int8 W8A16 per-channel, optional swap-AB.

``family.json`` (facts), ``family.py`` (behaviour), ``kernel.py`` (the ``@triton.jit`` reference
kernel), ``check.py`` (numerical checks), ``smem/`` (its closed forms); see :mod:`tilefit.kernels`.
"""
