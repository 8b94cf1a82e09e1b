"""Compiling a fused-MoE config for a GPU in a process that has none: the CPU workers of ``tune``.

A GPU's first launch of a config compiles it: seconds of CPU in the process that owns the GPU,
between two timings. ``tilefit tune`` compiles on CPU worker processes instead, and those see no
GPU at all (``CUDA_VISIBLE_DEVICES=""``). A CPU worker builds the launch the GPU worker will make
-- the same workload code for the same (shape, M), with the tensors on the CPU -- and hands it to
Triton's own ``JITFunction.warmup``, with a stand-in for Triton's active driver that names the
GPU's target (``GPUTarget("cuda", 90, 32)`` for an H200). Triton then specialises the arguments
by its own rules (dtype, 16-byte alignment, ints equal to 1 or divisible by 16: nothing that
depends on where a tensor lives), compiles, and stores the kernel in its on-disk cache under the
key the GPU worker's launch computes, so that launch only loads it.

That it does is measured, not assumed: the GPU worker listens to Triton's compilations
(``triton.knobs.compilation.listener``) and reports every timing whose launch missed the cache
(``compiled_here`` in the ``--results`` log). The GPU worker's own compile stays the fallback, so
a CPU compile that fails or misses never changes a timing, only when it is taken.
"""

from __future__ import annotations

import time
from typing import Mapping

_WORKLOADS: dict = {}
_INSTALLED: list = []


class CompileOnlyDriver:
    """Triton's active driver, as far as ``JITFunction.run(warmup=True)`` needs one: the target,
    device 0, stream 0. Anything else (a launch, a device query) is an AttributeError here."""

    def __init__(self, target):
        self.target = target

    def get_current_target(self):
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device=None) -> int:
        return 0

    @staticmethod
    def is_active() -> bool:
        return True


class WarmupOnly:
    """A kernel whose ``kernel[grid](*args)`` compiles (``warmup``) instead of launching; the last
    compiled kernel is kept in ``compiled``."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.compiled = None

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.compiled = self.kernel.warmup(*args, grid=grid, **kwargs)
            return self.compiled
        return run


def use_target(target: tuple, kernels=()) -> None:
    """Make Triton compile for ``target`` = (backend, arch, warp size) in this process, which
    must not launch anything afterwards (a CPU worker). A JIT kernel keeps the target it first
    saw per device: ``kernels`` forget theirs when the target changes."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    backend, arch, warp_size = target
    if _INSTALLED and _INSTALLED[0] == tuple(target):
        return
    driver.set_active(CompileOnlyDriver(GPUTarget(backend, arch, warp_size)))
    for kernel in kernels:
        kernel.device_caches.clear()
    _INSTALLED[:] = [tuple(target)]


def compile_config(shape: Mapping, config: Mapping, M: int, target: tuple) -> dict:
    """Compile ``config`` for the launch at batch ``M`` of ``shape`` for ``target``; returns
    ``{"status": "ok" | "compile_error", "seconds", "shared", "message"}``."""
    from tilefit.kernels.fused_moe import kernel as fm

    from .workload import MoEShape, MoEWorkload

    start = time.perf_counter()
    use_target(target, kernels=(fm.fused_moe_kernel,))
    s = MoEShape(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in shape.items()})
    key = (s, M)
    if key not in _WORKLOADS:
        if len(_WORKLOADS) >= 8:  # a worker compiles for a few entries at a time
            _WORKLOADS.pop(next(iter(_WORKLOADS)))
        _WORKLOADS[key] = MoEWorkload(s, M, "cpu", materialize=False)
    kernel = WarmupOnly(fm.fused_moe_kernel)
    try:
        launch, _ = _WORKLOADS[key].prepare(dict(config), kernel=kernel)
        launch()
    except Exception as exc:  # noqa: BLE001 - a failed compile is a result
        message = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return {"status": "compile_error", "seconds": time.perf_counter() - start, "shared": None,
                "message": message}
    shared = getattr(getattr(kernel.compiled, "metadata", None), "shared", None)
    return {"status": "ok", "seconds": time.perf_counter() - start, "shared": shared, "message": ""}
