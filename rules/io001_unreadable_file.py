"""IO001: a config file that cannot be read."""

from __future__ import annotations

from tilefit.model import Severity

from .base import FileContext, Finding, Rule, Scope


class IO001(Rule):
    """A config file cannot be read.

    ## What it does
    Reports a file that could not be opened or read (permissions, a folder named like a config
    file, a file that vanished during the run).

    ## Why is this bad?
    The engine fails the same way when it tries to load the file, or silently falls back to its
    default config, which may not fit the GPU.
    """

    code = "IO001"
    name = "unreadable-file"
    severity = Severity.ERROR
    scope = Scope.FILE
    families = None

    def check(self, ctx: FileContext):
        if ctx.table.read_error is not None:
            yield Finding(f"cannot read file: {ctx.table.read_error}")
