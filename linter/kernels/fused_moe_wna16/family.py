"""fused_moe_wna16: the weight-only group-quantised fused MoE (int4/int8 weights, zero points).

``fused_moe`` tables with ``int4_w4a16`` (and ``int8_w8a16`` with a group size) launch this kernel
(``tilefit.kernels.fused_moe``'s table variants). Its closed forms read the weight group size
``G`` instead of a block-quantisation block. Nothing here imports triton.
"""

from __future__ import annotations

from typing import Sequence

from tilefit.dtypes import triton_type
from tilefit.kernels.fused_moe.family import moe_padded_tokens, moe_problem
from tilefit.kernels.gemm import GemmFamily
from tilefit.kernels.plan import (LaunchPlan, cdiv, const, dtype_arg, extra_of, int_, options, out_type, ptr,
                                  require)
from tilefit.kernels.spec import KernelSpec, make_spec

DEFAULT_GROUP = 128


def _t(bm, bn, bk, g=1):
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=g)


class Family(GemmFamily):
    def launch_plan(self, spec: KernelSpec) -> LaunchPlan:
        tile = require(spec, "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
        bm, bn, bk = tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"], tile["BLOCK_SIZE_K"]
        p = moe_problem(spec)
        n, k, top_k, e, m = p["N"], p["K"], p["top_k"], p["E"], p["M"]
        extra = extra_of(spec)
        if spec.dtype not in ("int4_w4a16", "int8_w8a16"):
            raise ValueError(f"fused_moe_wna16 runs int4_w4a16/int8_w8a16, not {spec.dtype}")
        int4 = spec.dtype == "int4_w4a16"
        if spec.block_shape:
            group = int(spec.block_shape[1])
        else:
            group = int(extra.get("group_size", 128))
        if group <= 0:
            group = k  # channel-wise: one group spans K
        has_zp = bool(extra.get("has_zp", False))
        act = triton_type(str(extra.get("act_dtype", "bf16")))
        out = out_type(spec, act)
        compute = "fp16" if out == "fp16" else "bf16"
        kb = k // 2 if int4 else k  # packed K of B
        ng = cdiv(k, group)
        em = moe_padded_tokens(m, top_k, e, bm)
        # zero points: int4 packed two per byte along N, (E, N/2, K/g); int8 (E, N, K/g)
        zn = n // 2 if int4 else n
        args = [
            ptr("a_ptr", act), ptr("b_ptr", "u8"), ptr("c_ptr", out),
            ptr("b_scale_ptr", compute), ptr("b_zp_ptr", "u8" if has_zp else None),
            ptr("topk_weights_ptr", "fp32"), ptr("sorted_token_ids_ptr", "i32"),
            ptr("expert_ids_ptr", "i32"), ptr("num_tokens_post_padded_ptr", "i32"),
            int_("N", n), int_("K", k), int_("EM", em), int_("num_valid_tokens", m * top_k),
            int_("stride_am", k), int_("stride_ak", 1),
            int_("stride_be", n * kb), int_("stride_bk", 1), int_("stride_bn", kb),
            int_("stride_cm", n), int_("stride_cn", 1),
            # B_scale (E, N, K/g): stride(0), stride(2), stride(1)
            int_("stride_bse", n * ng), int_("stride_bsk", 1), int_("stride_bsn", ng),
            int_("stride_bze", zn * ng if has_zp else 0), int_("stride_bzk", 1 if has_zp else 0),
            int_("stride_bzn", ng if has_zp else 0),
            const("block_k_diviable", k % bk == 0),
            const("group_size", group),
            const("BLOCK_SIZE_M", bm), const("BLOCK_SIZE_N", bn), const("BLOCK_SIZE_K", bk),
            const("GROUP_SIZE_M", tile.get("GROUP_SIZE_M", 1)),
            const("MUL_ROUTED_WEIGHT", bool(extra.get("mul_routed_weight", False))),
            const("top_k", top_k),
            dtype_arg("compute_type", compute),
            const("has_zp", has_zp),
            const("use_int4_w4a16", int4), const("use_int8_w8a16", not int4),
        ]
        mod, fn = self.reference
        return LaunchPlan("fused_moe_wna16", mod, fn, tuple(args), spec.num_warps, spec.num_stages,
                          options(spec))

    def form_group(self, spec: KernelSpec) -> tuple[int, int, int]:
        gn, gk = spec.block_shape if spec.block_shape else (0, 0)
        group = int(gk) if gk else int(dict(spec.extra).get("group_size", DEFAULT_GROUP))
        if group <= 0:  # channel-wise: one group spans K
            group = spec.problem_dict.get("K", 4096)
        return 0, 0, group

    def applies(self, path, tile: Sequence[int]) -> bool:
        """The engines' wNa16 kernel needs BLOCK_SIZE_K to divide the group size or the reverse."""
        g = path.block_shape[1] if path.block_shape else DEFAULT_GROUP
        return tile[2] % g == 0 or g % tile[2] == 0

    def launch_case(self, spec: KernelSpec) -> dict:
        case = super().launch_case(spec)
        case["bits"] = 4 if spec.dtype == "int4_w4a16" else 8
        case["group_size"] = spec.block_shape[1] if spec.block_shape else DEFAULT_GROUP
        return case

    def validation_specs(self) -> list[KernelSpec]:
        P = dict(N=1536, K=2048, top_k=8)
        k = self.name
        return [
            make_spec(k, "int4_w4a16", _t(16, 64, 128), num_warps=4, num_stages=3, block_shape=(0, 128), problem=P),
            make_spec(k, "int4_w4a16", _t(64, 128, 128), num_warps=4, num_stages=4, block_shape=(0, 128), problem=P,
                      extra=(("has_zp", True),)),
            make_spec(k, "int8_w8a16", _t(32, 64, 64), num_warps=4, num_stages=3, block_shape=(0, 64), problem=P),
        ]
