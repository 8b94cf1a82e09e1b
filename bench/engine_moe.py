"""The engine's own fused-MoE kernel, launched the way the engine launches it (bench harness).

``fused_moe_kernel`` is taken from an engine's source by AST (:func:`tilefit.pysource.extract.
extract_kernel`: a scratch module that imports only Triton; the engine is never imported) and
launched with the argument mapping of vLLM 0.33's ``invoke_fused_moe_triton_kernel`` for the
gate/up GEMM, restated here from reading it:

* ``EM`` = the sorted-ids buffer's length (``numel + E * (BM - 1)``, at most ``numel * BM``),
  cut to ``M * top_k * BM`` when ``M < BM``; the grid is ``cdiv(EM, BM) * cdiv(N, BN)``;
* **naive block assignment** (vLLM's low-latency path): when ``M * top_k * 4 <= E`` there is no
  token sort: ``sorted_token_ids`` is None, ``expert_ids`` is ``topk_ids`` flattened, one block
  per (token, expert) pair, ``EM = M * top_k * BM``;
* ``SWAP_AB`` for fp8 (per tensor and block) on compute capability 9.0 when ``BM < 64`` and
  ``BN >= 64``; ``USE_TD`` off (Hopper has no ``tile::gather4``); no bias; no routed-weight
  multiply in the gate/up GEMM;
* block quantisation clamps ``BLOCK_SIZE_K`` to ``min(block_shape)``.

Every kernel parameter is passed by name; a parameter this launcher does not know, without a
default, stops the run (a newer engine release changed the kernel).

The integer arguments are computed from the GEMM's geometry, not read off tensors, so a
compile-only launch (:meth:`EngineLaunch.warmup`, ``JITFunction.warmup``: compile, no launch)
can use tiny tensors and still hit exactly the specialisation the timed launch uses.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from tilefit.tune.workload import MoEShape, MoEWorkload

KERNEL_NAME = "fused_moe_kernel"


def load_kernel(path: str):
    """The ``@triton.jit`` kernel from a scratch module written by ``extract`` (a
    ``_tilefit_scratch_*.py`` file), or extracted now from an engine source file."""
    p = Path(path)
    if p.name.startswith("_tilefit_scratch_"):
        name = p.stem
        mod = sys.modules.get(name)
        if mod is None:
            spec = importlib.util.spec_from_file_location(name, p)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        return getattr(mod, KERNEL_NAME)
    from tilefit.pysource.extract import extract_kernel

    return getattr(extract_kernel(str(p), KERNEL_NAME).load(), KERNEL_NAME)


def extract(source: str, folder: str) -> Path:
    """Write the scratch module of the engine's kernel into ``folder`` (for carrying to a GPU
    machine without the engine's tree); returns its path."""
    from tilefit.pysource.extract import extract_kernel

    return extract_kernel(source, KERNEL_NAME).write(folder)


def naive_assignment(M: int, shape: MoEShape) -> bool:
    """vLLM's ``naive_block_assignment`` (no expert map, weights on the GPU, not wna16)."""
    return M * shape.top_k * 4 <= shape.E


def sorted_length(M: int, shape: MoEShape, bm: int) -> int:
    """Length of ``moe_align_block_size``'s sorted-ids buffer (no ``pad_sorted_ids``)."""
    numel = M * shape.top_k
    n = numel + shape.E * (bm - 1)
    if numel < shape.E:
        n = min(numel * bm, n)
    return n


def launch_ints(shape: MoEShape, M: int, config: dict, capability: int = 90) -> dict:
    """Every non-pointer argument of the launch, by parameter name, plus ``grid``."""
    bm, bn = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"]
    bk = config["BLOCK_SIZE_K"]
    from tilefit.serving.launch import clamp_block_k, swap_ab_applies

    fp8 = shape.dtype == "fp8_w8a8"
    block = shape.block_shape if shape.quant == "block" else None
    bk = clamp_block_k(bk, block)
    numel = M * shape.top_k
    naive = naive_assignment(M, shape)
    if naive:
        em = numel * bm
    else:
        em = sorted_length(M, shape, bm)
        if M < bm:
            em = min(em, M * shape.top_k * bm)
    N, K = shape.N, shape.K
    a_s = b_s = (0, 0)
    b_se = 0
    if fp8 and block is not None:
        gk, gn = -(-K // block[1]), -(-N // block[0])
        a_s = (gk, 1)  # A_scale (M, K/bk), row-major
        b_se, b_s = gn * gk, (1, gk if gn > 1 else 0)  # B_scale (E, N/bn, K/bk): bse, bsk, bsn
    elif fp8:
        b_se = 1  # B_scale (E,)
    swap = swap_ab_applies(shape.dtype, f"sm_{capability}", bm, bn)
    return dict(
        grid=(-(-em // bm) * -(-N // bn),),
        N=N, K=K, EM=em, num_valid_tokens=numel,
        stride_am=K, stride_ak=1, stride_be=N * K, stride_bk=1, stride_bn=K, stride_cm=N, stride_cn=1,
        stride_asm=a_s[0], stride_ask=a_s[1], stride_bse=b_se, stride_bsk=b_s[0], stride_bsn=b_s[1],
        stride_bbe=0, stride_bbn=0,
        group_n=block[0] if block is not None else 0, group_k=block[1] if block is not None else 0,
        naive_block_assignment=naive,
        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=config.get("GROUP_SIZE_M", 1), SPLIT_K=1,
        MUL_ROUTED_WEIGHT=False, top_k=shape.top_k, use_fp8_w8a8=fp8, use_int8_w8a8=False, use_int8_w8a16=False,
        per_channel_quant=False, HAS_BIAS=False, SWAP_AB=swap, USE_TD=False,
        num_warps=config.get("num_warps", 4), num_stages=config.get("num_stages", 3),
    )


def specialization(shape: MoEShape, M: int, config: dict, capability: int = 90) -> tuple:
    """What Triton specialises the compile on besides the config: integer divisibility by 16
    and equality with 1, the naive path, SWAP_AB (configs with equal tuples share a binary)."""
    ints = launch_ints(shape, M, config, capability)
    out = [ints["naive_block_assignment"], ints["SWAP_AB"], ints["BLOCK_SIZE_K"]]
    for k in ("N", "K", "EM", "num_valid_tokens", "stride_asm", "stride_bse", "stride_bsk", "stride_bsn"):
        v = ints[k]
        out.append((v % 16 == 0, v == 1))
    return tuple(out)


def check_parameters(kernel) -> None:
    """Raise when the kernel has a parameter without a default that this launcher does not pass."""
    probe = launch_ints(MoEShape(8, 64, 64, 2, "bf16"), 16, {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 64,
                                                               "BLOCK_SIZE_K": 64})
    known = (set(probe) - {"grid", "num_warps", "num_stages"}) | set(POINTERS) | {"compute_type"}
    missing = [p.name for p in _params(kernel) if p.name not in known and not p.has_default]
    if missing:
        raise RuntimeError(f"the engine kernel has parameters this launcher does not know: {missing}")


def _params(kernel) -> list:
    """The kernel's parameters (a JITFunction's, or the interpreter's wrapped function's)."""
    params = getattr(kernel, "params", None)
    if params is None and hasattr(kernel, "fn"):
        params = getattr(kernel.fn, "params", None)
    if params is None:
        import inspect

        from triton.runtime.jit import KernelParam

        fn = getattr(kernel, "fn", kernel)
        params = [KernelParam(i, p, False, False) for i, p in enumerate(inspect.signature(fn).parameters.values())]
    return list(params)


POINTERS = ("a_ptr", "b_ptr", "c_ptr", "b_bias_ptr", "a_scale_ptr", "b_scale_ptr", "topk_weights_ptr",
            "sorted_token_ids_ptr", "expert_ids_ptr", "num_tokens_post_padded_ptr")


@dataclass
class EngineLaunch:
    kernel: object
    shape: MoEShape
    M: int
    config: dict
    capability: int = 90

    def arguments(self, ptrs: dict) -> tuple[tuple, dict]:
        import triton.language as tl

        ints = launch_ints(self.shape, self.M, self.config, self.capability)
        grid = ints.pop("grid")
        kw = dict(ints)
        kw.update({p: ptrs.get(p) for p in POINTERS})
        kw["compute_type"] = tl.bfloat16
        names = {p.name for p in _params(self.kernel)}
        if names:
            kw = {k: v for k, v in kw.items() if k in names or k in ("num_warps", "num_stages")}
        return grid, kw

    def launch(self, ptrs: dict):
        grid, kw = self.arguments(ptrs)
        return self.kernel[grid](**kw)

    def warmup(self, ptrs: dict):
        grid, kw = self.arguments(ptrs)
        return self.kernel.warmup(grid=grid, **kw)


def tiny_pointers(shape: MoEShape, M: int, device: str = "cuda") -> dict:
    """Tensors of the right dtypes for a compile-only launch (values and sizes unused)."""
    import torch

    fp8 = shape.dtype == "fp8_w8a8"
    dt = torch.float8_e4m3fn if fp8 else {"fp16": torch.float16}.get(shape.dtype, torch.bfloat16)
    f32 = torch.empty(64, dtype=torch.float32, device=device)
    i32 = torch.empty(64, dtype=torch.int32, device=device)
    return dict(a_ptr=torch.empty(64, dtype=dt, device=device), b_ptr=torch.empty(64, dtype=dt, device=device),
                c_ptr=torch.empty(64, dtype=torch.bfloat16, device=device), b_bias_ptr=None,
                a_scale_ptr=f32 if fp8 else None, b_scale_ptr=torch.empty(64, dtype=torch.float32, device=device)
                if fp8 else None, topk_weights_ptr=torch.empty(64, dtype=torch.float32, device=device),
                sorted_token_ids_ptr=None if naive_assignment(M, shape) else i32,
                expert_ids_ptr=torch.empty(64, dtype=torch.int32, device=device),
                num_tokens_post_padded_ptr=torch.empty(64, dtype=torch.int32, device=device))


class EngineWorkload(MoEWorkload):
    """:class:`tilefit.tune.workload.MoEWorkload`'s inputs and fp32 reference, launched with the
    engine's kernel.

    ``replica`` > 0: the same values at other addresses (the weights, scales and activations
    copied into fresh allocations behind a spacer of ``replica`` x 96 MB, the reference shared
    with ``base``): a config's time can depend on where its operands lie in DRAM, and a fresh
    process (or machine) places them anew, so replicas measure that part of the run-to-run
    spread inside one run."""

    def __init__(self, shape: MoEShape, M: int, kernel, device: str = "cuda", seed: int = 0, capability: int = 90,
                 replica: int = 0, base: "EngineWorkload | None" = None):
        super().__init__(shape, M, device, seed)
        self.kernel = kernel
        self.capability = capability
        self.naive = naive_assignment(M, shape)
        self.replica = replica
        self._spacer = None
        if replica:
            import torch

            self._spacer = torch.empty(replica * 96 * 2 ** 20, dtype=torch.uint8, device=device)
            self.A, self.B = self.A.clone(), self.B.clone()
            self.kw = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in self.kw.items()}
            self.ref_kw = {k: self.kw.get(k, v) if isinstance(v, torch.Tensor) else v for k, v in self.ref_kw.items()}
            self.topk_ids, self.topk_weights = self.topk_ids.clone(), self.topk_weights.clone()
            if base is not None:
                self._ref = base.reference

    def prepare(self, config: dict):
        import torch

        from tilefit.kernels.fused_moe import kernel as fm

        C = torch.empty((self.M, self.shape.top_k, self.shape.N), dtype=torch.bfloat16, device=self.device)
        bm = config["BLOCK_SIZE_M"]
        if self.naive:
            flat = self.topk_ids.reshape(-1).contiguous()
            sorted_ids, expert_ids = None, flat
            total = torch.tensor([flat.numel() * bm], dtype=torch.int32, device=self.device)
        else:
            if bm not in self._aligned:
                self._aligned[bm] = fm.moe_align_block_size(self.topk_ids, bm, self.shape.E)
            sorted_ids, expert_ids, total = self._aligned[bm]
            assert sorted_ids.numel() == sorted_length(self.M, self.shape, bm)
        a_scale = self.kw.get("A_scale")
        b_scale = self.kw.get("B_scale")
        ptrs = dict(a_ptr=self.A, b_ptr=self.B, c_ptr=C, b_bias_ptr=None, a_scale_ptr=a_scale, b_scale_ptr=b_scale,
                    topk_weights_ptr=self.topk_weights, sorted_token_ids_ptr=sorted_ids, expert_ids_ptr=expert_ids,
                    num_tokens_post_padded_ptr=total)
        run = EngineLaunch(self.kernel, self.shape, self.M, dict(config), self.capability)
        ints = launch_ints(self.shape, self.M, config, self.capability)
        # the geometry-derived integers are the tensors' own (a wrong stride would be a wrong result)
        assert ints["stride_am"] == self.A.stride(0) and ints["stride_bn"] == self.B.stride(1)
        assert ints["stride_be"] == self.B.stride(0) and ints["stride_cm"] == C.stride(1)
        if a_scale is not None and a_scale.ndim == 2:
            assert ints["stride_asm"] == a_scale.stride(0)
        if b_scale is not None and b_scale.ndim == 3:
            assert (ints["stride_bse"], ints["stride_bsn"]) == (b_scale.stride(0), b_scale.stride(1))
        grid, kw = run.arguments(ptrs)
        kernel = self.kernel

        def launch():
            kernel[grid](**kw)
            return C

        return launch, C
