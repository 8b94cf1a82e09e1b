"""Layers without cycles: no import cycle between tilefit's subpackages and top-level modules.

Every module's AST is read, imports inside functions included (they run as soon as the function
does, so they tie the packages together as much as a module-level import); imports under
``if TYPE_CHECKING:`` are left out (they never run). A *unit* is a subpackage of ``tilefit``
(``tilefit.smem``, ``tilefit.rules``, ``tilefit.kernels``, ...) or a top-level module
(``tilefit.api``, ``tilefit.engine``, ...); imports inside a unit are its own business. The unit
graph must be acyclic, and a few edges must not exist at all.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parent.parent
# import root -> folder (pyproject's package-dir)
ROOTS = {"tilefit": REPO / "linter", "tilefit.rules": REPO / "rules", "tilefit.device_db": REPO / "device_db"}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for root, folder in ROOTS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join([root, *parts])] = path
    return mods


MODULES = _modules()


def unit(module: str) -> str:
    """``tilefit.smem.exact`` -> ``tilefit.smem``; ``tilefit.api`` -> ``tilefit.api``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else module


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for child in node.body:
                    skip.update(id(n) for n in ast.walk(child))
    return skip


def imports_of(module: str, path: Path) -> set[str]:
    """The tilefit modules ``module`` imports, anywhere in its file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            # the longest prefix that is one of our modules (``from x import y`` may name a function)
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != "tilefit":  # the root package only holds the version
                out.add(name)
    return out


def unit_graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for module, path in MODULES.items():
        src = unit(module)
        g.add_node(src)
        for target in imports_of(module, path):
            dst = unit(target)
            if dst != src:
                where = g.edges[src, dst]["where"] if g.has_edge(src, dst) else []
                g.add_edge(src, dst, where=where + [f"{module} -> {target}"])
    return g


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    """Built when a test of this module runs, not when the module is imported: every xdist worker
    imports every test module to collect it, and the graph costs ~2 s CPU (issue 19)."""
    return unit_graph()


def _explain(graph: nx.DiGraph, cycle: list[str]) -> str:
    hops = []
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        hops.append(f"{a} -> {b} ({graph.edges[a, b]['where'][0]})")
    return "; ".join(hops)


def test_the_graph_sees_the_packages(graph):
    assert {"tilefit.smem", "tilefit.kernels", "tilefit.rules", "tilefit.device_db", "tilefit.api",
            "tilefit.fix", "tilefit.pysource", "tilefit.callsites"} <= set(graph)
    # function-level imports count: api -> fix used to be one
    assert graph.has_edge("tilefit.smem", "tilefit.kernels")


def test_no_import_cycle_between_units(graph):
    cycles = sorted(nx.simple_cycles(graph), key=len)
    assert not cycles, f"{len(cycles)} import cycles, e.g. {_explain(graph, cycles[0])}"


@pytest.mark.parametrize("src,dst", [
    ("tilefit.api", "tilefit.fix"),  # the application layer (tilefit.app, the CLI) composes them
    ("tilefit.fix", "tilefit.api"),
    ("tilefit.kernels", "tilefit.smem"),  # the registry is below the estimators
    ("tilefit.pysource", "tilefit.callsites"),
    ("tilefit.pysource", "tilefit.smem"),
    ("tilefit.callsites", "tilefit.rules"),
])
def test_forbidden_edges(graph, src, dst):
    assert not graph.has_edge(src, dst), graph.edges[src, dst]["where"]


def test_device_db_depends_on_nothing_of_the_app(graph):
    outside = {dst for dst in graph.successors("tilefit.device_db")}
    assert not outside, [graph.edges["tilefit.device_db", d]["where"] for d in outside]


def test_imports_inside_functions_count(tmp_path):
    """The parser finds imports in function bodies and relative imports (a cycle made only of
    those would otherwise pass)."""
    found = imports_of("tilefit.smem.probe", MODULES["tilefit.smem.probe"])
    assert "tilefit.kernels.checks" in found  # `from tilefit.kernels.checks import run_case` in launch_point
    assert "tilefit.kernels.registry" in found or "tilefit.kernels" in found


def test_every_package_is_installed():
    """Each folder with an ``__init__.py`` is a package pyproject lists (a non-editable install
    leaves out the rest)."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for root, folder in ROOTS.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            found.add(".".join([root, *rel.parts]))
    # the rest of the list are folders of data (tilefit.data, tilefit.kernels.*.smem, ...):
    # declared so setuptools installs them quietly; no Python code in them
    data_only = listed - found
    for pkg in data_only:
        parts = pkg.split(".")
        root = next(".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in ROOTS)
        folder = ROOTS[root].joinpath(*parts[len(root.split(".")):])
        assert folder.is_dir() and not any(folder.glob("*.py")), pkg
    assert found <= listed, sorted(found - listed)
