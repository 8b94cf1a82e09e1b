"""scaled_mm: the per-token x per-channel scaled fp8 GEMM that SGLang's channel-wise tables launch.

The ``w8a8_gemm`` tables are :mod:`tilefit.kernels.block_gemm`'s; an entry of a
``dtype=fp8_w8a8_channelwise`` table launches this family's kernel (block_gemm's
``table_variants``). The plan follows SGLang 0.5.23's ``triton_scaled_mm``: A (M, K) row-major,
B the (K, N) transpose of the checkpoint's (N, K) weight, per-row scale vectors (M, 1) and
(N, 1), bf16 output, no bias, fp32 accumulator. Nothing here imports triton.
"""

from __future__ import annotations

from tilefit.kernels.gemm import GemmFamily
from tilefit.kernels.plan import LaunchPlan, const, dtype_arg, int_, options, out_type, ptr, require
from tilefit.kernels.spec import KernelSpec, make_spec


def _t(bm, bn, bk):
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk)


class Family(GemmFamily):
    def launch_plan(self, spec: KernelSpec) -> LaunchPlan:
        tile = require(spec, "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
        if spec.dtype != "fp8_w8a8":
            raise ValueError(f"scaled_mm runs fp8_w8a8, not {spec.dtype}")
        if spec.quant != "per_channel":
            raise ValueError(f"scaled_mm runs per-token x per-channel scales, not {spec.quant}")
        p = spec.problem_dict
        m, n, k = p.get("M", 256), p.get("N", 4096), p.get("K", 4096)
        bm, bn = tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"]
        args = [
            ptr("a_ptr", "fp8e4nv"), ptr("b_ptr", "fp8e4nv"), ptr("scale_a_ptr", "fp32"), ptr("scale_b_ptr", "fp32"),
            ptr("c_ptr", out_type(spec, "bf16")), ptr("bias_ptr", None),
            int_("M", m), int_("N", n), int_("K", k),
            # A (M, K) row-major; B = weight.t(): a (K, N) view of the (N, K) weight; C (M, N)
            int_("stride_am", k), int_("stride_ak", 1), int_("stride_bk", 1), int_("stride_bn", k),
            int_("stride_cm", n), int_("stride_cn", 1),
            dtype_arg("ACCUMULATOR_DTYPE", "fp32"),
            const("BLOCK_SIZE_M", bm), const("BLOCK_SIZE_N", bn), const("BLOCK_SIZE_K", tile["BLOCK_SIZE_K"]),
            # per-token and per-channel scales: one per row of the tile, one per column
            const("BLOCK_SIZE_SCALE_A", bm), const("BLOCK_SIZE_SCALE_B", bn),
        ]
        mod, fn = self.reference
        return LaunchPlan("scaled_mm", mod, fn, tuple(args), spec.num_warps, spec.num_stages, options(spec))

    def point_spec(self, path, tile, num_warps: int, num_stages: int) -> KernelSpec:
        bm, bn, bk = tile
        return make_spec(self.name, path.dtype, _t(bm, bn, bk), num_warps=num_warps, num_stages=num_stages,
                         quant=path.quant)

    def default_quant(self, dtype: str, block_shape):
        return "per_channel", None

    def table_variants(self, meta, tile, num_warps: int, num_stages: int, arch: str, engine: str | None):
        return ()  # no table family of its own: block_gemm's channel-wise tables launch it

    def validation_specs(self) -> list[KernelSpec]:
        k = self.name
        P = dict(M=256, N=4096, K=4096)
        return [
            make_spec(k, "fp8_w8a8", _t(64, 128, 128), num_warps=4, num_stages=3, quant="per_channel", problem=P),
            make_spec(k, "fp8_w8a8", _t(16, 32, 256), num_warps=4, num_stages=3, quant="per_channel", problem=P),
        ]
