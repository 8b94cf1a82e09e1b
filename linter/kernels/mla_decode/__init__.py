"""Kernel family mla_decode: MLA grouped decode attention, stage 1 (bf16 or fp8 latent cache).

``family.json`` (facts), ``family.py`` (behaviour), ``kernel.py`` (the ``@triton.jit`` reference
kernel), ``check.py`` (numerical checks), ``smem/`` (its closed forms); see :mod:`tilefit.kernels`.
"""
