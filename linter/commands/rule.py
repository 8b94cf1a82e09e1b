"""``tilefit rule``: print a rule's documentation."""

from __future__ import annotations

import click

from .common import fail


@click.command()
@click.argument("code", required=False)
@click.option("--all", "all_", is_flag=True, help="List every rule.")
def rule(code, all_):
    """Show the documentation of rule CODE (e.g. SMEM001), or list all rules."""
    from tilefit.rules import RULES

    if all_ or not code:
        for c, cls in RULES.items():
            flag = "" if cls.default_enabled else "  (not selected by default)"
            click.echo(f"{c:<8} {cls.name:<28} {cls.severity.value:<8} {cls.summary()}{flag}")
        return
    cls = RULES.get(code.upper())
    if cls is None:
        import difflib

        close = difflib.get_close_matches(code.upper(), RULES, n=3)
        fail(f"unknown rule {code!r}" + (f"; did you mean {', '.join(close)}?" if close else
                                          "; `tilefit rule --all` lists the rules"))
    click.echo(f"# {cls.code} ({cls.name})\n")
    click.echo(f"Severity: {cls.severity.value}. Scope: {cls.scope.value}. "
               f"{'Selected by default.' if cls.default_enabled else 'Not selected by default.'}"
               f"{' Fixable.' if cls.fixable else ''}\n")
    click.echo(cls.documentation())
