"""Function bodies held as text until read (issue 18.5, memory: ``pysource/lazybody.py``).

The scan releases the bodies of functions that hold no launch and no kernel; a read of any kind
parses them again. What the scan and the call-site evaluation see must be the same as with every
body kept (``TILEFIT_KEEP_BODIES=1``): the same nodes at the same positions, call records on the
nodes of the body, closures' enclosing functions, and the values a launch is judged with through
a helper's body and through a caller found in a released body. The fixtures are our own code."""

from __future__ import annotations

import ast

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, branches
from tilefit.callsites.values import local_assignments
from tilefit.pysource.lazybody import LazyBody, release_filled
from tilefit.pysource.scan import scan_source
from tilefit.pysource.source import SourceFile

# methods, closures, a class in a function, a docstring less indented than the method, CRLF in
# one function, a form feed between functions, non-ASCII text, calls in defaults and in bodies
TRICKY = (
    "import triton\nimport triton.language as tl\n\n\n"
    "def helper(a, b=len('x')):\n"
    "    x = a * 2\n"
    "    def inner(y):\n"
    "        return max(y, x)\n"
    "    class Local:\n"
    "        def m(self):\n"
    "            return min(x, 1)\n"
    "    return inner(b) + Local().m()\n"
    "\x0c\n"
    "class Runner:\n"
    "    def run(self, n):\n"
    "        \"\"\"Docstring\n"
    "with a line at column 0 \u00e9.\"\"\"\n"
    "        total = sum(range(n))\n"
    "        return helper(total, 3)\n"
    "\n"
    "    def short(self):\n"
    "        return 1\n"
    "\n"
    "def crlf(a):\r\n"
    "    b = a + 1\r\n"
    "    c = abs(b)\r\n"
    "    return c\r\n"
    "\n"
    "@triton.jit\n"
    "def kern(x_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    mask = offs < n\n"
    "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)\n"
)


def _where(n):
    return None if n is None else (type(n).__name__, n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)


def _signature(module):
    out = []
    for name, recs in sorted(module.calls.items()):
        out.extend((name, _where(r.node), _where(r.scope), r.module_func) for r in recs)
    for f in ast.walk(module.source.tree):
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((_where(f), _where(getattr(f, "_tilefit_outer", None)), getattr(f, "_tilefit_top", None)))
    out.append(ast.dump(module.source.tree, include_attributes=True))
    return out


def _scan(path, monkeypatch, keep):
    monkeypatch.setenv("TILEFIT_KEEP_BODIES", "1" if keep else "0")
    return scan_source(SourceFile.read(str(path)))


def test_released_bodies_read_back_as_the_first_parse(tmp_path, monkeypatch):
    path = tmp_path / "tricky.py"
    path.write_bytes(TRICKY.encode())
    kept = _scan(path, monkeypatch, keep=True)
    released = _scan(path, monkeypatch, keep=False)
    tops = released.source.tree.body
    defs = [s for s in tops if isinstance(s, ast.FunctionDef)] + \
        [m for c in tops if isinstance(c, ast.ClassDef) for m in c.body if isinstance(m, ast.FunctionDef)]
    lazy = {f.name for f in defs if isinstance(f.__dict__["body"], LazyBody) and f.__dict__["body"]._fn is not None}
    # before anything reads them: the long functions (a kernel too) are released, the 2-line method is not
    assert {"helper", "run", "crlf", "kern"} <= lazy and "short" not in lazy, lazy
    assert released.kernels["kern"].node.__dict__["body"] is not None
    assert _signature(released) == _signature(kept)
    # every call record is on a node of the (re-parsed) tree
    ids = {id(n) for n in ast.walk(released.source.tree)}
    assert all(id(r.node) in ids for recs in released.calls.values() for r in recs)


def test_bodies_released_again_read_back_as_the_first_parse(tmp_path, monkeypatch):
    path = tmp_path / "tricky.py"
    path.write_bytes(TRICKY.encode())
    kept = _scan(path, monkeypatch, keep=True)
    released = _scan(path, monkeypatch, keep=False)
    first = _signature(released)  # reads (fills) every body
    helper = released.functions["helper"]
    old = [n for stmt in helper.body for n in ast.walk(stmt) if hasattr(n, "lineno")]  # (not ast.Load &c.)
    assert local_assignments(helper) and "_tilefit_locals" in helper.__dict__
    assert release_filled(released) == 4  # helper, run, crlf, kern
    body = helper.__dict__["body"]
    assert isinstance(body, LazyBody) and not body.filled and list.__len__(body) == 0
    # what the evaluation cached from the statements goes with them; the scan's own marks stay
    assert "_tilefit_locals" not in helper.__dict__ and helper._tilefit_top is True
    assert all(r.lazy is not None for recs in released.calls.values() for r in recs if r._node is None)
    # read again: the same tree and records as the first parse, on new nodes
    assert _signature(released) == first == _signature(kept)
    new = [n for stmt in helper.body for n in ast.walk(stmt) if hasattr(n, "lineno")]
    assert len(new) == len(old) and not {id(n) for n in new} & {id(n) for n in old}  # (old still held here)
    ids = {id(n) for n in ast.walk(released.source.tree)}
    assert all(id(r.node) in ids for recs in released.calls.values() for r in recs)
    assert release_filled(released) == 4 and release_filled(released) == 0


KERNEL = ("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
          "def stage2(x_ptr, BLOCK_DV: tl.constexpr):\n"
          "    tl.store(x_ptr + tl.arange(0, BLOCK_DV), 0)\n\n\n"
          "def _block(D):\n"
          "    if D > 128:\n"
          "        return 256\n"
          "    width = triton.next_power_of_2(D)\n"
          "    return width\n\n\n"
          "def decode(out, D):\n"
          "    grid = (1,)\n"
          "    warps = 4\n"
          "    stage2[grid](out, BLOCK_DV=_block(D), num_warps=warps)\n")
CALLER = ("from lk import decode\n\n\n"
          "def forward(out):\n"
          "    width = 96\n"
          "    extra = 1\n"
          "    return decode(out, width + extra)\n")


def _block_dv(tmp_path, monkeypatch, keep, again=False):
    monkeypatch.setenv("TILEFIT_KEEP_BODIES", "1" if keep else "0")
    (tmp_path / "lk.py").write_text(KERNEL)
    (tmp_path / "user.py").write_text(CALLER + "\n# triton\n")
    project = Project.scan([str(tmp_path / "lk.py"), str(tmp_path / "user.py")])
    helper = project.by_path[str(tmp_path / "lk.py")].functions["_block"]
    released = isinstance(helper.__dict__["body"], LazyBody)
    rounds = []
    for _ in range(2 if again else 1):  # again: the bodies the first build read are emptied, then read again
        sites = build_scenario_sites(project, resolve(["llama-gqa-128"]), "cuda", frozenset({120}))
        (site,) = [s for s in sites.launches if s.kernel.name == "stage2"]
        rounds.append(sorted({v.value for inst in site.instances for _, v in branches(inst.value("BLOCK_DV"))
                              if isinstance(v, Lit)}))
        if again:
            (launch,) = project.by_path[str(tmp_path / "lk.py")].launches
            decode = project.by_path[str(tmp_path / "lk.py")].functions["decode"]
            # a second build reads the launcher again: its launch is the one of the new parse
            assert launch.scope is decode and any(n is launch.node for n in ast.walk(decode))
            user = project.by_path[str(tmp_path / "user.py")]  # a second-pass module: read by the caller search
            assert user.materialised
            # the sites' build released the bodies each module's launches read (_block, forward())
            assert not helper.__dict__["body"].filled
            assert project.release_bodies() >= 2  # the launcher decode(), the caller's module
            assert not helper.__dict__["body"].filled and not decode.__dict__["body"].filled
            assert not user.materialised and "source" not in user.__dict__
    assert all(r == rounds[0] for r in rounds), rounds
    return released, rounds[0]


def test_a_launch_is_judged_through_released_helper_and_caller_bodies(tmp_path, monkeypatch):
    released, got = _block_dv(tmp_path, monkeypatch, keep=False)
    again_flag, again = _block_dv(tmp_path, monkeypatch, keep=False, again=True)
    kept_flag, kept = _block_dv(tmp_path, monkeypatch, keep=True)
    assert released and again_flag and not kept_flag
    # the caller's 96 + 1 reaches _block through decode: next_power_of_2(97)
    assert got == again == kept == [128], (got, again, kept)
