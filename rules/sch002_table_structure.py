"""SCH002: a launch table whose structure the engine cannot read."""

from __future__ import annotations

from tilefit.model import Severity

from .base import Example, FileContext, Finding, Rule, Scope


class SCH002(Rule):
    """Launch table is not an object of batch sizes mapping to parameter objects.

    ## What it does
    A fused-MoE or W8A8 GEMM table must be a JSON object whose keys are batch sizes and whose
    values are objects of launch parameters. Reports a top level that is not an object, and
    entries that are not objects. ``null`` entries are allowed in SGLang's channel-wise FP8
    tables, where they mean "use CUTLASS at this batch size".

    ## Why is this bad?
    The engines index the table with ``int(key)`` and splat each entry into the kernel launch
    (``kernel[grid](..., **config)``); anything else raises at the first launch.

    ## Example
    ```json
    {"1": [16, 32, 64, 1, 4, 3]}
    ```
    Use instead:
    ```json
    {"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1,
           "num_warps": 4, "num_stages": 3}}
    ```
    """

    code = "SCH002"
    name = "table-structure"
    severity = Severity.ERROR
    scope = Scope.FILE
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", '{"1": [16, 32, 64, 1, 4, 3]}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", "[]", True),
        Example("N=4096,K=4096,device_name=NVIDIA_L40S,dtype=fp8_w8a8_channelwise.json", '{"1": null}', False),
    )

    def check(self, ctx: FileContext):
        value = ctx.table.value
        if ctx.table.doc is None:
            return
        if not isinstance(value, dict):
            yield Finding(f"expected an object of batch sizes at the top level, found {_kind(value)}")
            return
        nulls_ok = ctx.meta.dtype == "fp8_w8a8_channelwise"
        for key, entry in ctx.table.entries():
            if isinstance(entry, dict) or (entry is None and nulls_ok):
                continue
            yield Finding(f"entry {key!r} must be an object of launch parameters, found {_kind(entry)}",
                          at=(key,), identity=key)


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a number"
