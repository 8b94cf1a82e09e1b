"""SCH001: the file is not valid JSON."""

from __future__ import annotations

from tilefit.model import Severity

from .base import Example, FileContext, Finding, Rule, Scope


class SCH001(Rule):
    """File is not valid JSON.

    ## What it does
    Reports malformed or truncated JSON, bytes that are not UTF-8, a byte-order mark and empty
    files, at the position where parsing stopped.

    ## Why is this bad?
    Both engines read tables with ``json.load``; a file it rejects raises at start-up or at the
    first batch that needs the table.

    ## Example
    ```json
    {"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32,
    ```
    """

    code = "SCH001"
    name = "invalid-json"
    severity = Severity.ERROR
    scope = Scope.FILE
    families = None
    examples = (
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", '{"1": {"BLOCK_SIZE_M": 16,', True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", "", True, note="empty file"),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", "{}", False),
    )

    def check(self, ctx: FileContext):
        error = ctx.table.error
        if error is not None:
            yield Finding(error.message, data={"offset": error.offset}, identity=error.message)
