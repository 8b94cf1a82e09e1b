"""Realistic inputs for benchmarking one fused-MoE table entry on a GPU.

A table is for one GEMM shape: ``E`` experts, the GEMM's ``N`` and ``K`` (for the gate/up GEMM
``N = 2 * intermediate`` and ``K = hidden``; for SGLang's ``_down`` tables ``N = hidden`` and
``K = intermediate``), ``top_k`` experts per token, a dtype path and its quantisation. A batch
of ``M`` tokens is routed to ``top_k`` distinct experts drawn uniformly at random with softmax
weights (fixed seed), the way the engines' tuners do it. Weights and activations are random
normal, quantised like the engine quantises them.

The reference result is computed once per workload in fp32 from the dequantised inputs (TF32
off), so every candidate config is checked against the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

TOLERANCE = {"fp16": 1e-2, "bf16": 1e-2, "fp32": 1e-2, "fp8_w8a8": 2e-2, "int8_w8a8": 2e-2, "int8_w8a16": 2e-2}


@dataclass(frozen=True)
class MoEShape:
    E: int
    N: int  # the GEMM's N (gate/up: 2 x intermediate)
    K: int
    top_k: int
    dtype: str = "bf16"  # fp16, bf16, fp8_w8a8, int8_w8a8, int8_w8a16
    quant: str = "none"  # none, per_tensor, per_channel, block
    block_shape: tuple[int, int] | None = None

    def describe(self) -> str:
        q = f", {self.quant}" if self.quant != "none" else ""
        return f"E={self.E} N={self.N} K={self.K} top_k={self.top_k} {self.dtype}{q}"


_WEIGHTS: dict = {}


def _weights(shape: MoEShape, device: str, seed: int, materialize: bool):
    """Quantised weights (and their scales) of a shape: built once per process and shared by
    every batch size, so a sweep over M holds one copy (E x N x K is hundreds of MB)."""
    import torch

    from tilefit.kernels import checks

    key = (shape, device, seed, materialize)
    hit = _WEIGHTS.get(key)
    if hit is not None:
        return hit
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    if not materialize:  # compile-only: the right dtypes and strides, no values
        dt = {"fp16": torch.float16, "fp32": torch.float32}.get(shape.dtype, torch.bfloat16)
        if shape.dtype == "fp8_w8a8":
            dt = torch.float8_e4m3fn
        elif shape.dtype in ("int8_w8a8", "int8_w8a16"):
            dt = torch.int8
        B = torch.empty((shape.E, shape.N, shape.K), dtype=dt, device=device)
        out = (B, None)
    elif shape.dtype in ("fp16", "bf16", "fp32"):
        dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[shape.dtype]
        B = torch.empty((shape.E, shape.N, shape.K), dtype=dt, device=device)
        for e in range(shape.E):  # one expert at a time keeps fp32 temporaries small
            B[e] = (torch.randn((shape.N, shape.K), generator=gen, device=device) / shape.K ** 0.5).to(dt)
        out = (B, None)
    else:
        w = torch.randn((shape.E, shape.N, shape.K), generator=gen, device=device, dtype=torch.bfloat16)
        w = w / shape.K ** 0.5
        kind = "fp8" if shape.dtype == "fp8_w8a8" else "int8"
        quant = shape.quant if shape.quant not in ("none",) else "per_tensor"
        if shape.dtype == "int8_w8a16":
            quant = "per_channel"
        bs = list(shape.block_shape) if shape.block_shape else None
        out = checks.quant_weight(w, kind, quant, bs)
        del w
    _WEIGHTS[key] = out
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return out


class MoEWorkload:
    """Inputs and reference for one (shape, M) on one device. ``materialize=False`` allocates
    inputs without values, for compile-only launches."""

    def __init__(self, shape: MoEShape, M: int, device: str = "cuda", seed: int = 0, materialize: bool = True):
        import torch

        from tilefit.kernels import checks

        self.shape, self.M, self.device = shape, M, device
        gen = torch.Generator().manual_seed(seed)
        a = torch.randn((M, shape.K), generator=gen)
        B_all, B_scale_all = _weights(shape, device, seed, materialize)
        logits = torch.rand((M, shape.E), generator=gen)
        ids = torch.argsort(logits, dim=-1)[:, : shape.top_k]  # distinct experts, uniform
        weights = torch.softmax(torch.randn((M, shape.top_k), generator=gen), dim=-1)
        self.topk_ids = ids.to(torch.int32).to(device)
        self.topk_weights = weights.float().to(device)
        self.kw: dict = {}
        if shape.dtype in ("fp16", "bf16", "fp32"):
            dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[shape.dtype]
            self.A, self.B = a.to(dt).to(device), B_all
            self.ref_kw = {}
        elif shape.dtype in ("fp8_w8a8", "int8_w8a8"):
            kind = "fp8" if shape.dtype == "fp8_w8a8" else "int8"
            quant = shape.quant if shape.quant != "none" else "per_tensor"
            bs = list(shape.block_shape) if shape.block_shape else None
            A, A_scale = checks.quant_act(a.to(device), kind, quant, bs)
            B = B_all
            B_scale = B_scale_all if B_scale_all is not None else torch.ones(
                _scale_shape(shape, quant), dtype=torch.float32, device=device)
            self.A, self.B = A, B
            self.kw = dict(A_scale=A_scale, B_scale=B_scale, use_fp8_w8a8=kind == "fp8",
                           use_int8_w8a8=kind == "int8", per_channel_quant=quant == "per_channel",
                           block_shape=bs if quant == "block" else None)
            self.ref_kw = dict(A_scale=A_scale, B_scale=B_scale, quant=quant, block_shape=bs)
        elif shape.dtype == "int8_w8a16":
            self.A = a.to(torch.bfloat16).to(device)
            self.B = B_all
            B_scale = (B_scale_all if B_scale_all is not None else torch.ones(
                (shape.E, shape.N), dtype=torch.float32, device=device)).reshape(shape.E, shape.N).contiguous()
            self.kw = dict(B_scale=B_scale, use_int8_w8a16=True)
            self.ref_kw = dict(B_scale=B_scale, quant="per_channel")
        else:
            raise ValueError(f"no workload for dtype path {shape.dtype!r}")
        self._ref = None
        self._aligned: dict[int, tuple] = {}

    @property
    def reference(self):
        """fp32 result from the dequantised inputs (computed on first use, then kept)."""
        if self._ref is None:
            import torch

            from tilefit.kernels.fused_moe import kernel as fm

            prev = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = False
            try:
                self._ref = fm.fused_moe_gemm_ref(self.A, self.B, self.topk_weights, self.topk_ids,
                                                  **self.ref_kw).float()
            finally:
                torch.backends.cuda.matmul.allow_tf32 = prev
        return self._ref

    def prepare(self, config: dict, kernel=None):
        """Everything a launch needs that does not depend on timing: the aligned token order and
        the output buffer, so the timed call is the kernel alone (as in the engines' tuners).
        ``kernel`` replaces the launched kernel (the CPU compile workers pass a compile-only one)."""
        import torch

        from tilefit.kernels.fused_moe import kernel as fm

        out_dtype = self.A.dtype if self.A.dtype in (torch.float16, torch.bfloat16, torch.float32) \
            else torch.bfloat16
        C = torch.empty((self.M, self.shape.top_k, self.shape.N), dtype=out_dtype, device=self.device)
        bm = config["BLOCK_SIZE_M"]
        if bm not in self._aligned:  # the token order depends only on BLOCK_SIZE_M
            self._aligned[bm] = fm.moe_align_block_size(self.topk_ids, bm, self.shape.E)
        sorted_ids, expert_ids, total = self._aligned[bm]
        weights = self.topk_weights.reshape(-1).contiguous()
        compute = fm.triton_dtype(out_dtype)

        def launch():
            fm.invoke_fused_moe_kernel(self.A, self.B, C, self.kw.get("A_scale"), self.kw.get("B_scale"), weights,
                                       sorted_ids, expert_ids, total, False, self.shape.top_k, config, compute,
                                       use_fp8_w8a8=self.kw.get("use_fp8_w8a8", False),
                                       use_int8_w8a8=self.kw.get("use_int8_w8a8", False),
                                       use_int8_w8a16=self.kw.get("use_int8_w8a16", False),
                                       per_channel_quant=self.kw.get("per_channel_quant", False),
                                       block_shape=self.kw.get("block_shape"), kernel=kernel)
            return C

        return launch, C

    def error(self, C) -> float:
        out = C.float()
        ref = self.reference
        if not bool(out.isfinite().all()):
            return float("inf")
        return float((out - ref).norm() / ref.norm().clamp_min(1e-12))

    @property
    def tolerance(self) -> float:
        return TOLERANCE.get(self.shape.dtype, 2e-2)


def _scale_shape(shape: MoEShape, quant: str) -> tuple:
    if quant == "per_channel":
        return (shape.E, shape.N, 1)
    if quant == "block" and shape.block_shape:
        bn, bk = shape.block_shape
        return (shape.E, -(-shape.N // bn), -(-shape.K // bk))
    return (shape.E,)
