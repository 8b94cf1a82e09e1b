"""Our reference Triton kernels, written from the published algorithms with the engines' structure.

One module per kernel; each has the ``@triton.jit`` kernel, a torch launcher and a pure-torch
reference (torch is imported lazily):

* :mod:`.fused_moe` -- fused MoE grouped GEMM: fp16/bf16/fp32, fp8/int8 W8A8 (per-tensor,
  per-channel, block scales), int8 W8A16 per-channel, optional swap-AB;
* :mod:`.fused_moe_wna16` -- weight-only group-quantised MoE (int4/int8 weights, zero points);
* :mod:`.block_gemm` -- block-scaled W8A8 GEMM (fp8/int8);
* :mod:`.mla_decode` -- MLA grouped decode attention, stage 1 (bf16 or fp8 latent cache).

Helpers: :mod:`.checks` (kernel vs reference on random inputs), :mod:`.interpret` (run checks on
the CPU under Triton's interpreter, in a child process), :mod:`.validate` (on a GPU: exact
estimate vs Triton's JIT, and numerics). The kernel modules import triton; this package, the
launch plans (:mod:`tilefit.smem.launch`), ``checks`` and ``interpret`` do not.
"""
