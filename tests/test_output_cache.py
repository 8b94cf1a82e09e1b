"""Issue 19 (formats CI uses, warm): the json, sarif, gitlab and full reports are kept beside the
run's results (``tilefit.reporters.outputcache``): a warm run with the same inputs writes the
stored text without drawing the report, and that text is the one a fresh run draws; a changed
table, another current folder or colour, or a damaged file draws it again."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from damage import each_damage
from tilefit.model import Diagnostic, Position, Severity, Span
from tilefit.reporters import Reporter, get_reporter, outputcache

# two offending entries the fixer plans (a fix in every diagnostic's json row) and a foreign key
TABLE = ('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, '
         '"num_warps": 8, "num_stages": 4}, "8192": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, '
         '"BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 6, "kpack": 2}}\n')
NAME = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
FORMATS = ("json", "sarif", "gitlab", "full")


@pytest.fixture
def table(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "configs" / NAME
    path.parent.mkdir()
    path.write_text(TABLE)
    return path


def _report(cli, table, fmt, out, *extra):
    r = cli("check", table, "--isolated", "-t", "rtx4090", "-t", "rtx5090", "--estimator", "analytic",
            "--output-format", fmt, "-o", out, *extra)
    assert r.exit_code == 1, r.output
    return out.read_text()


def _no_drawing(monkeypatch, fmt):
    """The CLI's reporter for ``fmt`` raises when asked to draw (same needs)."""
    import tilefit.commands.check as check

    real = get_reporter(fmt)

    def render(*a, **k):
        raise AssertionError(f"drew the {fmt} report again although nothing changed")

    monkeypatch.setattr(check, "get_reporter", lambda name: Reporter(render, real.needs) if name == fmt
                        else get_reporter(name))


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_warm_run_writes_the_report_it_made_before(cli, table, tmp_path, monkeypatch, fmt):
    fresh = _report(cli, table, fmt, tmp_path / "fresh", "--no-cache")
    assert fresh and _report(cli, table, fmt, tmp_path / "cold") == fresh
    (kept,) = (tmp_path / "cache" / "results").glob(f"*.{fmt}.out")
    if fmt in ("json", "full"):
        assert "Set " in fresh  # the planned fixes are in the report, and in what is kept
    with monkeypatch.context() as m:
        _no_drawing(m, fmt)
        assert _report(cli, table, fmt, tmp_path / "warm") == fresh

    def again(what):
        assert _report(cli, table, fmt, tmp_path / "again") == fresh, what

    each_damage(kept, outputcache.FORMAT, b"4", b"5", again)  # drawn again and kept again
    # a changed entry: the report of the new table, not the stored one
    table.write_text(TABLE.replace('"num_stages": 6', '"num_stages": 2'))
    changed = _report(cli, table, fmt, tmp_path / "fresh2", "--no-cache")
    assert changed != fresh and _report(cli, table, fmt, tmp_path / "changed") == changed


def test_the_current_folder_and_the_colour_are_part_of_the_inputs(cli, table, tmp_path, monkeypatch):
    # sarif and gitlab name paths relative to the project root (here the current folder)
    _report(cli, table, "sarif", tmp_path / "cold.sarif")
    monkeypatch.chdir(table.parent)
    fresh = _report(cli, table, "sarif", tmp_path / "fresh.sarif", "--no-cache")
    assert fresh != (tmp_path / "cold.sarif").read_text()
    assert _report(cli, table, "sarif", tmp_path / "warm.sarif") == fresh
    plain = _report(cli, table, "full", tmp_path / "plain", "--color", "never")
    coloured = _report(cli, table, "full", tmp_path / "coloured", "--color", "always")
    assert "\x1b[" in coloured and "\x1b[" not in plain
    assert _report(cli, table, "full", tmp_path / "plain2", "--color", "never") == plain
    assert _report(cli, table, "full", tmp_path / "coloured2", "--color", "always") == coloured


def _diag(path, pointer, **kw):
    span = kw.pop("span", Span(Position(1, 1), Position(1, 5), 0, 4))
    fields = dict(code="SMEM001", message="over", path=path, span=span, severity=Severity.ERROR,
                  pointer=pointer, target="rtx4090", data={"need": 1}, fingerprint="f")
    fields.update(kw)
    return Diagnostic(**fields)


def test_a_diagnostic_that_is_no_tables_counts_whole():
    """A Python call site's diagnostic (its spans and data come from the modules it was found
    in, not from a table's bytes) changes the digest with any field; a table's with its identity,
    span and fix."""
    tables = {"t.json": SimpleNamespace(data=b"{}", meta=None, read_error=None)}

    def digest(*diagnostics):
        return outputcache.inputs_digest(SimpleNamespace(cache_key="k", tables=tables, files_checked=2,
                                                         diagnostics=list(diagnostics)), "x")

    site = _diag("m.py", None)
    assert digest(site) != digest(_diag("m.py", None, data={"need": 2}))
    assert digest(site) != digest(_diag("m.py", None, span=Span(Position(2, 1), Position(2, 5), 9, 13)))
    entry = _diag("t.json", "/16")
    assert digest(entry) == digest(_diag("t.json", "/16"))
    assert digest(entry) != digest(_diag("t.json", "/16", message="over by 2"))
    assert digest(entry) != digest(_diag("t.json", "/16", span=Span(Position(2, 1), Position(2, 5), 9, 13)))
    assert digest(entry) != digest(entry, site)
    assert outputcache.inputs_digest(SimpleNamespace(cache_key=None), "x") is None


def test_a_kept_html_page_parses_no_table(cli, table, tmp_path, monkeypatch):
    """A warm html run whose page is kept reads the tables' bytes and parses none (the report
    parses them only when it draws the page); a page drawn from the result cache's unparsed
    tables (the cache filled by a json run) is the fresh one."""
    from tilefit.jsonpos import JsonDocument

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    fresh = _report(cli, table, "html", tmp_path / "o.html", "--no-cache")
    _report(cli, table, "json", tmp_path / "cold.json")
    assert _report(cli, table, "html", tmp_path / "o.html") == fresh  # results cached, page not yet
    assert list((tmp_path / "cache" / "results").glob("*.page"))

    def parse(data):
        raise AssertionError("parsed a table although the page is kept")

    monkeypatch.setattr(JsonDocument, "parse", staticmethod(parse))
    assert _report(cli, table, "html", tmp_path / "o.html") == fresh
