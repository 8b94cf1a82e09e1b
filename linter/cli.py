"""The ``tilefit`` command: a Click group. Each command lives in ``tilefit/commands/``.

Exit codes (ruff's): 0 nothing left to report, 1 diagnostics remain (or ``--diff`` would
change a file), 2 usage, configuration or internal error.
"""

from __future__ import annotations

import click

from . import __version__
from .commands.check import check
from .commands.devices import devices
from .commands.rule import rule


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="tilefit")
def cli() -> None:
    """Find Triton tuning configs that will not fit your GPU, and fix them.

    \b
    tilefit check configs/ --target rtx4090     lint tables against a device
    tilefit check --fix configs/ --target consumer
    tilefit devices                             the device database
    tilefit rule SMEM001                        a rule's documentation
    """


cli.add_command(check)
cli.add_command(devices)
cli.add_command(rule)


def main() -> None:
    cli(prog_name="tilefit")
