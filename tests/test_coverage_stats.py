"""``tilefit check --statistics``: call sites found, evaluated, and not evaluated by reason
(issue 18), on our fixture tree (the engines' figures are in bench/RESULTS.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.callsites.coverage import reason_of
from tilefit.config import Settings

FIXTURES = Path(__file__).parent / "fixtures" / "callsites"


@pytest.fixture(scope="module", autouse=True)
def fresh_cache(cache_sharing_compiles):
    """A fresh cache; its compile records are shared with the other modules that compile the
    fixture tree (conftest.py)."""
    return cache_sharing_compiles


def test_coverage_counts_sites_and_reasons():
    result = run_check([str(FIXTURES)], CheckOptions(targets=["rtx4090"], estimator="analytic", coverage=True),
                       Settings())
    cov = result.coverage.to_json()
    assert cov["found"] == cov["launches"] + cov["autotune_lists"] > 0
    assert 0 < cov["evaluated"] < cov["found"]
    reasons = cov["not_evaluated_by_reason"]
    # the MLA launch (q.shape), the wrapper without defaults, the global computed by torch, the stopped fold
    assert reasons["run-time value (tensor shape, stride, ...)"] >= 1
    assert reasons["caller parameter without a default"] >= 1
    assert reasons["kernel not compiled without importing its file (allowlist)"] >= 1
    assert reasons["evaluation stopped (bounded evaluation)"] >= 1
    assert "other" not in reasons
    # every site not evaluated is counted under at least one reason
    assert sum(reasons.values()) >= cov["found"] - cov["evaluated"]


def test_without_targets_nothing_is_evaluated_and_it_says_why(cli):
    r = cli("check", FIXTURES, "--statistics")
    assert "call sites:" in r.output and "0 evaluated" in r.output and "no targets" in r.output


def test_statistics_print_the_coverage(cli):
    r = cli("check", FIXTURES, "--statistics", "-t", "rtx4090", "--estimator", "analytic")
    lines = r.output.splitlines()
    head = next(ln for ln in lines if ln.startswith("call sites:"))
    assert "found" in head and "evaluated (" in head and "%" in head
    assert any("not evaluated: caller parameter without a default" in ln for ln in lines)
    # the reasons add up to more than the sites not evaluated: the report says why
    n_not = int(head.rsplit(", ", 1)[1].split()[0])
    counts = [int(ln.split()[0]) for ln in lines if "  not evaluated: " in ln]
    assert (sum(counts) > n_not) == ("  not evaluated, by reason (a site can have several):" in lines), lines


def test_reason_labels():
    assert reason_of("no static value for BLOCK (`x.shape` is computed at run time)", "unknown") == \
        ["run-time value (tensor shape, stride, ...)"]
    assert reason_of("anything", "failed") == ["compile failed"]
    assert reason_of("no static value for A (evaluation stopped after 2 s (bounded evaluation)), "
                     "B (n is a parameter of f() without a default)", "unknown") == \
        ["evaluation stopped (bounded evaluation)", "caller parameter without a default"]


def test_a_kernel_that_takes_none_of_the_swept_dtypes_says_so(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    path = str(Path(__file__).parent / "fixtures" / "swept_dtype")
    result = run_check([path], CheckOptions(targets=["rtx4090"], coverage=True), Settings())
    cov = result.coverage.to_json()
    assert cov["found"] == 1 and cov["evaluated"] == 0
    # not "compile failed": a dtype tilefit guessed for an untyped pointer, not the kernel's fault
    assert cov["not_evaluated_by_reason"] == {"pointer dtypes not known statically (the kernel takes none of "
                                              "bf16/fp16/fp8)": 1}
    (finding,) = [d for d in result.diagnostics if d.code == "EST002"]
    assert "the kernel does not take the swept pointer dtypes" in finding.message
    assert "Both operands must be same dtype" in finding.message and "CompilationError: at" not in finding.message
    assert "give its pointers' dtypes in [tool.tilefit.kernels" in finding.message
