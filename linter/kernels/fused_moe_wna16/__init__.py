"""Kernel family fused_moe_wna16: weight-only group-quantised fused MoE (int4/int8 weights, zero points).

``family.json`` (facts), ``family.py`` (behaviour), ``kernel.py`` (the ``@triton.jit`` reference
kernel), ``check.py`` (numerical checks); see :mod:`tilefit.kernels`.
"""
