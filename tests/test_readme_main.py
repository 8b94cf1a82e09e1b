"""The README's main command, as written, on a copy of the bundled examples: it reports what
overflows, and the same command with ``--fix`` ends clean (exit 0), so a pre-commit hook with
these arguments can pass (issue 19: `consumer` used to hold sm_86 datacenter cards whose fp8
DEV002 errors no fix can clear)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_main_command() -> list[str]:
    """The arguments of ``tilefit`` in the README's first command (after ``pip install``)."""
    section = (REPO / "README.md").read_text().split("## Two commands", 1)[1]
    first = re.findall(r"```\n(.*?)```", section, re.S)[0].strip()
    install, run = first.split("&&")
    assert install.split()[:3] == ["pip", "install", "-e"]
    args = shlex.split(run)
    assert args[0] == "tilefit"
    return args[1:]


def test_readme_main_command_then_fix_ends_clean(cli, tmp_path, monkeypatch):
    args = readme_main_command()
    assert args[:2] == ["check", "examples/configs"]
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    first = cli(*args)
    assert first.exit_code == 1 and "SMEM001" in first.output, first.output
    fixed = cli(*args, "--fix")
    assert fixed.exit_code == 0, fixed.output
    again = cli(*args)
    assert again.exit_code == 0, again.output
    assert "SMEM001" not in again.output and "All checks passed" in again.output
    # what no fix can clear (fp8 on the sm_86 cards of the group) is said once per file, as information
    info = [line for line in again.output.splitlines() if " DEV002 " in line]
    assert info and len(info) == len({line.split(":")[0] for line in info})
    assert all("not checked on them" in line for line in info)
