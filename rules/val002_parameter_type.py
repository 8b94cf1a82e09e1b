"""VAL002: a launch parameter of the wrong JSON type."""

from __future__ import annotations

import json

from tilefit.model import Severity

from .base import EntryContext, Example, Finding, Rule, Scope

_TYPE_NAMES = {"int": "an integer", "bool": "true or false", "str": "a string"}


def json_text(value, limit: int = 40) -> str:
    """A value as the file spells it (``true``, ``null``, ``"64"``, ``64.0``), shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class VAL002(Rule):
    """Launch parameter has the wrong type.

    ## What it does
    Block sizes, ``GROUP_SIZE_M``, ``num_warps`` and ``num_stages`` must be JSON integers:
    not ``64.0``, ``"64"`` or ``true``. ``USE_TMA`` and ``SWAP_AB`` are booleans.

    ## Why is this bad?
    Values are passed to ``tl.constexpr`` parameters unchanged. ``tl.arange(0, 64.0)`` fails
    to compile, and a string ``num_stages`` makes Triton's option parsing raise.

    ## Example
    ```json
    {"1": {"BLOCK_SIZE_M": "16", ...}}
    ```
    """

    code = "VAL002"
    name = "parameter-type"
    severity = Severity.ERROR
    scope = Scope.ENTRY
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16.0, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1, '
                '"num_stages": true}}', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json",
                '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}', False),
    )

    def check(self, ctx: EntryContext):
        if not isinstance(ctx.entry, dict):
            return
        for key, wanted, value in ctx.parameter_problems.wrong_types:
            yield Finding(f"{key} must be {_TYPE_NAMES[wanted]}, found {json_text(value)}", at=(key,))
