"""KEY001: a batch-size key that is not a decimal integer."""

from __future__ import annotations

from tilefit.model import Severity
from tilefit.tables import MAX_KEY_DIGITS

from .base import Example, FileContext, Finding, Rule, Scope


class KEY001(Rule):
    """Batch-size key is not a decimal integer.

    ## What it does
    Every top-level key of a launch table (other than vLLM's ``triton_version``) is a batch
    size M. Reports keys such as ``"1k"``, ``"16.0"`` (errors), ``" 16"`` or ``"-4"`` (warnings).

    ## Why is this bad?
    The engines convert every key with ``int(key)`` when the table is loaded: a key that does
    not convert (``"1k"``, ``"16.0"``) raises ``ValueError`` and the server fails to start. One
    that does (``" 16"`` is 16, ``"-4"`` is -4) loads, and says so: a key of zero or less is a
    batch size no call has, used only where it happens to be the nearest key. vLLM's block-GEMM loader
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
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", '{" 2": {}, "-1": {}}', True,
                note="int() takes both: a warning that says what the engine reads"),
    )

    def check(self, ctx: FileContext):
        value = ctx.table.value
        if not isinstance(value, dict):
            return
        if ctx.meta.family == "w8a8_gemm" and ctx.engine == "vllm" and "triton_version" in value:
            yield Finding("vLLM's block-GEMM loader converts every key with int(): 'triton_version' makes it raise",
                          at=("triton_version",), at_key=True, identity="triton_version")
        for key, _ in ctx.table.entries():
            if key.isascii() and key.isdigit():
                if len(key) > MAX_KEY_DIGITS:
                    yield Finding(f"batch-size key of {len(key)} digits: int() raises ValueError beyond "
                                  f"{MAX_KEY_DIGITS}", at=(key,), at_key=True, identity=key[:40])
                continue
            if len(key) > MAX_KEY_DIGITS:
                yield Finding(f"batch-size key of {len(key)} characters is not an integer: the engine's int() "
                              "raises ValueError while loading the table", at=(key,), at_key=True, identity=key[:40])
                continue
            try:
                as_int = int(key)
            except ValueError:
                yield Finding(f"batch-size key {key!r} is not an integer: the engine's int() raises ValueError "
                              "while loading the table, so the server fails to start", at=(key,), at_key=True,
                              identity=key)
                continue
            # int() takes it: the engine loads the table, with this entry at batch size as_int
            if as_int <= 0:
                what = (f"the engine's int() reads it as {as_int}, a batch size no call has: the entry is "
                        "used only where it is the nearest key (M=1 when no other key is as close)")
            else:
                what = (f"the engine's int() reads it as {as_int} (it loads); write {str(as_int)!r}, as the "
                        "engines' tuners do")
            yield Finding(f"batch-size key {key!r} is not written as a decimal integer: {what}", at=(key,),
                          at_key=True, identity=key, severity=Severity.WARNING)
