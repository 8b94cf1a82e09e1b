"""Kernel family scaled_mm: the per-token x per-channel scaled fp8 GEMM (SGLang's channel-wise tables).

``family.json`` (facts), ``family.py`` (behaviour), ``kernel.py`` (the ``@triton.jit`` reference
kernel), ``engines.py`` (SGLang's launch of its own kernel), ``smem/`` (the calibrated forms of
SGLang's kernel); see :mod:`tilefit.kernels`.
"""
