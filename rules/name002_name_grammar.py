"""NAME002: a file name that does not follow the engine's grammar."""

from __future__ import annotations

from tilefit.model import Severity

from .base import Example, FileContext, Finding, Rule, Scope


class NAME002(Rule):
    """File name does not follow the config-name grammar.

    ## What it does
    Reports values in the name that the engines cannot have written: non-integer ``E``, ``N``
    or ``K``, a ``block_shape`` that is not two integers, ``per_channel_quant`` other than
    ``True``.

    ## Why is this bad?
    Engines build the name they look for from integers and fixed spellings; a name with such a
    value is never found, and tilefit cannot tell which kernel the table is for.
    """

    code = "NAME002"
    name = "name-grammar"
    severity = Severity.WARNING
    scope = Scope.FILE
    examples = (
        Example("E=8x,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", "{}", True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8,block_shape=[128].json", "{}", True),
        Example("E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json", "{}", False),
    )

    def check(self, ctx: FileContext):
        for problem in ctx.meta.problems:
            yield Finding(f"file name: {problem}", identity=problem)
