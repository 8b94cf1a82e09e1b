"""The scanned tree as a whole: modules by name and path, and names followed across imports.

``Project.scan(paths)`` reads every ``.py`` file once. Files that mention neither ``triton``
nor a subscript call (``](``) hold no kernel and no launch; they are parsed only when they call
a launcher wrapper by name (a second, cheap text pass), because a wrapper's call sites may
pass the launch's constants. Those modules are kept as :class:`DeferredModule`: without their
AST until an import or a call of a name they call reads them (half of an engine's ASTs were
of files matched by a launching method's name, ``update(``, which no call resolves to).
"""

from __future__ import annotations

import ast
import gc
import os
import re
from dataclasses import dataclass, field
from typing import Iterable

from tilefit.pysource.scan import Binding, KernelDef, ModuleScan, may_matter, module_name, scan_source
from tilefit.pysource.source import SourceFile
from tilefit.readfile import read_bytes

from .values import Evaluator, Lit, Ref, Unknown, Val

# a project of at least this many parsed files frees its cyclic garbage between the run's phases
# (:func:`collect_cycles`); a smaller one is not worth a full collection
COLLECT_AT_PARSED = 200

# functions of the standard library's math module the evaluator folds (values.Evaluator._builtin)
MATH_FUNCTIONS = frozenset({"gcd", "lcm", "ceil", "floor", "log2", "isqrt"})


def collect_cycles(parsed: int) -> int:
    """Free the cyclic garbage of a large project's phase (``parsed``: its parsed files, at least
    :data:`COLLECT_AT_PARSED`); how many objects were freed.

    A check runs with the cyclic collector paused (:func:`tilefit.api._collector_paused`), and
    what the call-site scan lets go is mostly cycles: a function whose body is held as text and
    its :class:`~tilefit.pysource.lazybody.LazyBody` point at each other, so do a body and the
    call records inside it, a kernel and its module. Without a collection they stay: the first
    scan of each second-pass module (:class:`DeferredModule` keeps only its names), every
    dematerialised module, and after the Python pass the whole project, under the report and
    the second pass of the tables (whose forked workers start with the parent's resident
    pages). Issue 18 item 5: sglang 0.5.23's whole check."""
    if parsed < COLLECT_AT_PARSED:
        return 0
    return gc.collect()


@dataclass
class ScanStats:
    files: int = 0  # .py files seen
    parsed: int = 0  # files parsed
    kernels: int = 0
    launches: int = 0
    autotuned: int = 0
    errors: list[str] = field(default_factory=list)


_LAUNCH_WORDS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "waves_per_eu"})


class _DeferredCalls:
    """The ``calls`` of a :class:`DeferredModule`: a name it never calls answers without parsing."""

    __slots__ = ("module",)

    def __init__(self, module: "DeferredModule"):
        self.module = module

    def get(self, name: str, default=None):
        """The calls of ``name`` that may resolve to a function (what ``sites._callers`` reads)."""
        if name not in self.module._call_names:
            return default
        return self.module.materialise().calls.get(name, default)


class DeferredModule(ModuleScan):
    """A module of the second pass (no kernel, no launch: it only calls a wrapper's name) held
    without its AST: its name, path and the names it calls. The first read of anything else
    (its bindings for an import, its calls of a name it does call, its source) parses the file
    again and fills the same object, so identities, order and lookups are those of a module
    parsed up front. An engine's package has hundreds of these; most are never read again."""

    _LAZY = frozenset({"source", "aliases", "bindings", "functions"})

    def __init__(self, scanned: ModuleScan):  # noqa: D107 - not the dataclass __init__
        self.path, self.name, self.is_package, self.extra = (scanned.path, scanned.name, scanned.is_package,
                                                             scanned.extra)
        self.kernels, self.all_kernels, self.launches = {}, [], []
        # the names of its calls that sites._callers evaluates: `a.b.name(...)` / `f().name(...)`
        # (an attribute of anything but a plain name) is never a function of a module
        self._call_names = frozenset(name for name, recs in scanned.calls.items() if any(r.module_func for r in recs))
        self.calls = _DeferredCalls(self)  # type: ignore[assignment]
        self.materialised = False

    @property
    def error(self) -> str | None:
        return None if not self.materialised else self.source.error

    def __getattr__(self, attr: str):
        if attr in DeferredModule._LAZY and not self.__dict__.get("materialised", True):
            return getattr(self.materialise(), attr)
        raise AttributeError(attr)

    def dematerialise(self) -> None:
        """Drop the AST again (a phase of the run is over): the next read parses the file again."""
        if self.materialised:
            for f in ("source", "aliases", "bindings", "functions"):
                self.__dict__.pop(f, None)
            self.calls = _DeferredCalls(self)  # type: ignore[assignment]
            self.materialised = False

    def materialise(self) -> "DeferredModule":
        if not self.materialised:
            fresh = scan_source(SourceFile.read(self.path), self.name, self.is_package)
            for f in ("source", "aliases", "bindings", "functions", "calls"):
                setattr(self, f, getattr(fresh, f))
            self.materialised = True
        return self


class Project:
    def __init__(self, modules: Iterable[ModuleScan] = (), on_demand: bool = True):
        self.modules: dict[str, list[ModuleScan]] = {}
        self.by_path: dict[str, ModuleScan] = {}
        self._suffix: dict[str, list[ModuleScan]] = {}
        self.stats = ScanStats()
        self.evaluator = Evaluator(self)
        # follow imports into files that were not named (a pre-commit hook passes single files)
        self.on_demand = on_demand
        for m in modules:
            self.add(m)

    # -- building ----------------------------------------------------------------------------
    def add(self, module: ModuleScan) -> None:
        self.modules.setdefault(module.name, []).append(module)
        self.by_path[os.path.abspath(module.path)] = module
        parts = module.name.split(".")
        for i in range(len(parts)):
            self._suffix.setdefault(".".join(parts[i:]), []).append(module)
        self.stats.kernels += len(module.all_kernels)
        self.stats.launches += len(module.launches)
        self.stats.autotuned += sum(1 for k in module.all_kernels if k.autotune is not None)
        if module.error:
            self.stats.errors.append(f"{module.path}: {module.error}")

    @classmethod
    def scan(cls, files: Iterable[str], on_demand: bool = True) -> "Project":
        """Scan ``files`` (paths of .py files)."""
        project = cls(on_demand=on_demand)
        deferred: list[str] = []  # paths only: a whole engine's bytes are not held (read again if needed)
        for path in files:
            project.stats.files += 1
            try:
                data = read_bytes(path)
            except OSError as exc:
                project.stats.errors.append(f"{path}: cannot read: {exc.strerror or exc}")
                continue
            if may_matter(data):
                project._add_source(path, data)
            else:
                deferred.append(path)
            del data
        wrappers = project.wrapper_names()
        if wrappers and deferred:
            pattern = re.compile(rb"\b(?:" + b"|".join(re.escape(w.encode()) for w in sorted(wrappers)) + rb")\s*\(")
            for path in deferred:
                try:
                    data = read_bytes(path)
                except OSError as exc:
                    project.stats.errors.append(f"{path}: cannot read: {exc.strerror or exc}")
                    continue
                if pattern.search(data):
                    project._add_source(path, data, defer=True)
        collect_cycles(project.stats.parsed)  # the first parse of each DeferredModule
        return project

    def _add_source(self, path: str, data: bytes, defer: bool = False) -> None:
        self.stats.parsed += 1
        name, is_pkg = module_name(path)
        module = scan_source(SourceFile.from_bytes(path, data), name, is_pkg)
        if defer and not module.all_kernels and not module.launches and module.error is None:
            module = DeferredModule(module)  # its AST is dropped until something reads it
        self.add(module)

    def wrapper_names(self) -> set[str]:
        """Names of launcher wrappers: functions with a launch of a kernel (or of a kernel passed
        as a parameter) whose keyword arguments read the function's parameters, so that their
        call sites may bind the launch's constants."""
        from .values import Frame, branches, function_params

        out = set()
        for m in self.all_modules():
            for launch in m.launches:
                scope = launch.scope
                if scope is None or scope.name in out or scope.name.startswith("__"):
                    continue
                params = set(function_params(scope))
                callee = launch.callee
                # a kernel passed in: only when the call looks like a Triton launch
                looks = any(kw.arg and (kw.arg in _LAUNCH_WORDS or kw.arg.isupper()) for kw in launch.node.keywords)
                is_param = isinstance(callee, ast.Name) and callee.id in params and looks
                if not is_param:
                    val = self.evaluator.expr(Frame(m, scope, before_line=launch.line), callee)
                    if not any(isinstance(v, Ref) and v.kind == "kernel" for _, v in branches(val)):
                        continue
                used = {n.id for kw in launch.node.keywords for n in ast.walk(kw.value) if isinstance(n, ast.Name)}
                if is_param or used & params:
                    out.add(scope.name)
        return out

    def release_bodies(self, keep: Iterable[ModuleScan] = ()) -> int:
        """Between two phases of a run (the sites built, the compiles done): empty again the
        function bodies that a read parsed again (callers, helpers, kernels:
        :meth:`~tilefit.pysource.lazybody.LazyBody.release`) and hold the launchers' bodies as
        text too; modules of the second pass that a caller search or an import read go back to
        their name and calls (:meth:`DeferredModule.dematerialise`), except those in ``keep``
        (the modules the sites are in). First the value evaluator forgets its memos of function
        frames, which key nodes of those bodies by ``id``. How many bodies and modules."""
        from tilefit.pysource.lazybody import release_bodies, release_filled

        self.evaluator.forget_functions()
        kept = {id(m) for m in keep}
        count = 0
        for m in self.all_modules():
            if not m.__dict__.get("materialised", True):
                continue  # a DeferredModule without its AST
            if isinstance(m, DeferredModule) and id(m) not in kept:
                m.dematerialise()
                count += 1
                continue
            count += release_filled(m) + release_bodies(m, launchers=True)
        return count

    def all_modules(self) -> list[ModuleScan]:
        return list(self.by_path.values())

    def primary_modules(self) -> list[ModuleScan]:
        """The modules of the files that were asked for."""
        return [m for m in self.by_path.values() if not m.extra]

    def _load_extra(self, path: str) -> ModuleScan | None:
        if not self.on_demand or not os.path.isfile(path):
            return None
        name, is_pkg = module_name(path)
        module = scan_source(SourceFile.read(path), name, is_pkg)
        module.extra = True
        self.add(module)
        return module

    # -- lookups -----------------------------------------------------------------------------
    def find_module(self, name: str, near: ModuleScan | None = None) -> ModuleScan | None:
        found = self.modules.get(name)
        if found:
            return found[0]
        found = self._suffix.get(name)
        if found and len(found) == 1:
            return found[0]
        if found and near is not None:
            # prefer the candidate that shares the most leading folders with the importer
            def shared(m):
                return len(os.path.commonpath([os.path.abspath(m.path), os.path.abspath(near.path)]))
            return max(found, key=shared)
        return None

    def _relative_base(self, module: ModuleScan, level: int) -> str:
        folder = os.path.dirname(os.path.abspath(module.path))
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        return folder

    def _module_at(self, folder: str, dotted: str) -> ModuleScan | None:
        base = os.path.join(folder, *dotted.split(".")) if dotted else folder
        candidates = (base + ".py", os.path.join(base, "__init__.py"))
        for candidate in candidates:
            m = self.by_path.get(os.path.abspath(candidate))
            if m is not None:
                return m
        for candidate in candidates:
            m = self._load_extra(os.path.abspath(candidate))
            if m is not None:
                return m
        return None

    def import_module(self, module: ModuleScan, binding: Binding) -> tuple[ModuleScan | None, str]:
        """The module an import names (``None`` when outside the tree) and its dotted name."""
        if binding.level:
            folder = self._relative_base(module, binding.level)
            target = self._module_at(folder, binding.module or "")
            name = "." * binding.level + (binding.module or "")
            return target, name
        found = self.find_module(binding.module or "", near=module)
        if found is None and self.on_demand and binding.module and binding.module.split(".")[0] != "triton":
            from tilefit.pysource.extract import _package_root

            found = self._module_at(_package_root(module.path), binding.module)
        if found is None and binding.module and binding.module.split(".")[0] != "triton":
            found = self._in_ancestors(module, binding.module) or self._by_dotted_path(module, binding.module)
        return found, binding.module or ""

    def _by_dotted_path(self, module: ModuleScan, dotted: str) -> ModuleScan | None:
        """``dotted`` (``sglang.srt.layers.attention.dsa.utils``) from the folder above the nearest
        folder of the importer's path named as its first part (``.../sglang-0.5.23/`` for
        ``.../sglang/srt/...``), as Python finds it with that folder on ``sys.path``: a tree scanned
        below its package root names its modules from the scan root, so no module name matches."""
        first = dotted.split(".")[0]
        folder = os.path.dirname(os.path.abspath(module.path))
        while True:
            parent = os.path.dirname(folder)
            if parent == folder:
                return None
            if os.path.basename(folder) == first:
                return self._module_at(parent, dotted)
            folder = parent

    def _in_ancestors(self, module: ModuleScan, dotted: str, levels: int = 4) -> ModuleScan | None:
        """``dotted`` under a folder above the importer: a folder of kernels without
        ``__init__.py`` (a namespace package) next to the importer's folder, as Python finds it
        when the project root is on ``sys.path``."""
        folder = os.path.dirname(os.path.abspath(module.path))
        for _ in range(levels):
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
            found = self._module_at(folder, dotted)
            if found is not None:
                return found
        return None

    def import_value(self, module: ModuleScan, name: str, binding: Binding, depth: int = 0) -> Val:
        """What an imported name refers to."""
        mod_name = binding.module or ""
        if binding.level == 0 and (mod_name == "triton" or mod_name.startswith("triton.")):
            full = mod_name + (f".{binding.attr}" if binding.attr else "")
            return Ref("triton", full)
        if binding.attr in ("triton", "tl") or (binding.attr is None and mod_name.split(".")[0] == "triton"):
            return Ref("triton", "triton.language" if binding.attr == "tl" else "triton")
        target, dotted = self.import_module(module, binding)
        if target is None and binding.level == 0 and mod_name == "math" and \
                (binding.attr is None or binding.attr in MATH_FUNCTIONS):
            # the standard library's math (not a module of the tree): its pure functions fold
            return Ref("math", "math" if binding.attr is None else f"math.{binding.attr}")
        if binding.attr is None:  # import a.b [as c]
            if target is None:
                return Unknown(f"module {dotted} is not in the scanned tree")
            return Ref("module", target)
        if target is not None:
            if target.binding(binding.attr) is not None:
                return self.evaluator.global_name(target, binding.attr, depth + 1)
            # `from pkg import submodule`
            sub = self._module_at(os.path.dirname(os.path.abspath(target.path)), binding.attr) \
                if target.is_package else None
            if sub is not None:
                return Ref("module", sub)
            return Unknown(f"{binding.attr} is not defined in {target.name}")
        if binding.level:
            sub = self._module_at(self._relative_base(module, binding.level),
                                  ".".join(p for p in (binding.module, binding.attr) if p))
            if sub is not None:
                return Ref("module", sub)
        else:
            sub = self.find_module(f"{mod_name}.{binding.attr}", near=module)
            if sub is None and self.on_demand and mod_name.split(".")[0] != "triton":
                from tilefit.pysource.extract import _package_root

                sub = self._module_at(_package_root(module.path), f"{mod_name}.{binding.attr}")
            if sub is None and mod_name.split(".")[0] != "triton":
                sub = self._in_ancestors(module, f"{mod_name}.{binding.attr}") or \
                    self._by_dotted_path(module, f"{mod_name}.{binding.attr}")
            if sub is not None:
                return Ref("module", sub)
        return Unknown(f"{name} is imported from {dotted}, which is not in the scanned tree")

    def resolve(self, module: ModuleScan, expr: ast.expr, frame=None) -> Val:
        """The value of ``expr`` in ``module`` (at module level unless ``frame`` is given)."""
        from .values import Frame

        return self.evaluator.expr(frame or Frame(module), expr)

    def kernel_by_key(self, key: str) -> KernelDef | None:
        """``module:function`` -> the kernel (module by exact or trailing dotted name)."""
        mod, _, fn = key.partition(":")
        m = self.find_module(mod)
        return m.kernels.get(fn) if m is not None else None


def lit_value(v: Val):
    return v.value if isinstance(v, Lit) else None
