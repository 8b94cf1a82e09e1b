"""Golden output of every format on the same files (tests/data/golden/).

The inputs (``configs/``: an overflow with a fix, a truncated file, a subfolder whose file name
has a space and brackets, a duplicated key, an unknown device) are checked from a copy, from
the folder that holds ``configs/``, against an RTX 4090 with the analytic model of Triton 3.9:
the output must equal ``<format>.out`` byte for byte (the copy's absolute root, which SARIF
names, is written as ``file:///PROJECT/``). Regenerate after an intended change with

    TILEFIT_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py

and review the diff.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tilefit.reporters import FORMATS

GOLDEN = Path(__file__).parent / "data" / "golden"
ARGS = ("--isolated", "-t", "rtx4090", "--estimator", "analytic", "--triton-version", "3.9", "--no-cache")
ROOT = "file:///PROJECT/"


def _render(cli, tmp_path, monkeypatch, fmt: str) -> str:
    shutil.copytree(GOLDEN / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")  # the html report's "generated" time
    r = cli("check", "configs", *ARGS, "--output-format", fmt)
    assert r.exit_code == 1, r.output
    return r.stdout.replace(tmp_path.resolve().as_uri() + "/", ROOT)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_matches_its_golden_file(cli, tmp_path, monkeypatch, fmt):
    out = _render(cli, tmp_path, monkeypatch, fmt)
    golden = GOLDEN / f"{fmt}.out"
    if os.environ.get("TILEFIT_UPDATE_GOLDEN"):
        golden.write_text(out, encoding="utf-8")
    assert golden.is_file(), f"no golden file for {fmt}: run with TILEFIT_UPDATE_GOLDEN=1"
    assert out == golden.read_text(encoding="utf-8"), f"{fmt} output changed; see the module docstring"


def test_every_format_has_a_golden_file_and_no_stale_ones():
    assert {p.stem for p in GOLDEN.glob("*.out")} == set(FORMATS)


def test_a_reporter_gets_what_it_declares(tmp_path, monkeypatch):
    """The CLI hands a reporter the sources and the whole check result only when it declares
    the need (a format such as an HTML report needs tables, entries and fix plans)."""
    import io

    from tilefit.api import CheckOptions
    from tilefit.app import run_check
    from tilefit.commands import check as check_cmd
    from tilefit.config import Settings
    from tilefit.reporters import Needs, Reporter

    shutil.copytree(GOLDEN / "configs", tmp_path / "configs")
    monkeypatch.chdir(tmp_path)
    result = run_check(["configs"], CheckOptions(targets=["rtx4090"], estimator="analytic", fix=True), Settings())
    seen = {}

    def render(diagnostics, stream, ctx):
        seen.update(result=ctx.result, sources=ctx.sources, root=ctx.root)
        stream.write("report\n")

    for needs, has_result, has_sources in [(Needs(), False, False), (Needs(result=True, sources=True), True, True)]:
        monkeypatch.setattr(check_cmd, "get_reporter", lambda name: Reporter(render, needs))
        out = io.StringIO()
        monkeypatch.setattr(check_cmd.sys, "stdout", out)
        check_cmd.render(result, "anything", None, statistics=False, quiet=False)
        assert (seen["result"] is result) == has_result and bool(seen["sources"]) == has_sources
        assert seen["root"] == str(tmp_path) and out.getvalue() == "report\n"  # no human summary declared
    table = next(p for p in result.tables if p.endswith("fp8_w8a8.json"))
    assert seen["sources"][table].startswith('{"1":') and result.planner is not None
