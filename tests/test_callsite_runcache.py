"""The call-site results of an unchanged tree are reused without parsing (issue 18, warm runs).

Real compiles of the fixture engine's GEMM for sm_89 (no GPU), shared by the tests of this
module through one compile cache; skipped without Triton.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("triton")

from tilefit.api import CheckOptions, run_check  # noqa: E402
from tilefit import callsiteresults as runcache  # noqa: E402
from tilefit.callsites.project import Project  # noqa: E402
from tilefit.config import Settings  # noqa: E402

ENGINE = Path(__file__).parent / "fixtures" / "callsites" / "engine"
PLAIN = {"engine.ops.gemm_plain:matmul_plain_kernel": {"a_ptr,b_ptr": ["bf16"]}}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The module's one compile cache (``<cache root>/exact``): the first test compiles the GEMM,
    the others read its records. Each test's run-cache records stay its own (a fresh cache root)."""
    return tmp_path_factory.mktemp("runcache-exact")


@pytest.fixture
def tree(tmp_path, monkeypatch, compiled):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "exact").symlink_to(compiled, target_is_directory=True)
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    copy = tmp_path / "engine"
    shutil.copytree(ENGINE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _check(paths, kernels=PLAIN, **opts):
    return run_check([str(p) for p in paths], CheckOptions(targets=["rtx4090"], coverage=True, **opts),
                     Settings(kernels=kernels))


def _seen(result):
    return [(d.code, d.path, d.span.start.line, d.message, d.fingerprint, d.fix) for d in result.diagnostics]


def _files(tree):
    # launcher.py imports gemm_plain and tiles; tiles.py is not given: it is followed
    return [tree / "ops" / "launcher.py", tree / "ops" / "gemm_plain.py"]


def test_a_warm_run_parses_nothing_and_gives_the_same_results(tree, monkeypatch):
    cold = _check(_files(tree))
    assert any(d.code == "SMEM002" for d in cold.diagnostics)
    assert cold.coverage is not None and cold.coverage.found > 0

    def no_scan(*a, **k):
        raise AssertionError("a warm run scanned the tree")

    reads = []
    real = runcache.read_bytes
    monkeypatch.setattr(Project, "scan", classmethod(no_scan))
    monkeypatch.setattr(runcache, "read_bytes", lambda p, *a: reads.append(str(p)) or real(p, *a))
    warm = _check(_files(tree))
    assert _seen(warm) == _seen(cold)
    assert warm.coverage.to_json() == cold.coverage.to_json()
    assert not [p for p in reads if p.endswith(".py")]  # only the record and the stat index were read


def test_a_changed_imported_file_is_seen(tree):
    cold = _check(_files(tree))
    (wide,) = [d for d in cold.diagnostics if d.code == "SMEM002" and d.path.endswith("launcher.py")]
    assert "Required: 147456" in wide.message  # 128x256x64 bf16 tiles at 4 stages on sm_89
    tiles = tree / "ops" / "tiles.py"
    text = tiles.read_text()
    assert "BLOCK_K = 64" in text
    tiles.write_text(text.replace("BLOCK_K = 64", "BLOCK_K = 16"))  # followed through an import
    again = _check(_files(tree))
    # 128x256x16 tiles fit at 4 stages: the wrapper's call is no longer an overflow
    assert not [d for d in again.diagnostics if d.code == "SMEM002" and d.path.endswith("launcher.py")]
    assert _seen(again) != _seen(cold)


def test_other_settings_are_other_records(tree):
    cold = _check(_files(tree))
    other = _check(_files(tree), kernels={"engine.ops.gemm_plain:matmul_plain_kernel": {"a_ptr,b_ptr": ["fp32"]}})
    assert [d.message for d in other.diagnostics] != [d.message for d in cold.diagnostics]
    # and the first configuration's record is still there
    assert _seen(_check(_files(tree))) == _seen(cold)


def test_allow_import_runs_are_not_stored(tree, monkeypatch):
    _check(_files(tree), allow_import=True)
    calls = []
    real = Project.scan.__func__
    monkeypatch.setattr(Project, "scan", classmethod(lambda cls, *a, **k: calls.append(1) or real(cls, *a, **k)))
    _check(_files(tree), allow_import=True)
    assert calls  # scanned again


def test_a_damaged_record_is_a_miss(tree):
    cold = _check(_files(tree))
    (record,) = [p for p in (tree.parent / "cache" / "callsites" / f"v{runcache.FORMAT}").glob("*.json")
                 if p.name != "stat.json"]
    record.write_text('{"format": 1, "key": 3')
    again = _check(_files(tree))
    assert _seen(again) == _seen(cold)


def test_a_run_whose_site_the_clock_stopped_is_not_stored(tree, monkeypatch):
    """A site stopped by the evaluation's time limit was decided by the machine's load (on an idle
    machine it may finish): such a run is not stored, so a later run evaluates it again."""
    from tilefit.callsites import values

    widening = Path(__file__).parent / "fixtures" / "callsites" / "bounded" / "widening.py"
    copy = tree / "widening.py"
    shutil.copy(widening, copy)
    monkeypatch.setattr(values, "MAX_SECONDS", 0.0)  # every site past its first 128 steps is out of time
    monkeypatch.setattr(values, "MAX_STEPS", 10**9)
    first = _check([copy], kernels={}, extend_select=["EST002"])
    assert any("bounded evaluation" in d.message for d in first.diagnostics if d.code == "EST002")
    calls = []
    real = Project.scan.__func__
    monkeypatch.setattr(Project, "scan", classmethod(lambda cls, *a, **k: calls.append(1) or real(cls, *a, **k)))
    _check([copy], kernels={}, extend_select=["EST002"])
    assert calls  # scanned again: the first run left no record
