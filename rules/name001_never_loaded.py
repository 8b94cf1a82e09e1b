"""NAME001: a file name the engine never looks up."""

from __future__ import annotations

from tilefit.model import Severity

from .base import Example, FileContext, Finding, Rule, Scope


def dead_reasons(meta, engine: str) -> list[str]:
    """Why ``engine`` can never load a file of this name (empty when it can)."""
    reasons = []
    dev = meta.device_name or ""
    if " " in dev:
        reasons.append("device names in file names use '_' for spaces")
    if meta.family == "fused_moe" and meta.backend is None:
        if engine == "vllm":
            if meta.dtype in ("bf16", "float8", "int8_w8a8", "float16", "fp16"):
                reasons.append(f"vLLM never asks for dtype={meta.dtype} (bf16/fp16 and int8_w8a8 use the name "
                               "without dtype, fp8 uses fp8_w8a8)")
            if meta.block_shape_spaced:
                reasons.append("vLLM writes block_shape without a space ([128,128])")
            if meta.down or meta.per_channel_quant:
                reasons.append("vLLM has no _down or per_channel_quant tables")
            tokens = dev.split("_")
            if "H200" in tokens and dev != "NVIDIA_H200":
                reasons.append("vLLM folds every H200 variant to device_name=NVIDIA_H200 for fused MoE")
        if engine == "sglang":
            if meta.block_shape is not None and meta.dtype is None:
                reasons.append("SGLang never writes block_shape without a dtype")
            if meta.block_shape_spaced is False:
                reasons.append("SGLang writes block_shape with a space ([128, 128])")
            if meta.dtype in ("bf16", "float8", "float16", "fp16"):
                reasons.append(f"SGLang never asks for dtype={meta.dtype}")
    if meta.family == "w8a8_gemm":
        if engine == "vllm":
            if meta.dtype != "fp8_w8a8":
                reasons.append(f"vLLM only looks up dtype=fp8_w8a8 block-GEMM tables, not {meta.dtype}")
            if meta.block_shape_spaced:
                reasons.append("vLLM writes block_shape without a space ([128,128])")
        if engine == "sglang" and meta.block_shape_spaced is False:
            reasons.append("SGLang writes block_shape with a space ([128, 128])")
    return reasons


class NAME001(Rule):
    """File name is one the engine never looks up.

    ## What it does
    Rebuilds the name each engine asks for (``get_config_file_name``) and reports files it can
    never produce: vLLM fused-MoE tables with ``dtype=bf16``, ``float8`` or ``int8_w8a8``;
    vLLM block-GEMM tables with ``dtype=int8_w8a8``; SGLang block-shape tables without dtype;
    ``block_shape`` spacing of the other engine; H200 variants other than ``NVIDIA_H200`` in
    vLLM MoE tables; spaces in device names. When the engine cannot be told from the path,
    the file is reported only if neither engine loads it.

    ## Why is this bad?
    The engine silently falls back to its default config (or another Triton version's file),
    so the tuning is lost and the default may not fit the GPU.
    """

    code = "NAME001"
    name = "never-loaded"
    severity = Severity.WARNING
    scope = Scope.FILE
    examples = (
        Example("vllm/E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=bf16.json", "{}", True),
        Example("vllm/E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json", "{}", False),
        Example("E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128, 128].json", "{}",
                False),
    )

    def check(self, ctx: FileContext):
        meta = ctx.meta
        engines = [ctx.engine] if ctx.engine else ["sglang", "vllm"]
        per_engine = {e: dead_reasons(meta, e) for e in engines}
        if all(per_engine.values()):
            reasons = sorted({r for rs in per_engine.values() for r in rs})
            who = ctx.engine or "neither SGLang nor vLLM"
            yield Finding(f"{who} never loads a file of this name: {'; '.join(reasons)}", identity=meta.stem)
