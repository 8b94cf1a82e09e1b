"""KEY001: a batch-size key that is not a decimal integer."""

from __future__ import annotations

from tilefit.model import Severity
from tilefit.tables import MAX_KEY_DIGITS

from .base import Example, FileContext, Finding, Rule, Scope


class KEY001(Rule):
    """Batch-size key is not a decimal integer.

    ## What it does
    Every top-level key of a launch table (other than vLLM's ``triton_version``) is a batch
    size M. Reports keys such as ``"1k"``, ``"-4"``, ``" 16"`` or ``"16.0"``.

    ## Why is this bad?
    The engines convert every key with ``int(key)`` when the table is loaded: a key that does
    not convert raises ``ValueError`` and the server fails to start. vLLM's block-GEMM loader
    does not drop ``triton_version`` either, so there even that key is fatal.

    ## Example
    ```json
    {"1k": {"BLOCK_SIZE_M": 64, ...}}
    ```
    Use instead: ``{"1024": {...}}``.
    """

    code = "KEY001"
    name = "batch-key-not-integer"
    severity = Severity.ERROR
    scope = Scope.FILE
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", '{"1k": {}}', True),
        Example("N=7168,K=512,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128,128].json",
                '{"triton_version": "3.5.0", "1": {}}', True, note="vLLM's GEMM loader int()s every key"),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", '{"triton_version": "3.5.0", "1": {}}', False),
    )

    def check(self, ctx: FileContext):
        value = ctx.table.value
        if not isinstance(value, dict):
            return
        if ctx.meta.family == "w8a8_gemm" and ctx.engine == "vllm" and "triton_version" in value:
            yield Finding("vLLM's block-GEMM loader converts every key with int(): 'triton_version' makes it raise",
                          at=("triton_version",), at_key=True, identity="triton_version")
        for key, _ in ctx.table.entries():
            if not (key.isascii() and key.isdigit()):
                yield Finding(f"batch-size key {key!r} is not a decimal integer (the engine calls int() on it)",
                              at=(key,), at_key=True, identity=key)
            elif len(key) > MAX_KEY_DIGITS:
                yield Finding(f"batch-size key of {len(key)} digits: int() raises ValueError beyond {MAX_KEY_DIGITS}",
                              at=(key,), at_key=True, identity=key[:40])
