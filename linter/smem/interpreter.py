"""The Python interpreter that runs the compiles, and so the Triton release they are made with.

Every compile runs in a child process (:mod:`tilefit.smem.worker`). By default the child is
tilefit's own interpreter and compiles with the installed Triton. ``$TILEFIT_TRITON_PYTHON``
(``calibrate smem --triton-python PATH``) names another interpreter -- a virtual environment with
another Triton release and nothing else installed -- and the child runs there instead: that is
how one tilefit calibrates the engines' kernels for Triton 3.4 ... 3.8 beside its own 3.9. The
child imports tilefit from this process's own package folders (a finder installed by
:data:`_BOOT`, given the folders on the command line), so the other environment needs Triton and
``packaging`` only; it must be the same Python ``major.minor`` (requests travel as pickles).

Every figure a calibration writes is stamped with :func:`compile_triton_version` (the child's
Triton, read from its package metadata), as are the engine-kernel cache's folders: two releases
never share a cache entry.

Nothing here imports triton.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache

ENV = "TILEFIT_TRITON_PYTHON"


class InterpreterError(Exception):
    """The interpreter named for the compiles cannot run them (missing, no Triton, other Python)."""


# Run with ``python -I -c _BOOT FD ROOTS``: ROOTS maps tilefit's package names to their folders.
_BOOT = """\
import importlib.abc, importlib.util, json, os, sys
_roots = json.loads(sys.argv[2])
class _TilefitFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        folder = _roots.get(name)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])
sys.meta_path.insert(0, _TilefitFinder())
from tilefit.smem.worker import main
main([sys.argv[1]])
"""

# Run with ``python -I -c _VERSION``: the Triton release and the Python version, as JSON.
_VERSION = """\
import json, sys
from importlib.metadata import PackageNotFoundError, version
found = None
for dist in %r:
    try:
        found = version(dist)
        break
    except PackageNotFoundError:
        pass
try:
    import packaging  # noqa: F401 - tilefit.versions reads versions with it
    has_packaging = True
except ImportError:
    has_packaging = False
print(json.dumps({"triton": found, "python": list(sys.version_info[:2]), "packaging": has_packaging}))
"""


def compile_python() -> str | None:
    """The interpreter named for the compiles (``$TILEFIT_TRITON_PYTHON``), or None: tilefit's own."""
    value = os.environ.get(ENV, "").strip()
    return value or None


def use(python: str | None) -> None:
    """Name ``python`` for every later compile of this process and its children (None: tilefit's
    own interpreter). Checked at once: :class:`InterpreterError` if it cannot compile."""
    if python is None:
        os.environ.pop(ENV, None)
        return
    python = os.path.abspath(python)  # the child runs in a folder of its own; a venv's link is kept
    describe(python)  # refuse before any compile
    os.environ[ENV] = python


@lru_cache(maxsize=None)
def describe(python: str) -> dict:
    """``{"triton": "3.8.0", "python": [3, 11], "packaging": True}`` of ``python``; raises
    :class:`InterpreterError` when it does not run, has no Triton or is another Python."""
    from ..versions import TRITON_DISTRIBUTIONS

    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise InterpreterError(f"{python}: no such interpreter")
    try:
        proc = subprocess.run([python, "-I", "-c", _VERSION % (TRITON_DISTRIBUTIONS,)], capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InterpreterError(f"{python}: does not run ({exc})") from None
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise InterpreterError(f"{python}: does not run ({(proc.stderr or '').strip()[-300:]})") from None
    if not info.get("triton"):
        raise InterpreterError(f"{python}: Triton is not installed there")
    if tuple(info.get("python") or ()) != tuple(sys.version_info[:2]):
        have = ".".join(map(str, info.get("python") or ()))
        raise InterpreterError(f"{python}: Python {have}; tilefit runs on Python "
                               f"{sys.version_info[0]}.{sys.version_info[1]} and the compiles must too")
    if not info.get("packaging"):
        raise InterpreterError(f"{python}: the 'packaging' distribution is not installed there")
    return info


def compile_triton_version() -> str | None:
    """The Triton release the compiles are made with: the named interpreter's, else the installed one."""
    python = compile_python()
    if python is None:
        from ..versions import installed_triton

        return installed_triton()
    return describe(python)["triton"]


def tilefit_roots() -> dict[str, str]:
    """``{package name: folder}`` of tilefit and its separately mapped packages (an editable install
    maps ``tilefit.rules`` and ``tilefit.device_db`` to folders of their own)."""
    import importlib.util

    out = {}
    for name in ("tilefit", "tilefit.rules", "tilefit.device_db"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            out[name] = list(spec.submodule_search_locations)[0]
    return out


def child_command(fd: int) -> list[str]:
    """The command line of a compile worker serving socket ``fd``."""
    python = compile_python()
    if python is None:
        return [sys.executable, "-I", "-m", "tilefit.smem.worker", str(fd)]
    return [python, "-I", "-c", _BOOT, str(fd), json.dumps(tilefit_roots())]
