"""tiny_gemm: a test kernel family (``C = A B``, fp16 or bf16), registered from outside the package.

A GEMM-shaped family writes only its launch plan; the closed forms, the calibration grid, the
probe and the table entries come from :class:`tilefit.kernels.gemm.GemmFamily`.
"""

from __future__ import annotations

from tilefit.kernels.gemm import GemmFamily
from tilefit.kernels.plan import LaunchPlan, const, int_, options, ptr, require
from tilefit.kernels.spec import KernelSpec


class Family(GemmFamily):
    def launch_plan(self, spec: KernelSpec) -> LaunchPlan:
        tile = require(spec, "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
        if spec.dtype not in self.dtypes:
            raise ValueError(f"tiny_gemm runs {'/'.join(self.dtypes)}, not {spec.dtype}")
        p = spec.problem_dict
        m, n, k = p.get("M", 256), p.get("N", 4096), p.get("K", 4096)
        args = [
            # A (M, K), B (K, N), C (M, N), all row-major
            ptr("a_ptr", spec.dtype), ptr("b_ptr", spec.dtype), ptr("c_ptr", spec.dtype),
            int_("M", m), int_("N", n), int_("K", k),
            int_("stride_am", k), int_("stride_ak", 1), int_("stride_bk", n), int_("stride_bn", 1),
            int_("stride_cm", n), int_("stride_cn", 1),
            const("BLOCK_SIZE_M", tile["BLOCK_SIZE_M"]), const("BLOCK_SIZE_N", tile["BLOCK_SIZE_N"]),
            const("BLOCK_SIZE_K", tile["BLOCK_SIZE_K"]),
        ]
        module, function = self.reference
        return LaunchPlan(self.name, module, function, tuple(args), spec.num_warps, spec.num_stages, options(spec))
