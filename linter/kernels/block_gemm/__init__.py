"""Kernel family block_gemm: block-scaled W8A8 GEMM (fp8/int8).

``family.json`` (facts), ``family.py`` (behaviour), ``kernel.py`` (the ``@triton.jit`` reference
kernel), ``check.py`` (numerical checks), ``smem/`` (its closed forms); see :mod:`tilefit.kernels`.
"""
