"""A kernel launch as data: :class:`KernelSpec` -> the argument list our reference kernel gets.

The exact estimator compiles a reference kernel ahead of time. To get the kernel the engine would
get, it must see the arguments the engine's launcher passes, because Triton specialises a compile
on them at launch:

* a pointer becomes ``*<element type>``, 16-byte aligned (``tt.divisibility 16``);
* an integer equal to 1 becomes the constant 1 (strides of contiguous dimensions), an integer
  divisible by 16 gets ``tt.divisibility 16``, others are plain ``i32``/``i64``;
* ``None`` becomes a constant ``None`` (unused scale pointers), floats are ``fp32``, bools ``u1``;
* ``tl.constexpr`` parameters are compile-time constants.

This module describes each argument (:class:`Arg`) and leaves the specialisation to Triton
itself (``tilefit.smem.exact`` feeds the values to Triton's own launch specialiser), so the rules
stay those of the installed Triton. It imports neither triton nor torch.

The argument lists follow the engines' launchers (vLLM ``invoke_fused_moe_triton_kernel`` /
SGLang ``invoke_fused_moe_kernel`` for the MoE kernels, vLLM ``w8a8_triton_block_scaled_mm`` for
the block GEMM, vLLM ``_decode_grouped_att_m_fwd`` for MLA decode): which tensor each pointer is,
its layout, and so which strides are 1, 0, or some multiple of 16.

Policy the launcher of one engine applies before the launch (vLLM's clamp of BLOCK_SIZE_K to the
quantisation block, its swap of A and B: :mod:`tilefit.serving.launch`) is *not* applied here: a
spec names the tile that is launched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..dtypes import on_arch, triton_type
from .spec import KernelSpec

# kernel name -> (module, function) of our reference kernel. Paths relative to the package root
# (``linter/`` == ``tilefit``) so the cache can hash the kernel sources without importing them.
KERNEL_FUNCTIONS: Mapping[str, tuple[str, str]] = {
    "fused_moe": ("tilefit.kernels.fused_moe", "fused_moe_kernel"),
    "fused_moe_wna16": ("tilefit.kernels.fused_moe_wna16", "fused_moe_wna16_kernel"),
    "block_gemm": ("tilefit.kernels.block_gemm", "w8a8_block_matmul_kernel"),
    "mla_decode": ("tilefit.kernels.mla_decode", "mla_decode_stage1_kernel"),
}
KERNEL_SOURCES: Mapping[str, str] = {
    "fused_moe": "kernels/fused_moe.py",
    "fused_moe_wna16": "kernels/fused_moe_wna16.py",
    "block_gemm": "kernels/block_gemm.py",
    "mla_decode": "kernels/mla_decode.py",
}

# Entries of ``KernelSpec.extra`` that are backend compile options rather than kernel arguments.
BACKEND_OPTIONS = frozenset({
    "num_ctas", "maxnreg", "waves_per_eu", "matrix_instr_nonkdim", "kpack", "instruction_sched_variant",
})

ARG_KINDS = ("ptr", "int", "float", "bool", "none", "constexpr", "dtype")

@dataclass(frozen=True)
class Arg:
    """One launch argument.

    ``kind``: ``ptr`` (``value`` is the element type, e.g. ``"fp16"``; the pointer is 16-byte
    aligned), ``int`` (``value`` the integer the launcher passes), ``float``, ``bool``, ``none``
    (a ``None`` argument, a constant), ``constexpr`` (a ``tl.constexpr`` value: int, bool, float
    or str) or ``dtype`` (a ``tl.constexpr`` holding a Triton dtype, ``value`` its name).
    """

    name: str
    kind: str
    value: object = None

    def __post_init__(self) -> None:
        if self.kind not in ARG_KINDS:
            raise ValueError(f"unknown argument kind {self.kind!r}")


def _ptr(name: str, ty: str | None) -> Arg:
    return Arg(name, "none") if ty is None else Arg(name, "ptr", triton_type(ty))


def _int(name: str, value: int) -> Arg:
    return Arg(name, "int", int(value))


def _const(name: str, value: object) -> Arg:
    return Arg(name, "constexpr", value)


def _dtype(name: str, ty: str) -> Arg:
    return Arg(name, "dtype", triton_type(ty))


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a compile of one reference kernel needs, as plain data."""

    kernel: str
    module: str
    function: str
    args: tuple[Arg, ...]
    num_warps: int
    num_stages: int
    options: tuple[tuple[str, object], ...] = ()

    @property
    def threads(self) -> int:
        return self.num_warps * 32

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)

    def arg_dict(self) -> dict[str, Arg]:
        return {a.name: a for a in self.args}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()


def _extra(spec: KernelSpec) -> dict[str, object]:
    return dict(spec.extra)


def _options(spec: KernelSpec) -> tuple[tuple[str, object], ...]:
    return tuple(sorted((k, v) for k, v in spec.extra if k in BACKEND_OPTIONS))


def _require(spec: KernelSpec, *names: str) -> dict[str, int]:
    tile = spec.tile_dict
    missing = [n for n in names if n not in tile]
    if missing:
        raise ValueError(f"{spec.kernel}: tile lacks {', '.join(missing)} ({spec.key()})")
    return tile


def _out_type(spec: KernelSpec, default: str) -> str:
    return triton_type(str(_extra(spec).get("out_dtype", default)))


# --------------------------------------------------------------------------------------------
# fused MoE


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


def _moe_problem(spec: KernelSpec) -> dict[str, int]:
    p = spec.problem_dict
    return {
        "N": p.get("N", 4096),
        "K": p.get("K", 4096),
        "top_k": p.get("top_k", 8),
        "E": p.get("E", 8),
        "M": p.get("M", 256),
    }


def _fused_moe(spec: KernelSpec) -> LaunchPlan:
    tile = _require(spec, "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
    bm, bn, bk = tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"], tile["BLOCK_SIZE_K"]
    p = _moe_problem(spec)
    n, k, top_k, e, m = p["N"], p["K"], p["top_k"], p["E"], p["M"]
    extra = _extra(spec)
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
    out = _out_type(spec, act)
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
            nk, nn = _cdiv(k, group_k), _cdiv(n, group_n)
            s_am, s_ak = nk, 1
            s_be, s_bk, s_bn = nn * nk, 1, nk
        # per-tensor: A_scale (1,), B_scale (E,): every stride 0
    elif w8a16:  # B_scale (E, N)
        b_scale = "fp32" if extra.get("scale_dtype") is None else str(extra["scale_dtype"])
        s_be, s_bk, s_bn = n, 0, 1

    args = [
        _ptr("a_ptr", a_ty), _ptr("b_ptr", b_ty), _ptr("c_ptr", out),
        _ptr("a_scale_ptr", a_scale), _ptr("b_scale_ptr", b_scale),
        _ptr("topk_weights_ptr", "fp32"), _ptr("sorted_token_ids_ptr", "i32"),
        _ptr("expert_ids_ptr", "i32"), _ptr("num_tokens_post_padded_ptr", "i32"),
        _int("N", n), _int("K", k), _int("EM", em), _int("num_valid_tokens", a_rows * top_k),
        # A (M, K); B (E, N, K): stride(0), stride(2), stride(1); C (M, top_k, N): stride(1), stride(2)
        _int("stride_am", k), _int("stride_ak", 1),
        _int("stride_be", n * k), _int("stride_bk", 1), _int("stride_bn", k),
        _int("stride_cm", n), _int("stride_cn", 1),
        _int("stride_asm", s_am), _int("stride_ask", s_ak),
        _int("stride_bse", s_be), _int("stride_bsk", s_bk), _int("stride_bsn", s_bn),
        _const("group_n", group_n), _const("group_k", group_k),
        _const("BLOCK_SIZE_M", bm), _const("BLOCK_SIZE_N", bn), _const("BLOCK_SIZE_K", bk),
        _const("GROUP_SIZE_M", tile.get("GROUP_SIZE_M", 1)),
        _const("MUL_ROUTED_WEIGHT", bool(extra.get("mul_routed_weight", False))),
        _const("top_k", top_k),
        _dtype("compute_type", compute),
        _const("use_fp8_w8a8", fp8), _const("use_int8_w8a8", int8),
        _const("use_int8_w8a16", w8a16),
        _const("per_channel_quant", quant == "per_channel" and (fp8 or int8)),
        _const("SWAP_AB", bool(spec.swap_ab)),
    ]
    mod, fn = KERNEL_FUNCTIONS["fused_moe"]
    return LaunchPlan("fused_moe", mod, fn, tuple(args), spec.num_warps, spec.num_stages, _options(spec))


def _fused_moe_wna16(spec: KernelSpec) -> LaunchPlan:
    tile = _require(spec, "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
    bm, bn, bk = tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"], tile["BLOCK_SIZE_K"]
    p = _moe_problem(spec)
    n, k, top_k, e, m = p["N"], p["K"], p["top_k"], p["E"], p["M"]
    extra = _extra(spec)
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
    out = _out_type(spec, act)
    compute = "fp16" if out == "fp16" else "bf16"
    kb = k // 2 if int4 else k  # packed K of B
    ng = _cdiv(k, group)
    em = moe_padded_tokens(m, top_k, e, bm)
    # zero points: int4 packed two per byte along N, (E, N/2, K/g); int8 (E, N, K/g)
    zn = n // 2 if int4 else n
    args = [
        _ptr("a_ptr", act), _ptr("b_ptr", "u8"), _ptr("c_ptr", out),
        _ptr("b_scale_ptr", compute), _ptr("b_zp_ptr", "u8" if has_zp else None),
        _ptr("topk_weights_ptr", "fp32"), _ptr("sorted_token_ids_ptr", "i32"),
        _ptr("expert_ids_ptr", "i32"), _ptr("num_tokens_post_padded_ptr", "i32"),
        _int("N", n), _int("K", k), _int("EM", em), _int("num_valid_tokens", m * top_k),
        _int("stride_am", k), _int("stride_ak", 1),
        _int("stride_be", n * kb), _int("stride_bk", 1), _int("stride_bn", kb),
        _int("stride_cm", n), _int("stride_cn", 1),
        # B_scale (E, N, K/g): stride(0), stride(2), stride(1)
        _int("stride_bse", n * ng), _int("stride_bsk", 1), _int("stride_bsn", ng),
        _int("stride_bze", zn * ng if has_zp else 0), _int("stride_bzk", 1 if has_zp else 0),
        _int("stride_bzn", ng if has_zp else 0),
        _const("block_k_diviable", k % bk == 0),
        _const("group_size", group),
        _const("BLOCK_SIZE_M", bm), _const("BLOCK_SIZE_N", bn), _const("BLOCK_SIZE_K", bk),
        _const("GROUP_SIZE_M", tile.get("GROUP_SIZE_M", 1)),
        _const("MUL_ROUTED_WEIGHT", bool(extra.get("mul_routed_weight", False))),
        _const("top_k", top_k),
        _dtype("compute_type", compute),
        _const("has_zp", has_zp),
        _const("use_int4_w4a16", int4), _const("use_int8_w8a16", not int4),
    ]
    mod, fn = KERNEL_FUNCTIONS["fused_moe_wna16"]
    return LaunchPlan("fused_moe_wna16", mod, fn, tuple(args), spec.num_warps, spec.num_stages,
                      _options(spec))


# --------------------------------------------------------------------------------------------
# block-scaled W8A8 GEMM


def _block_gemm(spec: KernelSpec) -> LaunchPlan:
    tile = _require(spec, "BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")
    p = spec.problem_dict
    m, n, k = p.get("M", 256), p.get("N", 4096), p.get("K", 4096)
    if spec.dtype not in ("fp8_w8a8", "int8_w8a8"):
        raise ValueError(f"block_gemm runs fp8_w8a8/int8_w8a8, not {spec.dtype}")
    if not spec.block_shape:
        raise ValueError("block_gemm needs block_shape (bn, bk)")
    bn_q, bk_q = (int(x) for x in spec.block_shape)
    op = "fp8e4nv" if spec.dtype == "fp8_w8a8" else "i8"
    out = _out_type(spec, "bf16")
    nk = _cdiv(k, bk_q)
    args = [
        # A (M, K), B (N, K), C (M, N), As (M, K/bk), Bs (N/bn, K/bk)
        _ptr("A", op), _ptr("B", op), _ptr("C", out), _ptr("As", "fp32"), _ptr("Bs", "fp32"),
        _int("M", m), _int("N", n), _int("K", k), _int("group_n", bn_q), _int("group_k", bk_q),
        _int("stride_am", k), _int("stride_ak", 1),
        _int("stride_bk", 1), _int("stride_bn", k),
        _int("stride_cm", n), _int("stride_cn", 1),
        _int("stride_As_m", nk), _int("stride_As_k", 1),
        _int("stride_Bs_k", 1), _int("stride_Bs_n", nk),
        _const("BLOCK_SIZE_M", tile["BLOCK_SIZE_M"]), _const("BLOCK_SIZE_N", tile["BLOCK_SIZE_N"]),
        _const("BLOCK_SIZE_K", tile["BLOCK_SIZE_K"]), _const("GROUP_SIZE_M", tile.get("GROUP_SIZE_M", 1)),
    ]
    mod, fn = KERNEL_FUNCTIONS["block_gemm"]
    return LaunchPlan("block_gemm", mod, fn, tuple(args), spec.num_warps, spec.num_stages, _options(spec))


# --------------------------------------------------------------------------------------------
# MLA decode, grouped stage 1


def mla_block_sizes(lk: int, lv: int) -> dict[str, int]:
    """BLOCK_DMODEL / BLOCK_DPE / BLOCK_DV the launcher derives from the head sizes."""
    if lk == 576:
        dmodel, dpe = 512, 64
    elif lk == 288:
        dmodel, dpe = 256, 32
    else:
        dmodel, dpe = _next_pow2(lk), 0
    return {"BLOCK_DMODEL": dmodel, "BLOCK_DPE": dpe, "BLOCK_DV": _next_pow2(lv)}


def _mla_decode(spec: KernelSpec) -> LaunchPlan:
    tile = spec.tile_dict
    p = spec.problem_dict
    lk, lv = p.get("Lk", 576), p.get("Lv", 512)
    blocks = mla_block_sizes(lk, lv)
    for name in ("BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV"):
        blocks[name] = tile.get(name, blocks[name])
    block_n, block_h = tile.get("BLOCK_N", 32), tile.get("BLOCK_H", 16)
    heads = p.get("num_heads", 16)
    kv_heads = p.get("num_kv_heads", 1)
    splits = p.get("NUM_KV_SPLITS", 4)
    page = p.get("PAGE_SIZE", 1)
    max_pages = p.get("max_pages", 512)
    q_ty = triton_type(spec.dtype if spec.dtype in ("bf16", "fp16", "fp32") else "bf16")
    kv_ty = triton_type(spec.kv_dtype or q_ty, auto=q_ty)
    logit_cap = float(_extra(spec).get("logit_cap", 0.0))
    kv_stride = kv_heads * lk  # K/V buffer (tokens, kv_heads, Lk); V is a view of its first Lv dims
    args = [
        _ptr("Q", q_ty), _ptr("K_Buffer", kv_ty), _ptr("V_Buffer", kv_ty),
        Arg("sm_scale", "float", 1.0 / (lk ** 0.5)),
        _ptr("Req_to_tokens", "i32"), _ptr("B_Seqlen", "i32"), _ptr("Att_Out", "fp32"),
        _ptr("K_scale", "fp32"),
        _int("stride_req_to_tokens_b", max_pages),
        _int("stride_qbs", heads * lk), _int("stride_qh", lk),
        _int("stride_buf_kbs", kv_stride), _int("stride_buf_kh", lk),
        _int("stride_buf_vbs", kv_stride), _int("stride_buf_vh", lk),
        # Att_Out (batch, heads, splits, Lv + 1)
        _int("stride_mid_ob", heads * splits * (lv + 1)), _int("stride_mid_oh", splits * (lv + 1)),
        _int("stride_mid_os", lv + 1),
        _const("kv_group_num", heads // kv_heads), _const("q_head_num", heads),
        _const("BLOCK_DMODEL", blocks["BLOCK_DMODEL"]), _const("BLOCK_DPE", blocks["BLOCK_DPE"]),
        _const("BLOCK_DV", blocks["BLOCK_DV"]), _const("BLOCK_N", block_n), _const("BLOCK_H", block_h),
        _const("NUM_KV_SPLITS", splits), _const("PAGE_SIZE", page),
        _const("logit_cap", logit_cap), _const("Lk", lk), _const("Lv", lv),
        _const("USE_FP8", kv_ty.startswith("fp8")),
    ]
    mod, fn = KERNEL_FUNCTIONS["mla_decode"]
    return LaunchPlan("mla_decode", mod, fn, tuple(args), spec.num_warps, spec.num_stages, _options(spec))


_BUILDERS = {
    "fused_moe": _fused_moe,
    "fused_moe_wna16": _fused_moe_wna16,
    "block_gemm": _block_gemm,
    "mla_decode": _mla_decode,
}


def adapt_to_arch(plan: LaunchPlan, arch: str) -> LaunchPlan:
    """The plan as launched on ``arch``: on MI300 (gfx94x) fp8 tensors are e4m3fnuz/e5m2fnuz."""
    args = tuple(Arg(a.name, a.kind, on_arch(str(a.value), arch)) if a.kind in ("ptr", "dtype") else a
                 for a in plan.args)
    if args == plan.args:
        return plan
    return LaunchPlan(plan.kernel, plan.module, plan.function, args, plan.num_warps, plan.num_stages,
                      plan.options)


def launch_plan(spec: KernelSpec) -> LaunchPlan:
    """The launch of ``spec``'s reference kernel as the engine's launcher would make it.

    Raises ``ValueError`` for a spec the kernel cannot run (a dtype path or quantisation mode
    the kernel has no code for, a missing tile size).
    """
    try:
        builder = _BUILDERS[spec.kernel]
    except KeyError:  # pragma: no cover - KernelSpec validates kernel names
        raise ValueError(f"no launch plan for kernel {spec.kernel!r}") from None
    return builder(spec)
