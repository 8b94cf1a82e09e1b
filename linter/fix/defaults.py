"""The config an engine uses when no tuned table matches: vLLM 0.33's ``get_default_config``.

vLLM falls back to a hand-written rule per batch size when no ``E=..,N=..`` table is found
(``vllm/model_executor/layers/fused_moe/fused_moe.py``, ``get_default_config``). tilefit uses it
twice: as a candidate the fixer may pick (a config the engine itself would run, so one an engine
accepts) and as the baseline its picks are measured against (``bench/moe_h200.py``).

This is our restatement of that rule, from reading the 0.33.0 source (CUDA branch; the ROCm
branch keeps ``num_stages`` 2; the batch-invariant mode and the weight-only ``wna16`` path are
not restated). Arguments are the engine's: ``N`` is the shard's intermediate size (the file
name's N, half the gate/up GEMM's width) and ``K`` the hidden size; neither changes the CUDA
result.

* **block-FP8** (``dtype == "fp8_w8a8"`` with a block shape): BM 16 up to M = 64, else 64; BN 64
  for M <= 8 when the block's N is a multiple of 64, else the block's N; BK the block's K;
  GROUP 1 up to M = 16, else 32; 4 warps; 4 stages for M <= 4, 3 otherwise.
* **bf16 / fp16 / fp8 per tensor**: BM 16 (M <= 32), 32 (M <= 96), 64 (M <= 512), else 128;
  BN 64 for M <= 64, else 128; BK 128 for fp8 or M <= 64, else 64; GROUP 16 when
  ``M // E > 128`` tokens per expert, else 1; 4 warps up to M = 128, else 8; 4 stages for
  M <= 32, else 3.
"""

from __future__ import annotations

from typing import Sequence

ENGINE_VERSION = "vllm 0.33.0"


def vllm_default_config(M: int, E: int, N: int, K: int, top_k: int, dtype: str | None,
                        block_shape: Sequence[int] | None = None, *, rocm: bool = False) -> dict:
    """The entry vLLM 0.33 would launch at batch size ``M`` with no tuned table (no SPLIT_K key:
    tables never carry it)."""
    if dtype == "fp8_w8a8" and block_shape is not None:
        bn_q, bk_q = int(block_shape[0]), int(block_shape[1])
        if rocm:
            block_n, stages = bn_q, 2
        elif M <= 8 and bn_q % 64 == 0:
            block_n, stages = 64, (4 if M <= 4 else 3)
        else:
            block_n, stages = bn_q, 3
        return {"BLOCK_SIZE_M": 16 if M <= 64 else 64, "BLOCK_SIZE_N": block_n, "BLOCK_SIZE_K": bk_q,
                "GROUP_SIZE_M": 1 if M <= 16 else 32, "num_warps": 4, "num_stages": stages}
    if M <= 32:
        block_m = 16
    elif M <= 96:
        block_m = 32
    elif M <= 512:
        block_m = 64
    else:
        block_m = 128
    if rocm:
        stages = 2
    elif M <= 32:
        stages = 4
    else:
        stages = 3
    return {
        "BLOCK_SIZE_M": block_m,
        "BLOCK_SIZE_N": 64 if M <= 64 else 128,
        "BLOCK_SIZE_K": 128 if (dtype == "fp8_w8a8" or M <= 64) else 64,
        "GROUP_SIZE_M": 16 if M // max(E, 1) > 128 else 1,
        "num_warps": 4 if M <= 128 else 8,
        "num_stages": stages,
    }
