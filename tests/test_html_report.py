"""The HTML report (``--output-format html``): its data model against the check's own verdicts and
the fixer, the page's HTML (well-formed, nothing fetched), and the page in a real browser
(headless Chromium via Selenium; skipped cleanly where there is none, see tests/browser.py).

Fixture: tests/fixtures/html_audit (real shipped tables, one with SGLang's old fp8 default,
one truncated, one schema-only family; see its README).
"""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path

import pytest

import browser as B

FIXTURE = Path(__file__).parent / "fixtures" / "html_audit"
SGLANG_4090 = "sglang/triton_3_4_0/E=128,N=768,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"
VLLM_H200 = "vllm/E=128,N=768,device_name=NVIDIA_H200.json"
VLLM_4090 = "vllm/E=8,N=3584,device_name=NVIDIA_GeForce_RTX_4090,dtype=fp8_w8a8.json"


# ---------------------------------------------------------------------------------------------
# helpers


def check_result(path=FIXTURE, targets=("consumer",), fix=True):
    from tilefit.app import CheckOptions, run_check

    return run_check([str(path)], CheckOptions(targets=list(targets), estimator="analytic", fix=fix,
                                               use_cache=False))


@pytest.fixture(scope="module")
def audited():
    from tilefit.audit import build_check_audit

    result = check_result()
    return result, build_check_audit(result)


def column(audit, arch: str):
    return next(c for c in audit.columns if c.arch == arch and c.target)


def table(audit, rel: str):
    return next(t for t in audit.tables if t.path.endswith(rel))


def embedded_data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert m, "no embedded report data"
    return json.loads(m.group(1))


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
URL_ATTRS = {"href", "src", "action", "formaction", "poster", "data", "xlink:href"}


class StrictHTML(HTMLParser):
    """Well-formedness as XHTML would demand it: every element closed in order, attributes
    quoted, ids unique; and no attribute that points outside the file."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: set[str] = set()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for name, value in attrs:
            if value is None and name not in ("hidden", "selected", "checked"):
                self.errors.append(f"<{tag} {name}>: attribute without a value")
            if name == "id":
                if value in self.ids:
                    self.errors.append(f"duplicate id {value!r}")
                self.ids.add(value)
            if name in URL_ATTRS and value and not value.startswith(("#", "data:")):
                self.errors.append(f"<{tag} {name}={value!r}>: points outside the file")
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()


def assert_offline_html(page: str) -> StrictHTML:
    assert page.startswith("<!DOCTYPE html>")
    parser = StrictHTML()
    parser.feed(page)
    parser.close()
    assert parser.errors == []
    assert parser.stack == [], f"unclosed: {parser.stack}"
    # nothing that could be fetched: no URL scheme anywhere, no CSS url() or @import
    assert not re.search(r"(?i)\b(?:https?|ftp|wss?):", page)
    assert not re.search(r"(?i)url\(|@import", page)
    assert "default-src 'none'" in page  # the Content-Security-Policy forbids every fetch
    return parser


# ---------------------------------------------------------------------------------------------
# the data model


def test_overflows_are_the_checks_smem001(audited):
    """Every overflowing (table, batch size, device) of the audit is an SMEM001 diagnostic of
    the same check, and every SMEM001 diagnostic is one of the audit, except where DEV002 says
    the dtype cannot run at all: there the audit says "not applicable"."""
    result, audit = audited
    from_check, cannot_run = set(), set()
    for d in result.diagnostics:
        if d.code == "SMEM001":
            key = d.pointer.split("/")[1]
            from_check.update((d.path, key, dev) for dev in d.data["targets"])
        elif d.code == "DEV002":
            cannot_run.update((d.path, dev) for dev in d.data["targets"])
    from_audit, not_applicable = set(), set()
    for t in audit.tables:
        for key, col, n in audit.entry_needs(t):
            devs = audit.columns[col].to_json()["keys"]
            if n.verdict == "o":
                from_audit.update((t.path, key, dev) for dev in devs)
            elif n.verdict == "n":
                not_applicable.update((t.path, dev) for dev in devs)
    assert from_check and cannot_run  # the fixture overflows, and has fp8 tables checked on sm_86
    assert not_applicable == cannot_run
    assert from_audit == {(p, k, dev) for p, k, dev in from_check if (p, dev) not in cannot_run}


def test_old_sglang_fp8_default_on_the_4090_class(audited):
    """SGLang's old fp8 default needs 147456 bytes on sm_89 (the measured Required: of the
    crash): 46080 over the 101376 of the 99 KB cards; fp8 cannot run on sm_86 at all."""
    _, audit = audited
    t = table(audit, SGLANG_4090)
    sm89, sm86 = column(audit, "sm_89"), column(audit, "sm_86")
    assert "RTX 4090" in sm89.label and "RTX 3090" in sm86.label
    cfg = dict(t.entries)["4096"]
    assert audit.need(t, sm89.index, cfg).bytes == 147456
    cell = t.cells[sm89.index]
    assert (cell.verdict, cell.value, cell.over) == ("o", 147456 - 101376, 1)
    assert t.cells[sm86.index].verdict == "n"
    assert t.own == sm89.index  # its own device, the RTX 4090, is in the sm_89 class


def test_fitting_table_headroom_is_the_tightest_entry(audited):
    _, audit = audited
    t = table(audit, VLLM_4090)
    sm89 = column(audit, "sm_89")
    tightest = max(audit.need(t, sm89.index, cfg).bytes for _, cfg in t.entries)
    cell = t.cells[sm89.index]
    assert cell.verdict == "f" and cell.value == 101376 - tightest and cell.over == 0


def test_tables_without_a_shared_memory_verdict(audited):
    _, audit = audited
    broken = table(audit, "broken/E=16,N=1024,device_name=NVIDIA_GeForce_RTX_4090.json")
    mamba = next(t for t in audit.tables if "/mamba/" in t.path)
    assert broken.unchecked == "not valid JSON" and not broken.cells
    assert "schema-checked only" in mamba.unchecked and not mamba.cells
    assert any(code == "SCH001" for code, _, _ in broken.notes)


def test_summary_counts_per_class(audited):
    result, audit = audited
    paths_over, cannot_run = defaultdict(set), set()
    for d in result.diagnostics:
        if d.code == "SMEM001":
            for dev in d.data["targets"]:
                paths_over[dev].add(d.path)
        elif d.code == "DEV002":
            cannot_run.update((d.path, dev) for dev in d.data["targets"])
    summary = audit.summary()
    for row in summary["columns"]:
        col = audit.columns[row["column"]]
        expected = {p for k in col.to_json()["keys"] for p in paths_over.get(k, ()) if (p, k) not in cannot_run}
        assert row["tables"]["o"] == len(expected), col.label
    assert summary["tables_over"] == 2
    worst = summary["worst"][0]
    assert worst["over"] == 147456 - 101376 and worst["bytes"] == 147456


def test_fixes_are_what_the_fixer_writes(tmp_path, cli, audited):
    """The page's new configs are the entries `check --fix` writes, and its predicted speeds the
    fix report's."""
    _, audit = audited
    work = tmp_path / "configs"
    shutil.copytree(FIXTURE, work)
    report = tmp_path / "pr.md"
    r = cli("check", work, "--target", "consumer", "--estimator", "analytic", "--fix", "--fix-report", report,
            "--isolated", "--no-cache")
    assert r.exit_code in (0, 1), r.output
    md = report.read_text(encoding="utf-8")
    assert audit.fixes
    for f in audit.fixes:
        t = audit.tables[f.table]
        rel = t.path[len(str(FIXTURE)) + 1:]
        written = json.loads((work / rel).read_text(encoding="utf-8"))[f.key]
        assert written == audit.configs[f.new]
        assert audit.configs[f.old] != written
        # the row of this entry in this file's section (several files have a "4096" entry)
        section = md.split(f"### `{work / rel}`", 1)[1].split("\n### ", 1)[0]
        row = next(line for line in section.splitlines() if line.startswith(f"| {f.key} |"))
        if f.speed_vs_old is not None and abs(f.speed_vs_old - 1) >= 0.005:
            assert f"{f.speed_vs_old:.2f}×" in row


def test_identical_entries_are_stored_once(corpus):
    """vLLM's fused-MoE tables repeat configs across batch sizes and files: each distinct value is
    stored once, and the shared-memory figures once per (kernel, config, device class)."""
    from tilefit.audit import build_check_audit
    from tilefit.audit.check import kernel_identity

    result = check_result(corpus / "vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs", ("consumer",), fix=False)
    audit = build_check_audit(result)
    judged = [result.tables[t.path] for t in audit.tables if t.group is not None]
    values = {json.dumps(v, sort_keys=True) for t in judged for _, v in t.entries()}
    assert len(audit.configs) == len({json.dumps(c, sort_keys=True) for c in audit.configs}) == len(values)
    n_entries = sum(len(t.entries) for t in audit.tables)
    pairs = {(kernel_identity(result.tables[t.path].meta), cfg) for t in audit.tables if t.group is not None
             for _, cfg in t.entries}
    assert n_entries > 3 * len(pairs)
    assert len(audit.needs) <= len(pairs) * len(audit.columns)
    data = audit.to_json()
    assert sum(len(row) for rows in data["needs"].values() for row in rows.values()) <= len(pairs) * len(audit.columns)


def test_interned_configs_are_those_json_tells_apart(corpus_files):
    """The audit's interner keys a plain entry by its typed items, not its JSON text: it must give
    the ids the JSON key gave, on every entry of the corpus and on values JSON tells apart
    (1, 1.0 and true; key order; nested values)."""
    from tilefit.audit import check as audit_check

    values = []
    for path in corpus_files[::3]:
        try:
            table = json.loads(path.read_bytes())
        except ValueError:
            continue
        if isinstance(table, dict):
            values.extend(table.values())
    plain = {"BLOCK_SIZE_M": 16, "num_warps": 4}
    values += [plain, dict(reversed(list(plain.items()))), {"BLOCK_SIZE_M": 16.0, "num_warps": 4},
               {"BLOCK_SIZE_M": True, "num_warps": 4}, {"BLOCK_SIZE_M": 1, "num_warps": 4}, {"BLOCK_SIZE_M": "16"},
               {"BLOCK_SIZE_M": None}, {"BLOCK_SIZE_M": [16]}, {"BLOCK_SIZE_M": {"a": 1}}, [16, 4], 16, "x", None,
               {"é": 1}, {}]
    fast_values, slow_values = [], []
    fast = audit_check._Interner(fast_values)
    ids = [fast(v) for v in values]
    saved = audit_check._plain_key
    audit_check._plain_key = lambda value: None  # every value keyed by its JSON text
    try:
        slow = audit_check._Interner(slow_values)
        assert [slow(v) for v in values] == ids
    finally:
        audit_check._plain_key = saved
    assert fast_values == slow_values and len(fast_values) > 20
    assert ids[-15] == ids[-14] and len({ids[-15], ids[-13], ids[-12], ids[-11]}) == 4


# ---------------------------------------------------------------------------------------------
# the page's HTML


@pytest.fixture(scope="module")
def check_page(tmp_path_factory):
    from click.testing import CliRunner

    from tilefit.cli import cli as group

    out = tmp_path_factory.mktemp("html") / "audit.html"
    r = CliRunner().invoke(group, ["check", str(FIXTURE), "--target", "consumer", "--estimator", "analytic",
                                   "--output-format", "html", "-o", str(out), "--isolated", "--no-cache"],
                           catch_exceptions=False)
    assert r.exit_code == 1, r.output  # the fixture overflows
    return out


def test_check_page_is_well_formed_and_offline(check_page, audited):
    page = check_page.read_text(encoding="utf-8")
    parser = assert_offline_html(page)
    assert {"main", "nav", "script", "style"} <= set(parser.tags)
    data = embedded_data(page)
    _, audit = audited
    assert data["kind"] == "check" and len(data["tables"]) == len(audit.tables) == 5
    assert data["summary"]["tables_over"] == 2
    assert [c["label"] for c in data["columns"]] == [c.label for c in audit.columns]


def test_embedded_json_cannot_end_the_script(tmp_path):
    from tilefit.reporters.html import render_page

    page = render_page({"title": "</script><script>alert(1)</script>", "x": "\u2028"}, "t")
    data = embedded_data(page)
    assert data["title"] == "</script><script>alert(1)</script>"
    assert page.count("</script>") == 2  # the data's and the app's


def test_html_format_for_doctor(tmp_path, cli):
    out = tmp_path / "doctor.html"
    r = cli("doctor", "--shape", "E=128,N=768,K=2048,topk=8", "--dtype", "fp8_w8a8", "--target", "rtx4090",
            "--target", "h100", "--engine", "sglang", "--engine-version", "old", "--batch-sizes", "usual",
            "--estimator", "analytic", "--output-format", "html", "-o", out)
    assert r.exit_code == 1, r.output  # SGLang's old default overflows the 4090
    page = out.read_text(encoding="utf-8")
    assert_offline_html(page)
    data = embedded_data(page)
    assert data["kind"] == "doctor"
    assert [c["keys"] for c in data["columns"]] == [["rtx4090"], ["h100-sxm"]]
    up = next(t for t in data["tables"] if "up" in t["p"])
    cells = {c[0]: c for c in up["c"]}
    assert cells[0][1] == "o" and cells[1][1] == "f"  # overflows the 4090, fits the H100
    assert out.stat().st_mode & 0o044  # readable like a file the user wrote, not 0600


def test_output_file_errors_are_clean(tmp_path, cli):
    (tmp_path / "afile").write_text("x")  # a missing folder is created (as check -o does); under a file, none can be
    bad = tmp_path / "afile" / "x.html"
    r = cli("doctor", "--shape", "E=128,N=768,K=2048,topk=8", "--dtype", "fp8_w8a8", "--target", "rtx4090",
            "--engine", "sglang", "--batch-sizes", "1", "--estimator", "analytic", "--output-format", "html",
            "-o", bad)
    assert r.exit_code == 2 and "cannot write" in r.output
    r = cli("probe", "fused_moe", "--estimator", "analytic", "--output-format", "svg", "-o", bad)
    assert r.exit_code == 2 and "cannot write" in r.output


def _probe(cli, tmp_path, fmt: str) -> str:
    out = tmp_path / f"sweep.{fmt}"
    r = cli("probe", "fused_moe", "--dtype", "fp8_w8a8", "--tile", "128,256,128", "--sweep", "num_stages=1..5",
            "--arch", "sm_89,sm_90", "--estimator", "analytic", "--output-format", fmt, "-o", out)
    assert r.exit_code == 0, r.output
    return out.read_text(encoding="utf-8")


def test_probe_svg(tmp_path, cli):
    import xml.etree.ElementTree as ET

    text = _probe(cli, tmp_path, "svg")
    root = ET.fromstring(text.split("?>", 1)[1])
    ns = {"s": "http://www.w3.org/2000/svg"}
    panels = root.findall("s:g[@class='panel']", ns)
    assert [p.get("data-arch") for p in panels] == ["sm_89", "sm_90"]
    sm89 = panels[0]
    assert [ln.get("data-bytes") for ln in sm89.findall("s:line[@class='limit']", ns)] == ["101376"]
    points = sm89.findall("s:circle", ns)
    assert len(points) == 5
    # 4 and 5 stages need 147456 and 196608 bytes on sm_89: above the 4090's limit
    assert [p.get("class") for p in points].count("point over") == 2
    assert "147456 B" in " ".join(p.findtext("s:title", "", ns) for p in points)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text)


def test_probe_html(tmp_path, cli):
    page = _probe(cli, tmp_path, "html")
    assert_offline_html(page)
    data = embedded_data(page)
    assert data["kind"] == "sweep" and data["x_values"] == [1, 2, 3, 4, 5]
    assert "fits (per-block opt-in limit):" in page  # the probe's text report, in full
    assert "<svg " in page and "<td class=\"num\" style=\"color:var(--over);font-weight:600\">147456</td>" in page


# ---------------------------------------------------------------------------------------------
# in a real browser


@pytest.fixture(scope="module")
def chrome():
    b = B.browser_or_skip()
    yield b
    b.quit()


def _wait(chrome, script: str, timeout: float = 20.0):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(chrome.driver, timeout).until(lambda d: d.execute_script(script))


def test_browser_page_loads_from_file_without_errors(chrome, check_page):
    chrome.open(check_page)
    _wait(chrome, "return document.body.getAttribute('data-ready') === '1'")
    assert chrome.console_errors() == []
    # nothing fetched: no resource besides the file itself, no external src/href in the DOM
    assert chrome.js("return performance.getEntriesByType('resource').length") == 0
    assert chrome.js("return [...document.querySelectorAll('[src],[href]')].map(e => e.getAttribute('src') "
                     "|| e.getAttribute('href')).filter(u => !u.startsWith('#'))") == []
    assert chrome.js("return document.querySelector('#per-class') !== null")
    assert chrome.js("return document.querySelector('.card.bad .big').textContent") == "2"


def test_browser_matrix_cells_filter_sort_and_click(chrome, check_page, audited):
    _, audit = audited
    chrome.open(check_page, "#matrix")
    _wait(chrome, "return document.querySelectorAll('#mbody tr.row').length > 0")
    rows = chrome.js("return [...document.querySelectorAll('#mbody tr.row')].map(r => ({i: +r.dataset.i, "
                     "cells: [...r.querySelectorAll('td.c')].map(c => [c.className, c.textContent])}))")
    assert sorted(r["i"] for r in rows) == list(range(len(audit.tables)))
    targets = [c for c in audit.columns if c.target]
    heads = chrome.js("return [...document.querySelectorAll('#mhead th')].map(th => th.dataset.sort)")
    assert heads[1:] == ["own"] + [str(c.index) for c in targets]
    by_index = {r["i"]: r["cells"] for r in rows}
    for t in audit.tables:  # every cell as the model says: own device first, then the targets
        absent = "x" if t.unchecked else "none"  # a table not checked at all says so in every column
        own = "x" if t.own is None else t.cells[t.own].verdict if t.own in t.cells else absent
        want = [own] + [t.cells[c.index].verdict if c.index in t.cells else absent for c in targets]
        assert [cls.split()[1] for cls, _ in by_index[t.index]] == want, t.path
    sg = table(audit, SGLANG_4090)
    sm89 = column(audit, "sm_89")
    cls, text = by_index[sg.index][1 + targets.index(sm89)]
    assert cls.split()[:2] == ["c", "o"] and text == "+45K"

    # a filter hides rows
    chrome.js("const s = document.getElementById('f-dtype'); s.value = 'fp8_w8a8'; "
              "s.dispatchEvent(new Event('change'))")
    shown = chrome.js("return [...document.querySelectorAll('#mbody tr.row')].map(r => +r.dataset.i)")
    assert sorted(shown) == sorted(t.index for t in audit.tables if t.dtype == "fp8_w8a8")
    assert len(shown) < len(rows)
    assert chrome.js("return document.getElementById('count').textContent") == f"{len(shown)} of 5 tables"
    assert "dtype=fp8_w8a8" in chrome.js("return location.hash")
    chrome.js("const s = document.getElementById('f-dtype'); s.value = ''; s.dispatchEvent(new Event('change'));"
              "const t = document.getElementById('f-status'); t.value = 'o'; t.dispatchEvent(new Event('change'))")
    shown = chrome.js("return [...document.querySelectorAll('#mbody tr.row')].map(r => +r.dataset.i)")
    assert sorted(shown) == sorted(t.index for t in audit.tables if any(c.verdict == "o" for c in t.cells.values()))

    # sorting by the 4090 class puts the worst overflow first
    chrome.js("const t = document.getElementById('f-status'); t.value = ''; t.dispatchEvent(new Event('change'))")
    chrome.js(f"document.querySelector('#mhead th[data-sort=\"{sm89.index}\"]').click()")
    first = chrome.js("return +document.querySelector('#mbody tr.row').dataset.i")
    assert first == max((t for t in audit.tables if sm89.index in t.cells and t.cells[sm89.index].verdict == "o"),
                        key=lambda t: t.cells[sm89.index].value).index
    chrome.driver.save_screenshot(str(B.artifacts_dir() / "html-report-matrix.png"))

    # a click opens the table's page
    chrome.js(f"document.querySelector('#mbody tr.row[data-i=\"{sg.index}\"] td.c').click()")
    _wait(chrome, "return document.getElementById('table-title') !== null")
    assert chrome.js("return location.hash") == f"#t{sg.index}"
    assert chrome.js("return document.getElementById('table-title').textContent") == sg.path
    charts = chrome.js("return [...document.querySelectorAll('#charts .chart')].map(c => "
                       "[+c.dataset.col, c.querySelectorAll('rect.bar').length, c.querySelectorAll('line.limit').length])")
    assert [c[0] for c in charts] == [sg.own] + [c.index for c in targets if c.index != sg.own]
    for col, bars, limits in charts:  # a bar per batch size (none where fp8 cannot run), the limit line
        assert (bars, limits) == (0 if sg.cells[col].verdict == "n" else len(sg.entries), 1)
    over = chrome.js(f"return document.querySelectorAll('#charts .chart[data-col=\"{sm89.index}\"] rect.bar.o').length")
    assert over == 1
    fixes = chrome.js("return [...document.querySelectorAll('#fixes tbody tr')].map(r => r.cells[0].textContent)")
    assert fixes == list(sg.fixes)
    chrome.driver.save_screenshot(str(B.artifacts_dir() / "html-report-table.png"))
    assert chrome.console_errors() == []


def test_browser_doctor_and_probe_pages(chrome, tmp_path, cli):
    out = tmp_path / "doctor.html"
    r = cli("doctor", "--shape", "E=128,N=768,K=2048,topk=8", "--dtype", "fp8_w8a8", "--target", "rtx4090",
            "--engine", "sglang", "--engine-version", "old", "--batch-sizes", "usual", "--estimator", "analytic",
            "--output-format", "html", "-o", out)
    assert r.exit_code == 1, r.output
    chrome.open(out, "#matrix")
    _wait(chrome, "return document.querySelectorAll('#mbody tr.row').length > 0")
    assert chrome.js("return document.querySelectorAll('#mbody td.c.o').length") >= 1
    chrome.js("document.querySelector('#mbody tr.row a').click()")
    _wait(chrome, "return document.querySelectorAll('#charts rect.bar').length > 0")
    assert chrome.console_errors() == []

    page = tmp_path / "sweep.html"
    page.write_text(_probe(cli, tmp_path, "html"), encoding="utf-8")
    chrome.open(page)
    assert chrome.js("return document.querySelectorAll('#sweep-chart circle').length") == 10
    chrome.driver.save_screenshot(str(B.artifacts_dir() / "html-probe.png"))
    assert chrome.console_errors() == []


def test_browser_matrix_draws_only_the_rows_in_view(chrome, tmp_path, audited):
    """2,000 tables: the matrix lays out the rows in view (and a margin), the rest as one
    scrolls; counts and sorting cover every row."""
    from tilefit.reporters.html import render_page

    _, audit = audited
    data = audit.to_json()
    data["tables"] = [dict(t, p=f"{i:04d}/{t['p']}") for i in range(400) for t in data["tables"]]
    page = tmp_path / "big.html"
    page.write_text(render_page(data, "big"), encoding="utf-8")
    chrome.open(page, "#matrix?sort=path")
    _wait(chrome, "return document.querySelectorAll('#mbody tr.row').length > 0")
    assert chrome.js("return document.getElementById('count').textContent") == "2000 of 2000 tables"
    in_dom = chrome.js("return document.querySelectorAll('#mbody tr.row').length")
    assert 0 < in_dom < 300
    last = max(range(len(data["tables"])), key=lambda i: data["tables"][i]["p"])
    chrome.js("const w = document.getElementById('matrix-wrap'); w.scrollTop = w.scrollHeight;")
    _wait(chrome, f"return document.querySelector('#mbody tr.row[data-i=\"{last}\"]') !== null")
    assert chrome.js("return [...document.querySelectorAll('#mbody tr.row')].pop().dataset.i") == str(last)
    assert chrome.console_errors() == []


def test_templates_are_package_data():
    """Every template file is matched by pyproject's package-data (a wheel ships it)."""
    import fnmatch
    import tomllib

    conf = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "tilefit.reporters.html.templates" in conf["tool"]["setuptools"]["packages"]  # a package of data
    patterns = conf["tool"]["setuptools"]["package-data"]["tilefit.reporters.html.templates"]
    folder = Path(__file__).parents[1] / "linter" / "reporters" / "html" / "templates"
    files = [p.relative_to(folder).as_posix() for p in folder.iterdir()]
    assert {"report.html", "report.js", "report.css", "sweep.html"} <= set(files)
    assert all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files)


def test_page_after_fix_shows_the_files_as_written(tmp_path, cli):
    work = tmp_path / "configs"
    shutil.copytree(FIXTURE, work)
    out = tmp_path / "fixed.html"
    r = cli("check", work, "--target", "consumer", "--estimator", "analytic", "--fix", "--output-format", "html",
            "-o", out, "--isolated", "--no-cache")
    assert r.exit_code == 1, r.output  # DEV002 and SCH001 remain
    data = embedded_data(out.read_text(encoding="utf-8"))
    assert data["meta"]["fixes_applied"] and data["summary"]["tables_over"] == 0
    assert data["fixes"] and all(f["applied"] for f in data["fixes"])
    for f in data["fixes"]:
        t = data["tables"][f["t"]]
        written = json.loads((work / t["p"]).read_text(encoding="utf-8"))[f["k"]]
        assert dict(t["en"])[f["k"]] == f["new"] and data["configs"][f["new"]] == written
