"""Kernel family fused_moe_wna16: weight-only group-quantised fused MoE (int4/int8 weights, zero
points).

``family.json`` (facts), ``family.py`` (behaviour), ``kernel.py`` (the ``@triton.jit`` reference
kernel), ``check.py`` (numerical checks), ``smem/`` (its closed forms); see :mod:`tilefit.kernels`.
"""
