"""Shared bits of the reporters: the render context and the rule URL."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RenderContext:
    """What reporters may need besides the diagnostics."""

    fix_applicability: int | None = None  # the applicability a fix needs to be marked [*]
    sources: dict = field(default_factory=dict)  # path -> text, for the full format
    tool_version: str = ""


def rule_url(code: str) -> str:
    """The rule's section of the generated docs/rules.md."""
    from tilefit.rules.docs import rule_url as url

    return url(code)


def fixable_mark(diag, ctx: RenderContext) -> str:
    if diag.fix is None or ctx.fix_applicability is None:
        return ""
    return "[*] " if int(diag.fix.applicability) >= ctx.fix_applicability else ""
