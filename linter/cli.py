"""The ``tilefit`` command: a Click group whose commands live in ``tilefit/commands/<name>.py``.

Commands are imported only when invoked, so ``tilefit check`` (a pre-commit hook) never pays for
the imports of ``tune`` or ``calibrate``.

Exit codes (ruff's): 0 nothing left to report, 1 diagnostics remain (or ``--diff`` would
change a file), 2 usage, configuration or internal error.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from . import __version__
from .callsites.moeconfigs import use_engine_lookup

# command name -> (module under tilefit.commands, attribute, one-line help)
COMMANDS = {
    "check": ("check", "check", "Check tuning-config files against device limits."),
    "fix": ("fix", "fix", "Rewrite offending entries with the fastest config that fits."),
    "devices": ("devices", "devices", "List the device database."),
    "rule": ("rule", "rule", "Show a rule's documentation."),
    "probe": ("probe", "probe", "Compile a kernel over a sweep and show its shared memory per target."),
    "calibrate": ("calibrate", "calibrate", "Regenerate model tables from compiles or GPU measurements."),
    "tune": ("tune", "tune", "Re-tune offending entries on the local GPU."),
    "doctor": ("doctor", "doctor", "Will this model crash on this GPU with this engine?"),
    # issue 16 (auto-fix pull requests): tilefit/commands/pr.py
    "pr": ("pr", "pr", "Fix, commit the fixes on a branch of their own and write the PR body."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return [name for name in COMMANDS if importlib.util.find_spec(f"tilefit.commands.{COMMANDS[name][0]}")]

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr, _ = COMMANDS[name]
        try:
            mod = importlib.import_module(f"tilefit.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name == f"tilefit.commands.{module}":
                return None
            raise
        return getattr(mod, attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="tilefit")
def cli() -> None:
    """Find Triton tuning configs that will not fit your GPU, and fix them.

    \b
    tilefit check configs/ --target rtx4090     lint tables against a device
    tilefit check --fix configs/ --target consumer
    tilefit devices                             the device database
    tilefit rule SMEM001                        a rule's documentation
    """


def _moe_launch_configs(engine: str, root: str, facts: tuple, devices: tuple) -> tuple:
    """The doctor's fused-MoE config lookup, imported when a call-site scenario first asks."""
    from .doctor.moeconfigs import launch_configs

    return launch_configs(engine, root, facts, devices)


# The composition root wires the doctor's lookup into the call-site layer, which sits below it.
use_engine_lookup(_moe_launch_configs)


def main() -> None:
    from .kernels.family import KernelFamilyError

    try:
        cli(prog_name="tilefit")
    except KernelFamilyError as exc:  # a broken kernel family folder ($TILEFIT_KERNEL_PATH)
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
