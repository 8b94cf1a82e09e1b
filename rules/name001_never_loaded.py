"""NAME001: a file name the engine never looks up."""

from __future__ import annotations

from tilefit.model import Severity
from tilefit.serving.naming import dead_reasons

from .base import Example, FileContext, Finding, Rule, Scope


class NAME001(Rule):
    """File name is one the engine never looks up.

    ## What it does
    Rebuilds the name each engine asks for (``get_config_file_name``; the rules are the engine
    profiles' file-name grammar, :mod:`tilefit.serving.naming`) and reports files it can never
    produce: vLLM fused-MoE tables with ``dtype=bf16``, ``float8`` or ``int8_w8a8``;
    vLLM block-GEMM tables with ``dtype=int8_w8a8``; SGLang block-shape tables without dtype;
    ``block_shape`` spacing of the other engine; H200 variants other than ``NVIDIA_H200`` in
    vLLM MoE tables; spaces in device names. When the engine cannot be told from the path,
    the file is reported only if neither engine loads it. A file in one engine's folder whose name
    points to the other (SGLang's spaced ``block_shape`` in vLLM's ``configs/``) is judged as the
    name's engine's table, and reported when the folder's engine never loads it.

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
            who = f"{ctx.engine} never loads" if ctx.engine else "neither SGLang nor vLLM loads"
            yield Finding(f"{who} a file of this name: {'; '.join(reasons)}", identity=meta.stem)
            return
        folder = meta.path_engine  # the folder names the other engine than the name does
        if folder and ctx.engine and folder != ctx.engine:
            reasons = dead_reasons(meta, folder)
            if reasons:
                yield Finding(f"the file is in a {folder} folder, but {folder} never loads a file of this name: "
                              f"{'; '.join(reasons)} (judged as a {ctx.engine} table, the engine its name "
                              "points to)", identity=meta.stem)
