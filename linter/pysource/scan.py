"""The static scan of one Python module: Triton kernels, launches, autotune lists, bindings.

Nothing is imported or run: the module is parsed with :mod:`ast` and walked once. What a
module holds that matters to call sites:

* **kernels**: functions decorated ``@triton.jit`` (or ``@jit`` after ``from triton import
  jit``, also ``triton.jit(...)`` with options), with their parameters (``tl.constexpr`` or
  not), the ``@triton.autotune`` decorator above them (its ``configs`` expression) and the
  ``@triton.heuristics`` ones;
* **launches**: calls of the form ``callee[grid](...)``, with the function they are in;
* **bindings**: what each top-level name is bound to (a definition, an assignment, an import),
  so that names can be followed across modules by :mod:`tilefit.callsites.project`;
* **calls** by the called name, to find the call sites of launcher wrappers.

``triton`` and ``tl`` imported from any module (``from vllm.triton_utils import triton, tl``)
count as Triton itself, as engines re-export them.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field

from .lazybody import release_bodies
from .source import SourceFile

TRITON_ROOTS = ("triton",)


@dataclass(frozen=True)
class Binding:
    """What a top-level name is bound to. ``kind``: ``def``, ``class``, ``assign``, ``import``."""

    kind: str
    node: ast.AST | None = None  # the FunctionDef/ClassDef, or the assigned value expression
    module: str | None = None  # import: the module named (relative: without the dots)
    attr: str | None = None  # import: the name imported from it (None: the module itself)
    level: int = 0  # import: leading dots
    conditional: bool = False  # bound inside an if/try/with/for at module level
    annotation: ast.expr | None = None  # assign: the annotation of ``X: ann = value``
    stmt: ast.stmt | None = None  # the whole statement


@dataclass
class Param:
    name: str
    index: int
    constexpr: bool
    annotation: str
    default: ast.expr | None
    node: ast.arg


@dataclass
class KernelDef:
    module: "ModuleScan"
    name: str
    node: ast.FunctionDef
    params: list[Param]
    jit: ast.expr  # the jit decorator expression
    autotune: ast.Call | None = None
    heuristics: list[ast.Call] = field(default_factory=list)
    top_level: bool = True
    conditional: bool = False

    @property
    def key(self) -> str:
        """``module:function``, the name used in ``[tool.tilefit.kernels]``."""
        return f"{self.module.name}:{self.name}"

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None


@dataclass
class LaunchCall:
    module: "ModuleScan"
    node: ast.Call
    callee: ast.expr
    grid: ast.expr
    scope: ast.FunctionDef | ast.AsyncFunctionDef | None  # the function the launch is in
    scope_name: str  # qualified name of that function ("" at module level)

    @property
    def line(self) -> int:
        return self.node.lineno


class CallRecord:
    """A call of a name: the ``Call`` node and the function it is in. Inside a body held as text
    (:mod:`.lazybody`) the record keeps only its position until ``node`` or ``scope`` is read,
    which parses the body again. ``module_func``: the callee is a plain name or an attribute of
    a plain name (``f(...)``, ``mod.f(...)``), the only calls that may resolve to a function of
    a module."""

    __slots__ = ("_node", "_scope", "lazy", "module_func")

    def __init__(self, node: ast.Call, scope: ast.FunctionDef | ast.AsyncFunctionDef | None):
        self._node, self._scope, self.lazy = node, scope, None
        func = node.func
        self.module_func = not isinstance(func, ast.Attribute) or isinstance(func.value, ast.Name)

    @property
    def node(self) -> ast.Call:
        if self.lazy is not None:
            self.lazy.fill()
        return self._node

    @property
    def scope(self) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        if self.lazy is not None:
            self.lazy.fill()
        return self._scope


@dataclass
class ModuleScan:
    path: str
    name: str  # dotted module name
    source: SourceFile
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> canonical triton name
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    kernels: dict[str, KernelDef] = field(default_factory=dict)  # top-level kernels by name
    all_kernels: list[KernelDef] = field(default_factory=list)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # top-level plain functions
    launches: list[LaunchCall] = field(default_factory=list)
    calls: dict[str, list[CallRecord]] = field(default_factory=dict)  # called name -> calls
    is_package: bool = False
    extra: bool = False  # loaded only to follow an import: its own launches are not reported

    @property
    def error(self) -> str | None:
        return self.source.error

    def binding(self, name: str) -> Binding | None:
        """The binding of a top-level name: the last unconditional one, else the last one."""
        found = self.bindings.get(name)
        if not found:
            return None
        plain = [b for b in found if not b.conditional]
        return (plain or found)[-1]

    # -- triton names --------------------------------------------------------------------------
    def dotted(self, expr: ast.expr) -> str | None:
        """``a.b.c`` of a Name/Attribute chain, with a Triton alias at its root expanded."""
        parts = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name):
            return None
        root = self.aliases.get(expr.id, expr.id)
        parts.append(root)
        return ".".join(reversed(parts))

    def triton_name(self, expr: ast.expr) -> str | None:
        """``jit``, ``autotune``, ``Config``, ``constexpr``, ... when ``expr`` names that Triton
        object (through any alias), else None."""
        name = self.dotted(expr)
        if name is None or not (name == "triton" or name.startswith("triton.")):
            return None
        if isinstance(expr, ast.Name) and expr.id not in self.aliases:
            return None  # a local variable that happens to be called `triton`
        return name.rsplit(".", 1)[-1]


# ----------------------------------------------------------------------------------------------
# module names


def module_name(path: str) -> tuple[str, bool]:
    """Dotted name of ``path`` from the package folders above it (``__init__.py``), and
    whether it is a package's ``__init__``."""
    path = os.path.abspath(path)
    folder, file = os.path.split(path)
    stem = file[:-3] if file.endswith(".py") else file
    parts = [] if stem == "__init__" else [stem]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, pkg = os.path.split(folder)
        parts.append(pkg)
        if not pkg:
            break
    parts.reverse()
    return ".".join(p for p in parts if p) or stem, stem == "__init__"


# ----------------------------------------------------------------------------------------------
# the scan


def _is_constexpr_annotation(module: ModuleScan, ann: ast.expr | None) -> tuple[bool, str]:
    if ann is None:
        return False, ""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        text = ann.value
    else:
        text = ast.unparse(ann)
    # Triton's own test (KernelParam.is_constexpr): "constexpr" in the annotation
    return "constexpr" in text, text


def kernel_params(module: ModuleScan, fn: ast.FunctionDef) -> list[Param]:
    args = fn.args
    positional = list(args.posonlyargs) + list(args.args)
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = []
    for i, (a, d) in enumerate(zip(positional, defaults)):
        ce, text = _is_constexpr_annotation(module, a.annotation)
        out.append(Param(a.arg, i, ce, text, d, a))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        ce, text = _is_constexpr_annotation(module, a.annotation)
        out.append(Param(a.arg, len(out), ce, text, d, a))
    return out


class _Scanner(ast.NodeVisitor):
    def __init__(self, module: ModuleScan):
        self.m = module
        self.scopes: list[ast.AST] = []  # enclosing FunctionDef / ClassDef nodes
        self.conditional = 0

    # top-level statements ---------------------------------------------------------------------
    def scan(self, tree: ast.Module) -> None:
        self._collect_aliases(tree)
        for stmt in tree.body:
            self._top(stmt)

    def _collect_aliases(self, tree: ast.Module) -> None:
        aliases = self.m.aliases
        for node in _statements(tree.body):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "triton" or a.name.startswith("triton."):
                        if a.asname:
                            aliases[a.asname] = a.name
                        else:
                            aliases["triton"] = "triton"
            elif isinstance(node, ast.ImportFrom) and node.module:
                mod = node.module
                for a in node.names:
                    local = a.asname or a.name
                    if node.level == 0 and (mod == "triton" or mod.startswith("triton.")):
                        aliases[local] = f"{mod}.{a.name}"
                    elif a.name == "triton":  # engines re-export triton and tl
                        aliases[local] = "triton"
                    elif a.name == "tl":
                        aliases[local] = "triton.language"
        # canonical spellings: triton.language.* whatever the import path
        for k, v in list(aliases.items()):
            if v in ("triton.language.core", "triton.language"):
                aliases[k] = "triton.language"

    def _bind(self, name: str, binding: Binding) -> None:
        self.m.bindings.setdefault(name, []).append(binding)

    def _top(self, stmt: ast.stmt, conditional: bool = False) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stmt._tilefit_top = True  # a module-level def (is_top_level_def): the only functions calls resolve to
            self._bind(stmt.name, Binding("def", stmt, conditional=conditional, stmt=stmt))
            kernel = self._kernel(stmt, top_level=True, conditional=conditional)
            if kernel is None and not conditional and isinstance(stmt, ast.FunctionDef):
                self.m.functions[stmt.name] = stmt
            self._function(stmt)
        elif isinstance(stmt, ast.ClassDef):
            self._bind(stmt.name, Binding("class", stmt, conditional=conditional, stmt=stmt))
            self.scopes.append(stmt)
            for sub in stmt.body:
                self.visit(sub)
            self.scopes.pop()
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    self._bind(a.asname, Binding("import", module=a.name, conditional=conditional, stmt=stmt))
                else:
                    top = a.name.split(".")[0]
                    self._bind(top, Binding("import", module=top, conditional=conditional, stmt=stmt))
        elif isinstance(stmt, ast.ImportFrom):
            for a in stmt.names:
                if a.name == "*":
                    continue
                self._bind(a.asname or a.name, Binding("import", module=stmt.module or "", attr=a.name,
                                                       level=stmt.level, conditional=conditional, stmt=stmt))
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self._assign_target(target, stmt.value, conditional, stmt)
            self.visit(stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            if isinstance(stmt.target, ast.Name) and stmt.value is not None:
                self._bind(stmt.target.id, Binding("assign", stmt.value, conditional=conditional,
                                                   annotation=stmt.annotation, stmt=stmt))
            if stmt.value is not None:
                self.visit(stmt.value)
        elif isinstance(stmt, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or \
                type(stmt).__name__ == "TryStar":
            for field_name in ("body", "orelse", "finalbody"):
                for sub in getattr(stmt, field_name, ()) or ():
                    self._top(sub, conditional=True)
            for handler in getattr(stmt, "handlers", ()) or ():
                for sub in handler.body:
                    self._top(sub, conditional=True)
            for expr_field in ("test", "iter"):
                if getattr(stmt, expr_field, None) is not None:
                    self.visit(getattr(stmt, expr_field))
            for item in getattr(stmt, "items", ()) or ():
                self.visit(item.context_expr)
        else:
            self.visit(stmt)

    def _assign_target(self, target: ast.expr, value: ast.expr, conditional: bool, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, Binding("assign", value, conditional=conditional, stmt=stmt))
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._assign_target(t, v, conditional, stmt)
            else:
                for t in target.elts:
                    if isinstance(t, ast.Name):
                        self._bind(t.id, Binding("assign", None, conditional=True, stmt=stmt))

    # kernels ----------------------------------------------------------------------------------
    def _kernel(self, fn, top_level: bool, conditional: bool) -> KernelDef | None:
        if not isinstance(fn, ast.FunctionDef):
            return None
        jit = None
        autotune = None
        heuristics = []
        for dec in fn.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            kind = self.m.triton_name(target)
            if kind == "jit":
                jit = dec
            elif kind == "autotune" and isinstance(dec, ast.Call):
                autotune = dec
            elif kind == "heuristics" and isinstance(dec, ast.Call):
                heuristics.append(dec)
        if jit is None:
            return None
        kernel = KernelDef(self.m, fn.name, fn, kernel_params(self.m, fn), jit, autotune, heuristics,
                           top_level=top_level, conditional=conditional)
        self.m.all_kernels.append(kernel)
        if top_level:
            # a conditional redefinition does not replace an unconditional one
            if fn.name not in self.m.kernels or not conditional:
                self.m.kernels[fn.name] = kernel
        return kernel

    # everything below the top level -----------------------------------------------------------
    def _function(self, fn) -> None:
        outer = self._scope()
        if outer is not None:
            fn._tilefit_outer = outer  # for names a nested function reads from its enclosing one
        self.scopes.append(fn)
        for dec in fn.decorator_list:
            self.visit(dec)
        for d in list(fn.args.defaults) + [d for d in fn.args.kw_defaults if d is not None]:
            self.visit(d)
        for stmt in fn.body:
            self.visit(stmt)
        self.scopes.pop()

    def visit_FunctionDef(self, node) -> None:
        if self.scopes:
            self._kernel(node, top_level=False, conditional=True)
        self._function(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node) -> None:
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()

    def _scope(self):
        for s in reversed(self.scopes):
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return s
        return None

    def _scope_name(self) -> str:
        return ".".join(s.name for s in self.scopes)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Subscript) and isinstance(func.value, (ast.Name, ast.Attribute)):
            self.m.launches.append(LaunchCall(self.m, node, func.value, func.slice, self._scope(), self._scope_name()))
        elif isinstance(func, ast.Name):
            self.m.calls.setdefault(func.id, []).append(CallRecord(node, self._scope()))
        elif isinstance(func, ast.Attribute):
            self.m.calls.setdefault(func.attr, []).append(CallRecord(node, self._scope()))
        self.generic_visit(node)


def _statements(body):
    """Every statement, nested ones included (not the expressions: imports are statements)."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        for name in ("body", "orelse", "finalbody", "handlers"):
            sub = getattr(stmt, name, None)
            if sub:
                stack.extend(reversed(sub))


def is_top_level_def(fn) -> bool:
    """Is ``fn`` a module-level ``def`` (bound to its name in its module, conditionally or not)?
    Only those are ever a call's resolved callee (``Evaluator.global_name`` makes the one
    ``Ref("function", ...)``): a method or a nested function has no call sites to follow."""
    return getattr(fn, "_tilefit_top", False) is True


def scan_source(source: SourceFile, name: str | None = None, is_package: bool | None = None) -> ModuleScan:
    if name is None or is_package is None:
        guessed, pkg = module_name(source.path)
        name = name or guessed
        is_package = pkg if is_package is None else is_package
    module = ModuleScan(source.path, name, source, is_package=is_package)
    tree = source.parse()
    if tree is not None:
        _Scanner(module).scan(tree)
        release_bodies(module)  # bodies no launch or kernel is in: parsed again when read
    return module


def scan_file(path: str, name: str | None = None) -> ModuleScan:
    return scan_source(SourceFile.read(path), name)


# `name[grid](`, `obj.k[(a, b[0])](`: a subscript right after a name, then a call (one level of
# nested brackets; markdown links "[text](url)" in docstrings have a space before the bracket)
_LAUNCH_TEXT = re.compile(rb"[\w\)]\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\][ \t]*\(")


_KERNEL_TEXT = re.compile(rb"@[ \t]*(?:\w+\.)*(?:jit|autotune|heuristics)[ \t]*[(\r\n]")


def may_matter(data: bytes) -> bool:
    """A cheap test on a file's bytes: can it hold a kernel (a ``@...jit`` decorator and the word
    ``triton``) or a launch? Modules that only hold constants or re-exports are read when an
    import is followed; callers of launcher wrappers in a second pass."""
    if b"triton" in data and _KERNEL_TEXT.search(data) is not None:
        return True
    return b"](" in data and _LAUNCH_TEXT.search(data) is not None
