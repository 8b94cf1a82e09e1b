"""Kernel call sites in Python sources: static scan, resolution, evaluation.

Half of the real ``OutOfResources`` crashes come from no config file at all: tile sizes and
``num_stages`` written at a launch (``_decode_kernel[grid](..., BLOCK_N=32, num_stages=2)``),
in ``@triton.autotune`` lists, or returned by a default-config function. This package finds
them in ``.py`` files and judges them for the run's targets, without importing the files.

Pipeline (each step a module):

==================  ==========================================================================
``source``          a file's bytes, text and AST; ``ast``'s byte columns -> 1-based character
                    columns and byte offsets; ruff's ``# noqa`` grammar
``scan``            one module: ``@triton.jit`` kernels (and ``@jit``, ``triton.jit(...)``,
                    ``tl.constexpr`` parameters, ``@triton.autotune``, ``@triton.heuristics``),
                    launches ``callee[grid](...)``, top-level bindings, calls by name
``project``         the scanned tree: modules by dotted name and path, imports followed across
                    modules (relative, absolute, ``import a.b as m``), files outside the given
                    paths loaded on demand to follow an import
``values``          static values: literals (with their location), module constants, default
                    arguments, locals, ``x if c else y`` arms, ``min``/``max``/``next_power_of_2``,
                    lists, comprehensions, ``triton.Config``, zero-argument helper functions
``sites``           :class:`~tilefit.callsites.sites.LaunchSite` (one per launch, and per call
                    site of a launcher wrapper that passes other constants) and
                    :class:`~tilefit.callsites.sites.AutotuneSite` (one per autotune list)
``kernelinfo``      parameter roles read from a kernel body: pointers (data, index, scale,
                    output), floats, strides a launch passes as 1
``evaluate``        one compile per (kernel, launch values, dtype variant, arch): the kernel is
                    carried into a scratch module (:mod:`tilefit.pysource.extract`), given launch-like
                    arguments and compiled ahead of time (:mod:`tilefit.smem.exact`); dtype
                    variants from ``[tool.tilefit.kernels]`` or a bf16/fp16/fp8 sweep;
                    ``--allow-import`` and the analytic model of our reference kernels as fallbacks
``cache``           compile records of scratch modules next to the exact estimator's
``checks``          verdicts per site, device class and variant, shared by the rules; the search
                    for the largest ``num_stages`` / ``BLOCK_*`` that fits (fixes and guards)
``checker``         the engine path: run the CALLSITE rules (SMEM002, SMEM003, EST002), position
                    findings, apply ``# noqa`` and per-file ignores
==================  ==========================================================================

Python files name no device: without ``--target`` / ``[tool.tilefit] targets`` nothing is
compiled and nothing device-specific is reported.
"""
