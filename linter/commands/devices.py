"""``tilefit devices``: the device database as a table."""

from __future__ import annotations

import json
import sys

import click

from .common import fail, settings_or_exit


@click.command()
@click.argument("spec", required=False)
@click.option("--output-format", type=click.Choice(("table", "json")), default="table")
@click.option("--device-file", "device_files", multiple=True, type=click.Path(dir_okay=False),
              help="Extra device database file (JSON). Repeatable.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None)
@click.option("--isolated", is_flag=True)
def devices(spec, output_format, device_files, config_file, isolated):
    """List the device database, or the devices SPEC resolves to (a key, alias, sm_XX or group)."""
    from tilefit.api import UsageError, load_devices, resolve_targets

    settings = settings_or_exit(config_file, isolated)
    try:
        db = load_devices(settings, device_files)
        rows = resolve_targets(db, [spec]) if spec else [d for d in db.devices]
    except UsageError as exc:
        fail(str(exc))
        return
    if output_format == "json":
        json.dump([_as_json(d) for d in rows], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    header = ("key", "name", "arch", "smem/block", "smem/SM", "SMs", "aliases")
    table = [header] + [
        (d.key, d.name, d.arch, _n(d.smem_per_block_optin), _n(d.smem_per_sm), _n(d.sm_count),
         ", ".join(d.aliases[:4]))
        for d in rows
    ]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    for i, r in enumerate(table):
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
        if i == 0:
            click.echo("  ".join("-" * w for w in widths))
    if not spec:
        groups = ", ".join(f"{g} ({len(k)})" for g, k in db.groups.items())
        click.echo(f"\n{len(rows)} devices. Groups: {groups}.")


def _n(v) -> str:
    return "?" if v is None else str(v)


def _as_json(d) -> dict:
    from dataclasses import asdict, is_dataclass

    return asdict(d) if is_dataclass(d) else dict(vars(d))
