"""The package's build configuration (issue 19, set-up): every data file ships in a wheel, the
install is quiet, and the README's test command installs what the CPU tests need and no more.

setuptools' rules, as ``[tool.setuptools]`` in pyproject.toml spells them: a file ships when a
glob of ``package-data`` of the nearest declared package above it matches its path relative to
that package's folder (``*`` within one folder); a folder with a Python name that holds files
but is no declared package is what ``pip install`` warns about ("Package would be ignored").
No wheel is built here (that needs a newer setuptools from the network, and CI has none): the
rules are checked against the files in the repository.
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
DATA_SUFFIXES = {".json", ".html", ".css", ".js", ".sha256"}


@pytest.fixture(scope="module")
def config():
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _package_dirs(config) -> dict[str, Path]:
    st = config["tool"]["setuptools"]
    roots = st["package-dir"]
    out = {}
    for pkg in st["packages"]:
        parts = pkg.split(".")
        for n in range(len(parts), 0, -1):
            root = ".".join(parts[:n])
            if root in roots:
                out[pkg] = REPO / roots[root] / Path(*parts[n:]) if parts[n:] else REPO / roots[root]
                break
    return out


def _glob_matches(rel: str, pattern: str) -> bool:
    a, b = rel.split("/"), pattern.split("/")
    return len(a) == len(b) and all(fnmatch.fnmatchcase(x, y) for x, y in zip(a, b))


def _source_files(dirs):
    for root in {REPO / "linter", REPO / "rules", REPO / "device_db"}:
        for path in root.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                yield path


def test_every_data_file_ships_as_package_data(config):
    dirs = _package_dirs(config)
    data = config["tool"]["setuptools"]["package-data"]
    by_dir = {d: pkg for pkg, d in dirs.items()}
    missing = []
    checked = 0
    for path in _source_files(dirs):
        if path.suffix not in DATA_SUFFIXES and not (path.suffix == ".md" and "data" in path.parts):
            continue
        checked += 1
        owner = next((p for p in path.parents if p in by_dir), None)
        assert owner is not None, f"{path} lies outside every package"
        pkg = by_dir[owner]
        rel = path.relative_to(owner).as_posix()
        if not any(_glob_matches(rel, g) for g in data.get(pkg, ())):
            missing.append(f"{path.relative_to(REPO)} (package {pkg})")
    assert checked > 200, checked  # the smem tables, device files, schemas, templates
    assert not missing, "not in any package-data glob: " + ", ".join(missing)


def test_no_folder_of_data_is_an_undeclared_package(config):
    """The cause of pip's 'Package would be ignored' screen: a folder with a Python name inside
    a package, holding files, that ``packages`` does not list."""
    dirs = _package_dirs(config)
    declared = set(dirs.values())
    undeclared = set()
    for path in _source_files(dirs):
        for parent in path.parents:
            if parent == REPO or parent in declared:
                break
            if parent.name.isidentifier() and any(a in declared for a in parent.parents):
                undeclared.add(parent.relative_to(REPO).as_posix())
    assert not undeclared, f"folders setuptools would warn about: {sorted(undeclared)}"


def test_every_declared_package_exists(config):
    for pkg, d in _package_dirs(config).items():
        assert d.is_dir(), f"{pkg} -> {d} does not exist"


def test_the_test_extra_runs_the_suite_in_parallel_without_torch_or_ray(config):
    extra = [r.split(";")[0].strip().lower() for r in config["project"]["optional-dependencies"]["test"]]
    names = {r.split(">")[0].split("=")[0].split("<")[0].strip() for r in extra}
    assert "pytest-xdist" in names and "triton" in names
    assert not names & {"torch", "ray"}, names  # gigabytes; the gpu-test extra has them
    addopts = config["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "-n" in addopts and "loadscope" in addopts  # a module's fixture runs once
