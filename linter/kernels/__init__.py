"""The kernel registry: one folder per kernel family, holding everything about that kernel.

Built-in families (our reference Triton kernels, written from the published algorithms with the
engines' structure): :mod:`.fused_moe` (fused MoE grouped GEMM: fp16/bf16/fp32, fp8/int8 W8A8
per-tensor, per-channel or block scales, int8 W8A16, optional swap-AB), :mod:`.fused_moe_wna16`
(weight-only group-quantised MoE), :mod:`.block_gemm` (block-scaled W8A8 GEMM),
:mod:`.mla_decode` (MLA grouped decode attention, stage 1) and :mod:`.scaled_mm` (per-token x
per-channel scaled fp8 GEMM: SGLang's channel-wise tables). Each folder::

    family.json          facts: reference kernel, tile constexprs, dtype paths, engine function
                         names and files, probe defaults, calibration paths and grid, and the
                         config table that launches it (file-name grammar, parameters, perf shape,
                         fixer constraints)
    family.py            class Family(KernelFamily or GemmFamily): launch plan, closed-form
                         variables, calibration points, probe specs, table entry -> specs
    kernel.py            the @triton.jit kernel, its torch launcher and reference (imports triton)
    check.py             numerical checks against the reference (torch), GPU cases
    smem/triton-X.Y.json the family's calibrated closed forms per Triton release

The API (everything else in tilefit reads kernels through it)::

    from tilefit import kernels
    kernels.names()                      # ('fused_moe', 'fused_moe_wna16', 'block_gemm', 'mla_decode', 'scaled_mm')
    fam = kernels.get("fused_moe")       # a KernelFamily (UnknownKernel, a KeyError, otherwise)
    fam.launch_plan(spec)                # the LaunchPlan the exact estimator compiles
    fam.reference                        # ("tilefit.kernels.fused_moe.kernel", "fused_moe_kernel")
    fam.engine_functions, fam.engine_files
    kernels.table("w8a8_gemm")           # the family a config family's entries launch (block_gemm)
    kernels.table_names()                # the linted config families
    kernels.by_function("_fwd_grouped_kernel_stage1")   # mla_decode
    kernels.launch_plan(spec)            # == kernels.get(spec.kernel).launch_plan(spec)

Adding a family: a new folder with ``family.json`` and ``family.py`` (``class Family``; a GEMM
kernel subclasses :class:`~.gemm.GemmFamily` and writes ``launch_plan``), ``kernel.py`` and,
after ``tilefit calibrate smem --kernel NAME``, its ``smem/`` forms. A built-in folder is also
listed in pyproject's packages (a test checks); a folder elsewhere is registered with
``$TILEFIT_KERNEL_PATH`` or :func:`register` (``tests/kernels/tiny_gemm`` is one). check, probe,
calibrate, the fixer and the doctor then see it like the built-in ones.

Nothing here imports triton or torch (``kernel.py`` and ``check.py`` do, when used).
"""

from __future__ import annotations

from .family import KernelFamily, KernelFamilyError
from .plan import Arg, LaunchPlan
from .registry import (ENV_VAR, UnknownKernel, by_function, families, find, get, names, register, registered,
                       snapshot, table, table_names)
from .spec import KernelSpec, Variant, make_spec


def launch_plan(spec: KernelSpec) -> LaunchPlan:
    """The launch of ``spec``'s reference kernel as the engine's launcher would make it; raises
    ``ValueError`` for a spec the kernel cannot run (a dtype path or quantisation mode it has no
    code for, a missing tile size)."""
    return get(spec.kernel).launch_plan(spec)


__all__ = [
    "ENV_VAR", "Arg", "KernelFamily", "KernelFamilyError", "KernelSpec", "LaunchPlan", "UnknownKernel", "Variant",
    "by_function", "families", "find", "get", "launch_plan", "make_spec", "names", "register", "registered",
    "snapshot", "table", "table_names",
]
