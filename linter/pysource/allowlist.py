"""The allowlist a kernel taken from a scanned file must pass before anything compiles it.

Triton runs Python while it compiles: the code generator calls any callable a kernel names
(``triton.knobs.os.system(...)`` in a kernel body runs a shell), reads attributes with
``getattr`` (``x.__class__.__init__.__globals__``), and importing the module that defines a
kernel evaluates its parameter defaults, annotations and decorators. Linting is static, so a
kernel is compiled only when every name it reads, in its body, its defaults and its
annotations, is one of:

* a parameter or a local of the function;
* a member of ``triton.language`` (``tl.load``, ``tl.extra.cuda.libdevice.exp``; never a dunder
  name), a few plain functions of ``triton`` itself (``triton.cdiv``, ``triton.next_power_of_2``)
  or of ``math``;
* another ``@triton.jit`` function carried into the same scratch module;
* a module-level constant whose value is a literal (numbers, strings, booleans, tuples of them,
  arithmetic on them, ``tl.constexpr(<literal>)``, a ``tl`` dtype);
* one of the builtins Triton's code generator gives kernels (``range``, ``len``, ``min``,
  ``max``, ``float``, ``int``, ``isinstance``, ``print``, ``list``; ``getattr``/``hasattr`` with a
  literal public attribute name).

Parameter defaults must be literals (or such constants); jit decorator arguments are literals
(anything else is dropped: ``launch_metadata=``, ``repr=``). Lambdas, nested definitions,
``global``/``nonlocal``, imports and ``await``/``yield`` in a kernel are refused; so is any dunder
name or attribute anywhere. Annotations are kept when they pass the same test (``tl.constexpr``,
``tl.int64``, ``"tl.constexpr"``) and dropped when they are not about Triton types
(``torch.Tensor``: Triton ignores it); an annotation that mentions ``constexpr`` and does not pass
blocks the kernel.

:func:`check_function` validates one ``FunctionDef`` against a :class:`Scope` and returns the
sanitised copy the scratch module is built from (``ast.unparse``); :func:`check_constant` validates
a constant's value. A refusal is :class:`Blocked`, naming what blocked the kernel.

The part that needs Triton's real objects runs in the compile worker, before the scratch module
is loaded: :func:`check_members` resolves every ``triton.language`` path the kernel uses and
refuses one that reaches a module outside ``triton.language`` or an object defined outside Triton
(``tl.core.os`` would be the ``os`` module). This module imports nothing of Triton at import time.
"""

from __future__ import annotations

import ast
import builtins
import copy
from dataclasses import dataclass, field

# Triton's CodeGenerator.builtin_namespace (3.5-3.9), the only builtins a kernel can reach.
KERNEL_BUILTINS = frozenset({"len", "list", "range", "float", "int", "isinstance", "print", "min", "max"})
# exception classes (`raise ValueError(...)` in a branch the compiler does not take): no code runs
EXCEPTIONS = frozenset(n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                       and issubclass(getattr(builtins, n), BaseException))
_ATTR_BUILTINS = frozenset({"getattr", "hasattr"})  # only with a literal public attribute name
# Plain functions of `triton` a kernel may call on constexprs (they compute ints).
TRITON_FUNCTIONS = frozenset({"cdiv", "next_power_of_2", "language", "constexpr"})
ANNOTATION_BUILTINS = frozenset({"int", "float", "bool", "str"})
# calls a constant's value may make (they fold literals)
_CONSTANT_CALLS = frozenset({"int", "float", "bool", "min", "max", "abs"})
_FORBIDDEN_NODES = {
    ast.Lambda: "a lambda", ast.FunctionDef: "a nested function", ast.AsyncFunctionDef: "a nested function",
    ast.ClassDef: "a class definition", ast.Global: "a global statement", ast.Nonlocal: "a nonlocal statement",
    ast.Import: "an import", ast.ImportFrom: "an import", ast.Await: "await", ast.Yield: "yield",
    ast.YieldFrom: "yield from", ast.AsyncFor: "async for", ast.AsyncWith: "async with",
}


class Blocked(Exception):
    """``name`` (at ``line``) keeps the kernel from being compiled without importing its file."""

    def __init__(self, name: str, why: str, line: int | None = None):
        self.name = name
        self.why = why
        self.line = line
        super().__init__(f"{name}: {why}")


@dataclass
class Scope:
    """What the scratch module binds at module level.

    ``modules``: name -> the dotted module or member an import binds (``tl`` ->
    ``triton.language``, ``libdevice`` -> ``triton.language.extra.libdevice``, ``math``);
    ``functions``: names of the ``@triton.jit`` functions; ``constants``: names of the validated
    literal constants."""

    modules: dict[str, tuple[str, ...]] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    constants: set[str] = field(default_factory=set)
    members: set[str] = field(default_factory=set)  # triton paths used (checked by check_members)


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") or name.startswith("__")


def dotted_allowed(path: str) -> str | None:
    """Why the dotted ``path`` (an import target or an attribute chain) is refused, or None."""
    parts = path.split(".")
    if any(is_dunder(p) for p in parts):
        return "a dunder name"
    if parts[0] == "math":
        if len(parts) > 2 or (len(parts) == 2 and parts[1].startswith("_")):
            return "not a public function or constant of math"
        return None
    if parts[0] != "triton":
        return "not Triton"
    if len(parts) == 1:
        return None
    if parts[1] == "language" or parts[1:4] == ["experimental", "gluon", "language"]:
        return None
    if parts[1] in TRITON_FUNCTIONS and len(parts) == 2:
        return None
    return "not part of triton.language"


def _is_language(path: str) -> bool:
    return path.startswith(("triton.language.", "triton.experimental.gluon.language."))


def _chain(node: ast.expr) -> tuple[str, list[str]] | None:
    """``a.b.c`` -> ("a", ["b", "c"]) when the chain is rooted at a Name."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return node.id, list(reversed(attrs))
    return None


def parameter_names(fn: ast.FunctionDef) -> set[str]:
    """Every name ``fn``'s signature binds (positional-only, plain, keyword-only, ``*``, ``**``)."""
    args = fn.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    names.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    return names


def _local_names(fn: ast.FunctionDef) -> set[str]:
    out = parameter_names(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
    return out


class _Checker:
    def __init__(self, scope: Scope, local: set[str], what: str):
        self.scope = scope
        self.local = local
        self.what = what  # "the body of f", "a default of f", ...

    def fail(self, name: str, why: str, node: ast.AST):
        raise Blocked(name, why, getattr(node, "lineno", None))

    def module_path(self, name: str, attrs: list[str], node: ast.AST) -> None:
        for target in self.scope.modules[name]:
            path = ".".join([target, *attrs])
            why = dotted_allowed(path)
            if why is not None:
                shown = ".".join([name, *attrs])
                self.fail(shown, f"{why} ({path})", node)
            if _is_language(path) and attrs:
                self.scope.members.add(path)

    def expr(self, node: ast.AST) -> None:
        for sub in ast.walk(node):
            kind = _FORBIDDEN_NODES.get(type(sub))
            if kind is not None:
                self.fail(kind, f"{self.what} holds {kind}", sub)
        self._visit(node)

    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Attribute):
            if is_dunder(node.attr):
                self.fail(f".{node.attr}", "a dunder attribute", node)
            chain = _chain(node)
            if chain is not None:
                root, attrs = chain
                if root in self.scope.modules and root not in self.local:
                    self.module_path(root, attrs, node)
                    return
                if root in self.scope.functions and root not in self.local:
                    self.fail(f"{root}.{attrs[0]}", "an attribute of a jit function", node)
                if is_dunder(root):
                    self.fail(root, "a dunder name", node)
                if root not in self.local and root not in self.scope.constants:
                    self._name(root, node)
                for a in attrs:
                    if is_dunder(a):
                        self.fail(f".{a}", "a dunder attribute", node)
                return
            self._visit(node.value)
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self._name(node.id, node)
            elif is_dunder(node.id):
                self.fail(node.id, "a dunder name", node)
            return
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTR_BUILTINS \
                and node.func.id not in self.local:
            attr = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str) and not attr.value.startswith("_")):
                self.fail(node.func.id, f"{node.func.id}() without a literal public attribute name", node)
            for a in node.args:
                self._visit(a)
            for kw in node.keywords:
                self._visit(kw.value)
            return
        for child in ast.iter_child_nodes(node):
            self._visit(child)

    def _name(self, name: str, node: ast.AST) -> None:
        if is_dunder(name):
            self.fail(name, "a dunder name", node)
        if name in self.local:
            return
        if name in self.scope.modules:
            self.module_path(name, [], node)
            return
        if name in self.scope.functions or name in self.scope.constants:
            return
        if name in KERNEL_BUILTINS or name in EXCEPTIONS:
            return
        if name in _ATTR_BUILTINS:
            self.fail(name, f"{name} used other than as {name}(x, \"literal\")", node)
        self.fail(name, f"{self.what} reads {name}, which is not a parameter, a local, a triton.language member, "
                        f"a jit function or a literal constant", node)


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _annotation(node: ast.expr | None, scope: Scope, fn_name: str) -> tuple[bool, ast.expr | None]:
    """(keep, annotation): a Triton annotation is kept, a foreign one dropped."""
    if node is None:
        return True, None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True, node
    checker = _Checker(scope, set(ANNOTATION_BUILTINS), f"an annotation of {fn_name}")
    try:
        checker.expr(node)
        return True, node
    except Blocked:
        # a type reference that is not Triton's (torch.Tensor, Optional[int]) is dropped: Triton
        # ignores it; one that calls something, or says constexpr, blocks the kernel
        if "constexpr" in ast.unparse(node) or any(isinstance(n, ast.Call) for n in ast.walk(node)):
            raise
        return False, None


def check_function(fn: ast.FunctionDef, scope: Scope, decorator: ast.expr) -> ast.FunctionDef:
    """Validate ``fn`` (a ``@triton.jit`` function) and return the copy the scratch module holds:
    ``decorator`` as its only decorator, foreign annotations dropped. Raises :class:`Blocked`."""
    if is_dunder(fn.name):
        raise Blocked(fn.name, "a dunder function name", fn.lineno)
    # a copy of the definition and its signature (the body's nodes are shared, never changed)
    new = copy.copy(fn)
    new.args = args = copy.copy(fn.args)
    args.posonlyargs = [copy.copy(a) for a in fn.args.posonlyargs]
    args.args = [copy.copy(a) for a in fn.args.args]
    args.kwonlyargs = [copy.copy(a) for a in fn.args.kwonlyargs]
    new.decorator_list = [decorator]
    new.returns = None
    if hasattr(new, "type_params"):
        new.type_params = []
    every = list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)
    for extra in (args.vararg, args.kwarg):
        if extra is not None:
            raise Blocked(f"*{extra.arg}", f"{fn.name} takes *args/**kwargs", fn.lineno)
    for a in every:
        if is_dunder(a.arg):
            raise Blocked(a.arg, "a dunder parameter name", a.lineno)
        keep, ann = _annotation(a.annotation, scope, fn.name)
        a.annotation = ann if keep else None
        a.type_comment = None
    for d in list(args.defaults) + [d for d in args.kw_defaults if d is not None]:
        if _literal(d):
            continue
        if isinstance(d, ast.Name) and d.id in scope.constants:
            continue
        raise Blocked(ast.unparse(d)[:60], f"a parameter default of {fn.name} that is not a literal", d.lineno)
    checker = _Checker(scope, _local_names(fn), f"the body of {fn.name}")
    for stmt in new.body:
        checker.expr(stmt)
    return new


def check_constant(name: str, node: ast.expr, scope: Scope, annotation: ast.expr | None = None) -> list[str]:
    """Validate a module constant's value: a literal, arithmetic on literals and other constants,
    ``tl.constexpr(...)``, a ``tl`` dtype, ``math`` constants. Returns the constants it reads
    (to carry first). Raises :class:`Blocked`."""
    reads: list[str] = []

    def bad(what: str, sub: ast.AST):
        raise Blocked(name, f"the global {name} is computed by {what}, not a literal", getattr(sub, "lineno", None))

    def walk(n: ast.AST) -> None:
        if isinstance(n, ast.Constant):
            return
        if isinstance(n, ast.Name):
            if is_dunder(n.id):
                bad(f"a dunder name ({n.id})", n)
            if n.id in ("True", "False", "None"):
                return
            reads.append(n.id)
            return
        if isinstance(n, ast.Attribute):
            chain = _chain(n)
            if chain is None:
                bad("an attribute of an expression", n)
            root, attrs = chain
            path = None
            if root in scope.modules:
                for target in scope.modules[root]:
                    path = ".".join([target, *attrs])
                    if dotted_allowed(path) is not None:
                        bad(f"Python code ({ast.unparse(n)})", n)
                if path and _is_language(path):
                    scope.members.add(path)
                return
            bad(f"Python code (an attribute of {root})", n)
        if isinstance(n, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Tuple, ast.List)):
            for child in ast.iter_child_nodes(n):
                if isinstance(child, (ast.expr_context, ast.operator, ast.unaryop, ast.boolop, ast.cmpop)):
                    continue
                walk(child)
            return
        if isinstance(n, ast.Call):
            func = n.func
            ok = False
            if isinstance(func, ast.Name) and func.id in _CONSTANT_CALLS:
                ok = True
            else:
                chain = _chain(func)
                if chain is not None and chain[0] in scope.modules:
                    for target in scope.modules[chain[0]]:
                        path = ".".join([target, *chain[1]])
                        ok = path.endswith(".constexpr") and dotted_allowed(path) is None or \
                            path.startswith("math.") and dotted_allowed(path) is None
                        if not ok:
                            break
            if not ok:
                bad(f"Python code (a call of {ast.unparse(func)})", n)
            for a in n.args:
                walk(a)
            for kw in n.keywords:
                walk(kw.value)
            return
        bad(f"Python code (a {type(n).__name__} expression)", n)

    walk(node)
    if annotation is not None:
        keep, _ = _annotation(annotation, scope, name)
        if not keep:
            bad(f"its annotation {ast.unparse(annotation)}", annotation)
    return reads


# ----------------------------------------------------------------------------------------------
# the part that needs Triton (run in the compile worker, before the scratch module is loaded)


def check_members(paths) -> str | None:
    """Resolve each dotted ``triton.language...`` path against the installed Triton; the reason
    one is refused (a module outside ``triton.language`` on the way, or an object defined
    outside Triton), or None. Missing members are left to the compiler (it says so)."""
    import importlib
    import types

    for path in sorted(set(paths)):
        parts = path.split(".")
        base = 4 if parts[1] == "experimental" else 2
        home = ".".join(parts[:base])
        try:
            obj = importlib.import_module(home)
        except ImportError as exc:
            return f"{home} does not import: {exc}"
        for i, attr in enumerate(parts[base:], start=base):
            if is_dunder(attr):
                return f"{path}: a dunder attribute"
            try:
                obj = getattr(obj, attr)
            except AttributeError:
                break  # the compiler reports an unknown member
            where = ".".join(parts[: i + 1])
            if isinstance(obj, types.ModuleType):
                if not obj.__name__.startswith(home):
                    return f"{where} is the module {obj.__name__}, not part of {home}"
                continue
            module = getattr(obj, "__module__", None)
            if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)) and \
                    not (module or "").startswith("triton"):
                return f"{where} is {module}.{getattr(obj, '__qualname__', attr)}, not Triton's"
    return None
