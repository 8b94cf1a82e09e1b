"""``tilefit rule``: print a rule's documentation."""

from __future__ import annotations

import click

from .common import fail


@click.command()
@click.argument("code", required=False)
@click.option("--all", "all_", is_flag=True, help="List every rule.")
@click.option("--format", "fmt", type=click.Choice(("text", "markdown")), default="text", show_default=True,
              help="markdown: the section of docs/rules.md (with --all: the whole file).")
def rule(code, all_, fmt):
    """Show the documentation of rule CODE (e.g. SMEM001), or list all rules."""
    from tilefit.rules import RULES

    if all_ or not code:
        if fmt == "markdown":
            from tilefit.rules.docs import rules_markdown

            click.echo(rules_markdown(), nl=False)
            return
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
    if fmt == "markdown":
        from tilefit.rules.docs import rule_section

        click.echo(rule_section(cls), nl=False)
        return
    click.echo(f"# {cls.code} ({cls.name})\n")
    click.echo(f"Severity: {cls.severity.value}. Scope: {cls.scope.value}. "
               f"{'Selected by default.' if cls.default_enabled else 'Not selected by default.'}"
               f"{' Fixable.' if cls.fixable() else ''}\n")
    click.echo(cls.documentation())
    if cls.options:
        click.echo(f"\n## Options ([tool.tilefit.rules.{cls.code}])\n")
        for opt in cls.options:
            click.echo(f"{opt.name} ({opt.type.__name__}, default {opt.default!r}): {opt.help}")
