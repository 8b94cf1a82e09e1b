"""Issue 19 (formats CI uses): the result cache keeps the fixer's plans beside the results (and
the html page's per-entry verdicts), so a warm ``full`` or ``html`` run (they read the plans:
``full``'s hints, the report's fix pages) prints the same bytes without planning; whatever changes a plan (the targets, the fix margin, a
calibration file's contents, tilefit's version) plans again; a damaged plans file only costs a
re-check."""

from __future__ import annotations

import json
import os

import pytest
from damage import each_damage

from tilefit.fix.planner import FixPlanner

# two offending entries the fixer plans and one it leaves alone with a reason (GROUP_SIZE_M 1.5)
TABLE = ('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, '
         '"num_warps": 8, "num_stages": 4}, "8192": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, '
         '"BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 6}, '
         '"16": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1.5, '
         '"num_warps": 4, "num_stages": 5}}\n')
NAME = "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"


@pytest.fixture
def table(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # the html page's date
    path = tmp_path / NAME
    path.write_text(TABLE)
    return path


def _args(table, fmt, *extra):
    return ("check", table, "--isolated", "-t", "rtx4090", "-t", "rtx5090", "--estimator", "analytic",
            "--output-format", fmt, *extra)


def _no_planning(monkeypatch):
    def search(self, *a, **k):
        raise AssertionError("planned again although the table and the settings did not change")

    monkeypatch.setattr(FixPlanner, "_search", search)


def _html(cli, table, out, *extra):
    r = cli(*_args(table, "html", "-o", out, *extra))
    text = out.read_text()
    return r, text.replace(str(out), "OUT")  # the page names its command line


def test_full_and_html_take_the_plans_from_the_cache(cli, table, tmp_path, monkeypatch):
    fresh_full = cli(*_args(table, "full", "--no-cache"))
    _, fresh_html = _html(cli, table, tmp_path / "fresh.html", "--no-cache")
    assert fresh_full.exit_code == 1 and "= help: Set" in fresh_full.stdout
    report = json.loads(fresh_html.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    assert len(report["fixes"]) == 2 and any(t.get("nofix") for t in report["tables"]), report["tables"]

    cold = cli(*_args(table, "json"))  # fills the cache, plans included
    assert cold.exit_code == 1
    assert list((tmp_path / "cache" / "results").glob("*.plans.json"))
    _no_planning(monkeypatch)
    warm_full = cli(*_args(table, "full"))
    assert warm_full.exit_code == 1 and warm_full.stdout == fresh_full.stdout
    r, warm_html = _html(cli, table, tmp_path / "warm.html")
    assert r.exit_code == 1, r.output
    assert warm_html.replace("warm.html", "X") == fresh_html.replace("fresh.html", "X")
    assert cli(*_args(table, "json")).stdout == cold.stdout
    # the page's per-entry verdicts are kept too: the next html run estimates nothing
    (needs,) = (tmp_path / "cache" / "results").glob("*.needs.json")
    from tilefit.estimate import Estimator

    def no_estimate(self, *a, **k):
        raise AssertionError("estimated again although nothing changed")

    estimate = Estimator.estimate
    monkeypatch.setattr(Estimator, "estimate", no_estimate)
    r, again = _html(cli, table, tmp_path / "again.html")
    assert r.exit_code == 1, r.output
    assert again.replace("again.html", "X") == fresh_html.replace("fresh.html", "X")
    monkeypatch.setattr(Estimator, "estimate", estimate)
    data = json.loads(needs.read_text())
    assert data["needs"] and all(v[1] in "fonu" for v in data["needs"].values())
    for value in data["needs"].values():
        value[1] = "not a verdict"  # damaged: estimated again, same page
    needs.write_text(json.dumps(data))
    r, damaged = _html(cli, table, tmp_path / "damaged.html")
    assert damaged.replace("damaged.html", "X") == fresh_html.replace("fresh.html", "X")


def test_whatever_changes_a_plan_plans_again(cli, table, tmp_path, monkeypatch):
    import tilefit

    perf = tmp_path / "perf.json"
    from tilefit.perf.coefficients import write_coefficients

    write_coefficients(perf, {"mma_efficiency": 0.5}, {"method": "a test of the plan cache"})
    monkeypatch.setenv("TILEFIT_PERF_MODEL_PATH", str(perf))
    assert cli(*_args(table, "full")).exit_code == 1  # fills the cache
    _no_planning(monkeypatch)
    assert cli(*_args(table, "full")).exit_code == 1  # a hit

    def plans_again(*extra):
        r = cli(*_args(table, "full", *extra))
        assert r.exit_code == 2 and "planned again" in r.output, (extra, r.output)

    plans_again("-t", "rtx3090")  # another target
    plans_again("--fix-margin", "1024")  # another margin
    plans_again("--unsafe-fixes")  # another class of safety
    # the calibration's contents, even rewritten at the same size and time
    st = perf.stat()
    text = perf.read_text()
    assert '"mma_efficiency": 0.5' in text
    perf.write_text(text.replace('"mma_efficiency": 0.5', '"mma_efficiency": 0.7'))
    os.utime(perf, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert perf.stat().st_size == st.st_size and perf.stat().st_mtime_ns == st.st_mtime_ns
    plans_again()
    perf.write_text(text)
    os.utime(perf, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cli(*_args(table, "full")).exit_code == 1  # the same contents: a hit again
    monkeypatch.setattr(tilefit, "__version__", tilefit.__version__ + ".post1")  # another release
    plans_again()


def test_damaged_plans_only_cost_a_recheck(cli, table, tmp_path):
    fresh = cli(*_args(table, "full", "--no-cache")).stdout
    assert cli(*_args(table, "full")).stdout == fresh
    (plans,) = (tmp_path / "cache" / "results").glob("*.plans.json")
    (summary,) = (tmp_path / "cache" / "results").glob("*.summary.json")

    def full():  # a warm full report reads the plans only without their summary
        summary.write_text("{")
        return cli(*_args(table, "full")).stdout

    data = json.loads(plans.read_text())
    (record,) = [hit[1] for hit in data["files"].values()]
    first = next(iter(record["plans"].values()))
    first["title"] = "Set something else"  # a plan that is not its diagnostics' fix
    plans.write_text(json.dumps(data))
    assert full() == fresh
    assert "Set something else" not in plans.read_text()  # re-planned and stored again
    # a need that names no stored target group (or no group index at all): a re-check too
    for need in ([99, 1, 2], [True, 1, 2], [0, 1]):
        data = json.loads(plans.read_text())
        (record,) = [hit[1] for hit in data["files"].values()]
        assert record["groups"] and all(len(n) == 3 for p in record["plans"].values() for n in p["needs"])
        next(iter(record["plans"].values()))["needs"][0] = need
        plans.write_text(json.dumps(data))
        assert full() == fresh
        assert json.loads(plans.read_text()) != data, need  # re-planned and stored again
    for text in ("{", json.dumps({"format": 3, "files": {str(table): ["x", {}]}}), "[]"):
        plans.write_text(text)
        assert full() == fresh


# a real table (vLLM 0.33.0) two of whose entries have a faster unsafe fix on an RTX 4090 and 5090
FASTER_UNSAFE = ("vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/"
                 "E=64,N=8960,device_name=NVIDIA_H100_80GB_HBM3,dtype=bf16.json")
HINT = "(2 entries have a faster unsafe fix with `--unsafe-fixes`.)"


def _side_file_reads(monkeypatch) -> list[str]:
    """The suffixes (``.plans.json``, ``.summary.json``, ...) of the files kept beside the
    results that the runs from now on read, in order."""
    import tilefit.resultcache as resultcache

    reads: list[str] = []
    real = resultcache.read_side_file

    def counted(file, member, fmt):
        if file is not None:
            reads.append(file.name.split(".", 1)[1])
        return real(file, member, fmt)

    monkeypatch.setattr(resultcache, "read_side_file", counted)
    return reads


def test_a_warm_full_report_or_kept_page_reads_the_plans_summary_not_the_plans(cli, corpus, tmp_path, monkeypatch):
    """Issue 19: a warm ``full`` run needs of the plans only the summary's faster-unsafe count:
    it reads the small per-file summary kept with the results (``<key>.summary.json``), never the
    plans file (3.3 MB on the corpus); an html run reads the plans only when it draws its page."""
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    path = corpus / FASTER_UNSAFE
    fresh = cli(*_args(path, "full", "--no-cache")).stdout
    assert HINT in fresh
    fresh_html = _html(cli, path, tmp_path / "fresh.html", "--no-cache")[1].replace("fresh.html", "X")
    cli(*_args(path, "json"))  # fills the cache, plans and summary
    results = tmp_path / "cache" / "results"
    (summary,) = results.glob("*.summary.json")
    (plans,) = results.glob("*.plans.json")
    assert summary.stat().st_size * 5 < plans.stat().st_size
    reads = _side_file_reads(monkeypatch)
    _no_planning(monkeypatch)
    assert cli(*_args(path, "full")).stdout == fresh  # the report drawn, from the summary
    assert cli(*_args(path, "full")).stdout == fresh  # the report kept
    assert reads == ["summary.json", "summary.json"]
    reads.clear()
    # html: the page drawn from the plans (read once, when the audit asks), then kept
    assert _html(cli, path, tmp_path / "warm.html")[1].replace("warm.html", "X") == fresh_html
    assert reads.count("plans.json") == 1, reads
    reads.clear()
    assert _html(cli, path, tmp_path / "kept.html")[1].replace("kept.html", "X") == fresh_html
    assert "plans.json" not in reads, reads
    # damaged plans behind an intact summary: a kept report does not notice (nor need) them
    plans.write_text("{")
    assert cli(*_args(path, "full")).stdout == fresh
    assert plans.read_text() == "{"


def test_a_summary_that_does_not_fit_its_diagnostics_costs_a_read_of_the_plans(cli, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    path = corpus / FASTER_UNSAFE
    args = _args(path, "full")
    fresh = cli(*args, "--no-cache").stdout
    assert cli(*args).stdout == fresh and HINT in fresh
    (summary,) = (tmp_path / "cache" / "results").glob("*.summary.json")
    data = json.loads(summary.read_text())
    (record,) = [hit[1] for hit in data["files"].values()]
    assert sorted(record["faster"]) == ["256", "32"], record
    reads = _side_file_reads(monkeypatch)
    _no_planning(monkeypatch)
    for faster in (["99"], [32], "32", None):  # an entry with no fix, not a key, not a list
        summary.write_text(json.dumps(dict(data, files={str(path): [data["files"][str(path)][0],
                                                                    dict(record, faster=faster)]})))
        reads.clear()
        assert cli(*args).stdout == fresh, faster
        assert reads == ["summary.json", "plans.json"], (faster, reads)
    for text in ("{", "[]", json.dumps(dict(data, files={str(path): ["x", record]}))):
        summary.write_text(text)
        assert cli(*args).stdout == fresh, text
    summary.write_text(json.dumps(dict(data, files={str(path): [data["files"][str(path)][0],
                                                                dict(record, version=2)]})))
    assert cli(*args).stdout == fresh


def test_restored_plans_answer_only_for_the_bytes_they_were_planned_on(table):
    """A planner that restored a table's plans plans a rewritten table at the same path afresh
    (the stored plans' edits are offsets into the old bytes)."""
    from tilefit.api import CheckOptions, build_engine
    from tilefit.config import Settings
    from tilefit.fix import make_planner
    from tilefit.tables import read_table

    opts = CheckOptions(targets=["rtx4090", "rtx5090"], estimator="analytic", fix=True)
    engine = build_engine(Settings(), opts)
    old = read_table(str(table))
    diags = make_planner(engine, Settings(), opts).attach(old, engine.check_table(old))
    first = make_planner(engine, Settings(), opts)
    first.attach(old, engine.check_table(old))
    record = first.stored_plans(str(table))
    assert set(record["plans"]) == {"4096", "8192"} and set(record["skipped"]) == {"16"}

    planner = make_planner(engine, Settings(), opts)
    assert planner.restore(old, diags, record)
    assert {k: p.entry for k, p in planner.plan_table(old, diags).plans.items()} == \
           {k: p.entry for k, p in first.plan_table(old, diags).plans.items()}
    # the same path, one entry moved by a space: other offsets, planned again
    new = read_table(str(table), data=TABLE.replace('"8192": {', '"8192":  {').encode())
    new_diags = engine.check_table(new)
    fresh = make_planner(engine, Settings(), opts).plan_table(new, new_diags)
    replanned = planner.plan_table(new, new_diags)
    assert [(k, p.fix.edits) for k, p in replanned.plans.items()] == [(k, p.fix.edits) for k, p in fresh.plans.items()]
    assert replanned.plans["8192"].fix.edits != planner.plan_table(old, diags).plans["8192"].fix.edits
    # a record that does not fit the diagnostics is refused
    assert not make_planner(engine, Settings(), opts).restore(old, diags, dict(record, plans={"99": record["plans"]["4096"]}))


def test_a_planner_with_only_attach_plans_every_run_and_is_handed_back(table):
    """tilefit.api.run_check takes any object with attach() (tilefit.planning): such a planner's
    fixes are never served from the result cache (its settings are unknown to the run key), it
    plans in the serial loop, and the result names the object passed."""
    from dataclasses import replace

    from tilefit.api import CheckOptions, run_check
    from tilefit.config import Settings

    calls = []

    class Marker:
        def attach(self, table, diagnostics):
            calls.append(table.path)
            return [replace(d, message=d.message + " [seen]") for d in diagnostics]

    opts = CheckOptions(targets=["rtx4090"], estimator="analytic", cache_fixes=True)
    for _ in range(2):  # the second run has a warm cache for the check, not for this planner
        marker = Marker()
        result = run_check([str(table)], opts, Settings(), planner=marker)
        assert result.planner is marker
        assert result.diagnostics and all(d.message.endswith(" [seen]") for d in result.diagnostics)
    assert calls == [str(table), str(table)]
    assert run_check([str(table)], opts, Settings()).diagnostics  # the check's own cache still works
    with pytest.raises(TypeError, match="attach"):
        run_check([str(table)], opts, Settings(), planner=object())
def test_a_warm_html_run_writes_the_page_it_made_before(cli, table, tmp_path, monkeypatch):
    """The page is kept beside the results: a run with the same inputs writes it again (another
    ``-o`` and another time written in) without building the audit; a changed table, or a
    damaged page file, builds the page afresh."""
    import tilefit.audit
    from tilefit.reporters.html import pagecache

    _, fresh = _html(cli, table, tmp_path / "fresh.html", "--no-cache")
    r, cold = _html(cli, table, tmp_path / "cold.html")
    assert r.exit_code == 1 and cold.replace("cold.html", "X") == fresh.replace("fresh.html", "X")
    (page,) = (tmp_path / "cache" / "results").glob("*.page")
    build = tilefit.audit.build_check_audit

    def no_audit(*a, **k):
        raise AssertionError("built the audit again although nothing changed")

    monkeypatch.setattr(tilefit.audit, "build_check_audit", no_audit)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700086400")  # a day later: the page says so
    r, warm = _html(cli, table, tmp_path / "warm.html")
    assert r.exit_code == 1, r.output
    monkeypatch.setattr(tilefit.audit, "build_check_audit", build)
    _, fresh_later = _html(cli, table, tmp_path / "later.html", "--no-cache")
    assert "2023-11-15T22:13:20+00:00" in fresh_later and "2023-11-15T22:13:20+00:00" not in fresh
    assert warm.replace("warm.html", "X") == fresh_later.replace("later.html", "X")

    def again(what):
        _, again = _html(cli, table, tmp_path / "again.html")
        assert again.replace("again.html", "X") == fresh_later.replace("later.html", "X"), what

    each_damage(page, pagecache.FORMAT, b"<", b">", again)  # built again and kept again

    # a changed entry: the page of the new table (its verdicts and fixes), not the stored one
    table.write_text(TABLE.replace('"num_stages": 6', '"num_stages": 2'))
    _, fresh_changed = _html(cli, table, tmp_path / "fresh2.html", "--no-cache")
    _, changed = _html(cli, table, tmp_path / "changed.html")
    assert changed.replace("changed.html", "X") == fresh_changed.replace("fresh2.html", "X") != \
        warm.replace("warm.html", "X")
