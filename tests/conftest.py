"""Shared fixtures: the real corpus, a CLI runner, and a scratch copy of files."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Tests judge with the bundled performance coefficients, not a developer's own calibration.
os.environ.setdefault("TILEFIT_ISOLATED_PERF", "1")
# ... and with the bundled shared-memory model: no user data folder (tests that need one set it).
os.environ["TILEFIT_DATA_DIR"] = ""


def _corpus_root(tmp_factory) -> Path:
    """The unmodified SGLang 0.5.23 / vLLM 0.33.0 corpus: $TILEFIT_CORPUS, ../shared/corpus, or
    the byte-identical copy packed in tests/data/corpus.tar.xz (so a clean checkout can test); the
    rule is bench/corpus_root.py's, which the benchmarks read too."""
    spec = importlib.util.spec_from_file_location("_tilefit_bench_corpus_root", REPO / "bench" / "corpus_root.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.corpus_root(tmp_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def shared_compiles(tmp_path_factory) -> Path:
    """One folder of exact-compile records for the session, shared by the xdist workers (their
    base folders have one parent). The modules that check our call-site fixture tree compile many
    of the same points: test_coverage_stats compiled again 38 points that test_callsites_exact and
    test_callsite_prune had compiled, each in a fresh cache of its own. A record is keyed by the
    Triton release, the kernel's source, the arch and the spec, and written atomically, so which
    module compiles a point first changes no answer."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-compiles"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def cache_sharing_compiles(tmp_path_factory, shared_compiles):
    """``TILEFIT_CACHE_DIR`` for the module: a fresh cache root (result and run caches the
    module's own) whose compile records (``<root>/exact``) are the session's shared ones."""
    root = tmp_path_factory.mktemp("cache")
    (root / "exact").symlink_to(shared_compiles, target_is_directory=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFIT_CACHE_DIR", str(root))
    yield root
    mp.undo()


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return _corpus_root(tmp_path_factory)


@pytest.fixture(scope="session")
def corpus_files(corpus) -> list[Path]:
    files = sorted(p for p in corpus.rglob("*.json"))
    assert len(files) == 1246, f"corpus incomplete at {corpus}: {len(files)} files"
    return files


@pytest.fixture
def cli():
    from click.testing import CliRunner

    from tilefit.cli import cli as group

    runner = CliRunner()

    def invoke(*args, **kwargs):
        return runner.invoke(group, [str(a) for a in args], catch_exceptions=False, **kwargs)

    return invoke


# issue 16 (tilefit pr, the GitHub Action): tests that run git in temporary repositories
@pytest.fixture
def git_env(tmp_path, monkeypatch):
    """No global/system git configuration, no GitHub Actions variables, a private cache."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    empty = tmp_path / "gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in list(os.environ):
        if var.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_", "GITHUB_", "INPUT_", "RUNNER_")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


# issue 17 (engine-exact calibration): tests that rewrite an engine's shipped calibration records
@pytest.fixture
def engine_package_copy(tmp_path, monkeypatch):
    """A function (kernel, engine, version) -> folder: that engine calibration's package folder
    copied to tmp_path and read and written there (no user data folder), with the loaded
    forms forgotten before and after the test."""
    import shutil

    from tilefit.smem import engine_files, engine_model

    def copy(kernel: str, engine: str, version: str) -> Path:
        dst = tmp_path / "pkg"
        shutil.copytree(engine_files.package_dir(kernel, engine, version), dst)
        monkeypatch.setattr(engine_files, "package_dir", lambda *a: dst)
        monkeypatch.setattr(engine_files, "user_dir", lambda *a: None)
        engine_model.forget()
        return dst

    yield copy
    engine_model.forget()
