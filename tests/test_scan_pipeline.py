"""The scan pipeline of a whole tree (issue 18 item 5): which files are parsed and kept.

A file with no kernel and no launch is parsed only when it calls a launcher wrapper by name, and
is then held without its AST (a :class:`DeferredModule`) until an import or a call of a name it
calls reads it. No call resolves to a method or a nested function, so a file that only calls
``d.update(...)`` is not read again because a class has a launching method ``update``. Fixtures
are our own code, written in the shape of the engines' launchers.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tilefit.callsites.project import DeferredModule, Project
from tilefit.callsites.sites import build_sites
from tilefit.callsites.values import Lit, branches
from tilefit.pysource.scan import scan_file

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs))


def launch(x, block):
    _copy[(1,)](x, BLOCK=block, num_stages=2)


class Buffer:
    def update(self, x, block):
        _copy[(1,)](x, BLOCK=block)

    def gather(self, x):
        def inner(block):
            _copy[(1,)](x, BLOCK=block)
        return inner
'''

CALLER = '''
from pkg.kernels import launch


def run(x):
    launch(x, 64)
'''

# no kernel, no launch; calls only names that are methods of the launching class
BYSTANDER = '''
import torch


def merge(d, extra, idx):
    d.update(extra)
    return torch.gather(d["x"], 0, idx)


def relaunch(obj, x):
    obj.inner.launch(x, 32)  # an attribute of an attribute: never a function of a module
'''


def _tree(tmp_path: Path) -> list[str]:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, text in (("kernels", KERNELS), ("caller", CALLER), ("bystander", BYSTANDER)):
        (pkg / f"{name}.py").write_text(textwrap.dedent(text))
    return [str(p) for p in sorted(pkg.glob("*.py"))]


def test_second_pass_modules_are_held_without_their_ast_until_read(tmp_path):
    project = Project.scan(_tree(tmp_path))
    by_name = {Path(p).name: m for p, m in project.by_path.items()}
    # kernels.py is parsed up front; caller.py and bystander.py match a wrapper's name
    # (`launch(`, and the launching methods' `update(` / `gather(`): held deferred
    assert project.stats.files == 4 and project.stats.parsed == 3
    assert sorted(by_name) == ["bystander.py", "caller.py", "kernels.py"]
    for name in ("caller.py", "bystander.py"):
        assert isinstance(by_name[name], DeferredModule) and not by_name[name].materialised
    assert not isinstance(by_name["kernels.py"], DeferredModule)


def test_only_what_is_read_is_parsed_again(tmp_path):
    project = Project.scan(_tree(tmp_path))
    sites = build_sites(project)
    by_name = {Path(p).name: m for p, m in project.by_path.items()}
    assert by_name["caller.py"].materialised  # it calls `launch`, whose callers were asked for
    # no call resolves to a method: the callers of Buffer.update / Buffer.gather.inner are not
    # looked for, so the file that only says d.update(...) / torch.gather(...) is never parsed again
    assert not by_name["bystander.py"].materialised
    at_caller = [s for s in sites.launches if s.caller is not None]
    assert [Path(s.path).name for s in at_caller] == ["caller.py"]


def test_a_deferred_module_reads_as_the_parsed_one(tmp_path):
    files = _tree(tmp_path)
    project = Project.scan(files)
    deferred = project.by_path[str(tmp_path / "pkg" / "bystander.py")]
    parsed = scan_file(str(tmp_path / "pkg" / "bystander.py"), deferred.name)
    assert deferred.calls.get("nothing_called", ()) == () and not deferred.materialised
    assert deferred.calls.get("launch", ()) == () and not deferred.materialised  # obj.inner.launch(...)
    assert deferred.binding("merge").kind == "def" and deferred.materialised  # an import reads it
    assert sorted(deferred.bindings) == sorted(parsed.bindings) == ["merge", "relaunch", "torch"]
    assert sorted(deferred.calls) == sorted(parsed.calls)
    assert deferred.error is None and deferred.kernels == {} and deferred.launches == []


def test_the_wrappers_caller_is_still_a_site_and_methods_have_none(tmp_path):
    project = Project.scan(_tree(tmp_path))
    sites = build_sites(project)
    at_caller = [s for s in sites.launches if s.caller is not None]
    assert [Path(s.path).name for s in at_caller] == ["caller.py"]  # not obj.inner.launch(...)
    (inst,) = at_caller[0].instances
    assert [v.value for _, v in branches(inst.args["BLOCK"]) if isinstance(v, Lit)] == [64]
    # the method launches are judged where they are (no caller is followed into them); the
    # wrapper's own launch only at its caller (its BLOCK is a parameter without a default)
    scopes = sorted(s.launch.scope_name for s in sites.launches if s.caller is None)
    assert scopes == ["Buffer.gather.inner", "Buffer.update"]


# a second-pass module whose function is long enough to be held as text (tilefit.pysource.lazybody)
LONG_CALLER = '''
from pkg.kernels import launch


def run(x, flag):
    if flag:
        launch(x, 64)
    else:
        launch(x, 128)
    return x
'''


def test_a_large_scan_frees_the_first_parse_of_its_second_pass_modules(tmp_path, monkeypatch):
    """A check runs with the cyclic collector paused, and a function held as text and its body
    point at each other: the first parse of a second-pass module (the :class:`DeferredModule`
    keeps only its names) is cyclic garbage. A large project frees it at the end of the scan."""
    import gc

    from tilefit.callsites import project as project_mod

    files = _tree(tmp_path)
    (tmp_path / "pkg" / "caller.py").write_text(textwrap.dedent(LONG_CALLER))
    was = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        monkeypatch.setattr(project_mod, "COLLECT_AT_PARSED", 10 ** 9)  # a small project: nothing collected
        small = Project.scan(files)
        left = gc.collect()
        monkeypatch.setattr(project_mod, "COLLECT_AT_PARSED", 3)  # as large as this one
        large = Project.scan(files)
        left_large = gc.collect()
    finally:
        if was:
            gc.enable()
    assert left > 0 and left_large == 0, (left, left_large)
    for project in (small, large):  # the same modules either way
        by_name = {Path(p).name: m for p, m in project.by_path.items()}
        assert isinstance(by_name["caller.py"], DeferredModule) and project.stats.parsed == 3
        assert by_name["caller.py"].binding("run").kind == "def"
