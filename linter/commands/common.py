"""Helpers shared by commands: config loading with clean errors, and the usage-error exit."""

from __future__ import annotations

import sys

import click

from tilefit.config import ConfigError, Settings, load_settings


def fail(message: str, code: int = 2) -> None:
    from tilefit.reporters.common import printable

    click.echo(printable(f"error: {message}"), err=True)
    sys.exit(code)


def settings_or_exit(config_file: str | None, isolated: bool) -> Settings:
    try:
        return load_settings(config_file, isolated)
    except ConfigError as exc:
        fail(str(exc))
        raise AssertionError("unreachable")


def split_codes(values) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return out
