"""block_gemm: the block-scaled W8A8 GEMM (fp8/int8), and the ``w8a8_gemm`` tables that launch it.

The launch plan follows vLLM's ``w8a8_triton_block_scaled_mm``. A ``w8a8_gemm`` table entry
launches it block-quantised with the file name's ``block_shape``; an entry of a channel-wise
table (``dtype=fp8_w8a8_channelwise``) launches SGLang's per-token x per-channel GEMM, the
:mod:`tilefit.kernels.scaled_mm` family. Nothing here imports triton.
"""

from __future__ import annotations

from typing import Mapping

from tilefit.kernels.gemm import GemmFamily
from tilefit.kernels.plan import LaunchPlan, cdiv, const, int_, options, out_type, ptr, require
from tilefit.kernels.spec import KernelSpec, Variant, make_spec


def _t(bm, bn, bk, g=1):
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=g)


class Family(GemmFamily):
    def launch_plan(self, spec: KernelSpec) -> LaunchPlan:
        tile = require(spec, "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
        p = spec.problem_dict
        m, n, k = p.get("M", 256), p.get("N", 4096), p.get("K", 4096)
        if spec.dtype not in ("fp8_w8a8", "int8_w8a8"):
            raise ValueError(f"block_gemm runs fp8_w8a8/int8_w8a8, not {spec.dtype}")
        if not spec.block_shape:
            raise ValueError("block_gemm needs block_shape (bn, bk)")
        bn_q, bk_q = (int(x) for x in spec.block_shape)
        op = "fp8e4nv" if spec.dtype == "fp8_w8a8" else "i8"
        out = out_type(spec, "bf16")
        nk = cdiv(k, bk_q)
        args = [
            # A (M, K), B (N, K), C (M, N), As (M, K/bk), Bs (N/bn, K/bk)
            ptr("A", op), ptr("B", op), ptr("C", out), ptr("As", "fp32"), ptr("Bs", "fp32"),
            int_("M", m), int_("N", n), int_("K", k), int_("group_n", bn_q), int_("group_k", bk_q),
            int_("stride_am", k), int_("stride_ak", 1),
            int_("stride_bk", 1), int_("stride_bn", k),
            int_("stride_cm", n), int_("stride_cn", 1),
            int_("stride_As_m", nk), int_("stride_As_k", 1),
            int_("stride_Bs_k", 1), int_("stride_Bs_n", nk),
            const("BLOCK_SIZE_M", tile["BLOCK_SIZE_M"]), const("BLOCK_SIZE_N", tile["BLOCK_SIZE_N"]),
            const("BLOCK_SIZE_K", tile["BLOCK_SIZE_K"]), const("GROUP_SIZE_M", tile.get("GROUP_SIZE_M", 1)),
        ]
        mod, fn = self.reference
        return LaunchPlan("block_gemm", mod, fn, tuple(args), spec.num_warps, spec.num_stages, options(spec))

    def table_variants(self, meta, tile: Mapping[str, int], num_warps: int, num_stages: int, arch: str,
                       engine: str | None) -> tuple[Variant, ...]:
        from tilefit.dtypes import path_of_file_dtype

        path = path_of_file_dtype(meta.dtype)
        if path is None:
            return ()
        if meta.dtype == "fp8_w8a8_channelwise":
            # SGLang's triton_scaled_mm: another kernel (tilefit.kernels.scaled_mm), no GROUP_SIZE_M
            plain = {k: v for k, v in tile.items() if k != "GROUP_SIZE_M"}
            return (Variant("", make_spec("scaled_mm", path, plain, num_warps=num_warps, num_stages=num_stages,
                                          quant="per_channel")),)
        return (Variant("", make_spec(self.name, path, tile, num_warps=num_warps, num_stages=num_stages,
                                      quant="block", block_shape=meta.block_shape)),)

    def launch_key(self, meta, arch, engine):
        """Nothing of an entry but its tile numbers, warps and stages changes its kernel."""
        return _tile_only

    def validation_specs(self) -> list[KernelSpec]:
        k = self.name
        P = dict(M=256, N=4096, K=7168)
        return [
            make_spec(k, "fp8_w8a8", _t(64, 128, 128, 32), num_warps=4, num_stages=3, block_shape=(128, 128), problem=P),
            make_spec(k, "fp8_w8a8", _t(128, 128, 128, 32), num_warps=4, num_stages=5, block_shape=(128, 128),
                      problem=P),
            make_spec(k, "int8_w8a8", _t(64, 128, 128, 32), num_warps=4, num_stages=3, block_shape=(128, 128),
                      problem=P),
        ]


def _tile_only(tile, entry):
    return None, tile
