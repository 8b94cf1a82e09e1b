"""fused_moe: the fused-MoE grouped GEMM, and the ``fused_moe`` config tables that launch it.

The launch plan follows the engines' launchers (vLLM ``invoke_fused_moe_triton_kernel``, SGLang
``invoke_fused_moe_kernel``): which tensor each pointer is, its layout, the strides they pass. A
``fused_moe`` table entry launches this kernel, or -- for group-quantised int4/int8 weights --
the ``fused_moe_wna16`` kernel (:meth:`Family.table_variants`). Nothing here imports triton.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from tilefit.dtypes import triton_type
from tilefit.kernels.gemm import GemmFamily
from tilefit.kernels.plan import (LaunchPlan, cdiv, const, dtype_arg, extra_of, int_, options, out_type, ptr,
                                  require)
from tilefit.kernels.spec import KernelSpec, Variant, make_spec
from tilefit.serving.launch import launch_block_k, swap_ab_tile, swaps_ab

# the group size an int4/int8 weight-only table is launched with when nothing says otherwise
WNA16_DEFAULT_GROUP = 128


def moe_padded_tokens(m: int, top_k: int, num_experts: int, block_m: int) -> int:
    """Length of ``sorted_token_ids`` after aligning every expert's rows to ``block_m``, then the
    ``EM`` the launcher passes (it caps EM for tiny batches)."""
    numel = m * top_k
    padded = numel + num_experts * (block_m - 1)
    if numel < num_experts:
        padded = min(numel * block_m, padded)
    em = padded
    if m < block_m:
        em = min(padded, m * top_k * block_m)
    return em


def moe_problem(spec: KernelSpec) -> dict[str, int]:
    p = spec.problem_dict
    return {
        "N": p.get("N", 4096),
        "K": p.get("K", 4096),
        "top_k": p.get("top_k", 8),
        "E": p.get("E", 8),
        "M": p.get("M", 256),
    }


def _quant_block(meta) -> tuple[int, int] | None:
    """The table's quantisation block (``block_shape``), None when it has none or a side is not positive."""
    block = meta.block_shape
    if block is not None and (block[0] <= 0 or block[1] <= 0):
        return None
    return block


def _t(bm, bn, bk, g=1):
    return dict(BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=g)


class Family(GemmFamily):
    # -- the analytic model ----------------------------------------------------------------------
    def form_dtypes(self, spec: KernelSpec) -> tuple[str, ...]:
        """SGLang's TMA launches (``extra["tma"]``) have their own forms (``bf16+tma_b``): the
        descriptor loads add barriers, and no plain form answers for them."""
        tma = dict(spec.extra).get("tma")
        if tma:
            return (f"{spec.dtype}+tma_{tma}",)
        return super().form_dtypes(spec)

    def form_dtype(self, path) -> str:
        tma = getattr(path, "tma", None)
        return f"{path.dtype}+tma_{tma}" if tma else path.dtype

    def launch_plan(self, spec: KernelSpec) -> LaunchPlan:
        tile = require(spec, "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
        bm, bn, bk = tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"], tile["BLOCK_SIZE_K"]
        p = moe_problem(spec)
        n, k, top_k, e, m = p["N"], p["K"], p["top_k"], p["E"], p["M"]
        extra = extra_of(spec)
        dtype, quant = spec.dtype, spec.quant
        if dtype == "int4_w4a16" or (dtype == "int8_w8a16" and quant == "group"):
            raise ValueError(f"{dtype} with group quantisation runs fused_moe_wna16, not fused_moe")

        fp8 = dtype == "fp8_w8a8"
        int8 = dtype == "int8_w8a8"
        w8a16 = dtype == "int8_w8a16"
        if fp8 or int8:
            if quant == "none":
                quant = "per_tensor"
            if quant not in ("per_tensor", "per_channel", "block"):
                raise ValueError(f"{dtype}: quantisation {quant!r} not supported by fused_moe")
            if quant == "block" and not spec.block_shape:
                raise ValueError(f"{dtype} block quantisation needs block_shape (bn, bk)")
        elif w8a16:
            quant = "per_channel"
        elif quant != "none":
            raise ValueError(f"dtype {dtype} takes no quantisation (got {quant!r})")

        act = {"fp16": "fp16", "fp32": "fp32"}.get(dtype, "bf16")
        act = triton_type(str(extra.get("act_dtype", act)))
        out = out_type(spec, act)
        a_ty = {"fp8_w8a8": "fp8e4nv", "int8_w8a8": "i8"}.get(dtype, act)
        b_ty = {"fp8_w8a8": "fp8e4nv", "int8_w8a8": "i8", "int8_w8a16": "i8"}.get(dtype, act)
        compute = {"fp32": "fp32", "fp16": "fp16"}.get(out, "bf16")

        a_rows = m  # A is (M, K); the second GEMM of a MoE passes (M * top_k, I) with top_k = 1
        em = moe_padded_tokens(m, top_k, e, bm)

        # scale tensors, their shapes decide the strides the launcher passes
        a_scale = b_scale = None
        s_am = s_ak = s_be = s_bk = s_bn = 0
        group_n = group_k = 0
        if fp8 or int8:
            a_scale = b_scale = "fp32"
            if quant == "per_channel":  # A_scale (M, 1), B_scale (E, N, 1)
                s_am, s_ak = 1, 1
                s_be, s_bk, s_bn = n, 1, 1
            elif quant == "block":  # A_scale (M, K/bk), B_scale (E, N/bn, K/bk)
                group_n, group_k = (int(x) for x in spec.block_shape)
                nk, nn = cdiv(k, group_k), cdiv(n, group_n)
                s_am, s_ak = nk, 1
                s_be, s_bk, s_bn = nn * nk, 1, nk
            # per-tensor: A_scale (1,), B_scale (E,): every stride 0
        elif w8a16:  # B_scale (E, N)
            b_scale = "fp32" if extra.get("scale_dtype") is None else str(extra["scale_dtype"])
            s_be, s_bk, s_bn = n, 0, 1

        args = [
            ptr("a_ptr", a_ty), ptr("b_ptr", b_ty), ptr("c_ptr", out),
            ptr("a_scale_ptr", a_scale), ptr("b_scale_ptr", b_scale),
            ptr("topk_weights_ptr", "fp32"), ptr("sorted_token_ids_ptr", "i32"),
            ptr("expert_ids_ptr", "i32"), ptr("num_tokens_post_padded_ptr", "i32"),
            int_("N", n), int_("K", k), int_("EM", em), int_("num_valid_tokens", a_rows * top_k),
            # A (M, K); B (E, N, K): stride(0), stride(2), stride(1); C (M, top_k, N): stride(1), stride(2)
            int_("stride_am", k), int_("stride_ak", 1),
            int_("stride_be", n * k), int_("stride_bk", 1), int_("stride_bn", k),
            int_("stride_cm", n), int_("stride_cn", 1),
            int_("stride_asm", s_am), int_("stride_ask", s_ak),
            int_("stride_bse", s_be), int_("stride_bsk", s_bk), int_("stride_bsn", s_bn),
            const("group_n", group_n), const("group_k", group_k),
            const("BLOCK_SIZE_M", bm), const("BLOCK_SIZE_N", bn), const("BLOCK_SIZE_K", bk),
            const("GROUP_SIZE_M", tile.get("GROUP_SIZE_M", 1)),
            const("MUL_ROUTED_WEIGHT", bool(extra.get("mul_routed_weight", False))),
            const("top_k", top_k),
            dtype_arg("compute_type", compute),
            const("use_fp8_w8a8", fp8), const("use_int8_w8a8", int8),
            const("use_int8_w8a16", w8a16),
            const("per_channel_quant", quant == "per_channel" and (fp8 or int8)),
            const("SWAP_AB", bool(spec.swap_ab)),
        ]
        mod, fn = self.reference
        return LaunchPlan("fused_moe", mod, fn, tuple(args), spec.num_warps, spec.num_stages, options(spec))

    # -- config tables ---------------------------------------------------------------------------
    def table_variants(self, meta, tile: Mapping[str, int], num_warps: int, num_stages: int, arch: str,
                       engine: str | None) -> tuple[Variant, ...]:
        """One entry can feed two kernels: an ``int8_w8a16`` table serves both the per-channel
        path (this kernel with int8 weights) and the group-quantised path (the wNa16 kernel), and
        the file name does not say which. The engines' launch adjustments apply: vLLM's clamp of
        BLOCK_SIZE_K to the quantisation block and its swap of A and B on sm_90."""
        from tilefit.dtypes import path_of_file_dtype

        path = path_of_file_dtype(meta.dtype)
        if path is None:
            return ()
        block = _quant_block(meta)
        tile = dict(tile)
        if block is not None:
            tile["BLOCK_SIZE_K"] = launch_block_k(engine, tile["BLOCK_SIZE_K"], block)

        def plain(dtype: str, quant: str, label: str = "") -> Variant:
            swap = swaps_ab(engine, dtype, arch, tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"])
            return Variant(label, make_spec(self.name, dtype, tile, num_warps=num_warps, num_stages=num_stages,
                                            quant=quant, block_shape=block if quant == "block" else None,
                                            swap_ab=swap))

        def grouped(dtype: str, label: str = "") -> Variant:
            return Variant(label, make_spec("fused_moe_wna16", dtype, tile, num_warps=num_warps,
                                            num_stages=num_stages, quant="group",
                                            block_shape=(0, WNA16_DEFAULT_GROUP)))

        if path in ("fp8_w8a8", "int8_w8a8"):
            if block is not None:
                return (plain(path, "block"),)
            return (plain(path, "per_channel" if meta.per_channel_quant else "per_tensor"),)
        if path == "int4_w4a16":
            return (grouped(path),)
        if path == "int8_w8a16":
            return (plain(path, "per_channel", "per-channel int8 weights"),
                    grouped(path, f"group-quantised int8 weights (group {WNA16_DEFAULT_GROUP})"))
        return (plain(path, "none"),)

    def launch_key(self, meta, arch, engine):
        """The key: whether the tile is one the launch may swap (:func:`swap_ab_tile`, the half of
        :func:`swaps_ab` that reads the tile) and whether SGLang's ``USE_TMA`` is on
        (:meth:`engine_variants`); the tile: the entry's with BLOCK_SIZE_K as the engine launches it
        (:func:`launch_block_k`) where the table is block-quantised, as :meth:`table_variants` has it."""
        block = _quant_block(meta)
        block_k: dict[int, int] = {}  # the entry's BLOCK_SIZE_K -> the launch's

        def key(tile, entry):
            if block is not None:
                tile = dict(tile)
                bk = tile["BLOCK_SIZE_K"]
                launched = block_k.get(bk)
                if launched is None:
                    launched = block_k[bk] = launch_block_k(engine, bk, block)
                tile["BLOCK_SIZE_K"] = launched
            return (swap_ab_tile(tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"]), entry.get("USE_TMA") is True), tile

        return key

    def engine_variants(self, variants, entry, meta, engine, arch):
        """SGLang reads ``USE_TMA`` from the entry: true sends B (up projection) or A and B (a
        ``_down`` table's projection) through TMA descriptors, another kernel specialisation."""
        out = super().engine_variants(variants, entry, meta, engine, arch)
        if entry.get("USE_TMA") is not True:
            return out
        tma = "ab" if getattr(meta, "down", False) else "b"
        return tuple(Variant(v.label, v.spec.evolve(extra=tuple(sorted(dict(v.spec.extra, tma=tma).items()))))
                     if v.spec.engine == "sglang" and v.spec.kernel == self.name else v for v in out)

    # -- Python call sites -----------------------------------------------------------------------
    def callsite_spec(self, given: Mapping[str, Any], dtype_of, data_pointers: Sequence[str], num_warps: int,
                      num_stages: int) -> KernelSpec | None:
        """A launch of ``fused_moe_kernel`` (ours or the engines'), from its constexpr flags."""
        g = given
        tile = {k: int(g[k]) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M") if k in g}
        if g.get("use_fp8_w8a8"):
            dtype = "fp8_w8a8"
        elif g.get("use_int8_w8a8"):
            dtype = "int8_w8a8"
        elif g.get("use_int8_w8a16"):
            dtype = "int8_w8a16"
        else:
            first = data_pointers[0] if data_pointers else None
            dtype = {"fp16": "fp16", "fp32": "fp32"}.get(dtype_of(first) if first else "", "bf16")
        bs = None
        quant = "none"
        if g.get("group_n") and g.get("group_k"):
            bs, quant = (int(g["group_n"]), int(g["group_k"])), "block"
        elif g.get("per_channel_quant"):
            quant = "per_channel"
        return make_spec(self.name, dtype, tile, num_warps=num_warps, num_stages=num_stages, quant=quant,
                         block_shape=bs)

    # -- GPU validation --------------------------------------------------------------------------
    def validation_specs(self) -> list[KernelSpec]:
        P = dict(N=1536, K=2048, top_k=8)
        k = self.name
        return [
            make_spec(k, "fp16", _t(64, 128, 128), num_warps=4, num_stages=4, problem=P),
            make_spec(k, "fp16", _t(64, 128, 128), num_warps=4, num_stages=2, problem=P),
            make_spec(k, "bf16", _t(256, 128, 64), num_warps=8, num_stages=2, problem=P),
            make_spec(k, "bf16", _t(256, 256, 128), num_warps=4, num_stages=4, problem=P),
            make_spec(k, "bf16", _t(128, 256, 64), num_warps=8, num_stages=5, problem=P),
            make_spec(k, "fp32", _t(64, 64, 32), num_warps=4, num_stages=3, problem=P),
            make_spec(k, "fp8_w8a8", _t(128, 256, 128), num_warps=8, num_stages=4, quant="per_tensor", problem=P),
            make_spec(k, "fp8_w8a8", _t(128, 256, 128), num_warps=8, num_stages=5, quant="per_tensor", problem=P),
            make_spec(k, "fp8_w8a8", _t(64, 128, 128, 32), num_warps=4, num_stages=3, quant="block",
                      block_shape=(128, 128), problem=dict(N=4096, K=7168, top_k=8)),
            make_spec(k, "fp8_w8a8", _t(64, 128, 128), num_warps=4, num_stages=4, quant="per_channel",
                      problem=dict(N=1408, K=2816, top_k=8)),
            make_spec(k, "fp8_w8a8", _t(16, 128, 128), num_warps=4, num_stages=4, quant="per_tensor",
                      swap_ab=True, problem=P),
            make_spec(k, "fp8_w8a8", _t(16, 128, 128), num_warps=4, num_stages=4, quant="block",
                      block_shape=(128, 128), swap_ab=True, problem=P),
            make_spec(k, "int8_w8a8", _t(64, 128, 128), num_warps=4, num_stages=3, quant="per_channel",
                      problem=P),
            make_spec(k, "int8_w8a16", _t(64, 128, 64), num_warps=4, num_stages=3, problem=P),
        ]
