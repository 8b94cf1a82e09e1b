"""Take a ``@triton.jit`` kernel out of a source file, without importing that file.

``extract_kernel(source_path, function_name)`` reads the file with :mod:`ast` and builds a
*scratch module*: the kernel, every ``@triton.jit`` helper it calls (transitively, also from
other files of the same tree through relative or package imports), the module-level constants
they use (``FOO: tl.constexpr = 4``, ``FOO = tl.constexpr(4)``, plain literals and arithmetic
on them) and the imports of Triton they need (``triton``, ``triton.language as tl``,
``libdevice`` from any of its homes, ``math``). Nothing else of the file comes along: no torch,
no engine imports, no module code. The scratch module's text is hashed; its name is
``_tilefit_scratch_<hash>``, so a compile cache keyed by the name is keyed by the content.

Triton compiles a kernel from its AST (``JITFunction`` reads the source, the code generator
resolves helpers and constexpr globals through the function's globals), so compiling the
scratch module's kernel gives what compiling the original would, as long as the original does
not read anything else at compile time. What cannot be carried is reported as
:class:`ExtractError` with the reason and the line: a call of a plain Python function or a
``triton.constexpr_function`` (Python that Triton runs while compiling), a global computed by
code, a name imported from outside the tree, a helper defined differently in two files.

Nothing of the file is copied as text: every function and constant is validated against the
allowlist of :mod:`tilefit.pysource.allowlist` (names that resolve to parameters, locals,
``triton.language`` members, other carried jit functions and literal constants; literal defaults
and decorator arguments) and the module is written by ``ast.unparse`` of the validated nodes,
so no source line, comment or file name reaches it. A kernel that does not pass is an
:class:`ExtractError` naming what blocked it.

A wheel is read straight from its zip (:func:`mount_archive`: ``<wheel path>/<member>`` then names
a member), never unpacked.

Loading the scratch module (:meth:`ScratchModule.load`) executes only the generated text:
Triton imports, literal constants and ``def`` statements, after the ``triton.language`` paths
the kernel uses are resolved against the installed Triton (:func:`~.allowlist.check_members`).

This module imports neither triton nor torch (only :meth:`ScratchModule.load` does, through the
generated code).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib.util
import os
import re
import sys
import tempfile
import textwrap
import threading

from .allowlist import Blocked, Scope, check_constant, check_function, check_members, parameter_names
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

EXTRACT_VERSION = "2"
SCRATCH_PREFIX = "_tilefit_scratch_"
# where a compiler's message names the scratch module's file and a position in it
_SCRATCH_LOCATION = re.compile(rf"\S*{SCRATCH_PREFIX}[0-9a-f]+\.py:\d+:\d+:\s*")
_TRITON = "_tilefit_triton"  # the scratch module's own name for triton (decorators)
_ALLOWED_EXTERNAL = ("math",)  # modules besides triton a kernel may use (as Triton does)
_BUILTINS = frozenset(dir(builtins))
_JIT_KEEP = ("do_not_specialize", "do_not_specialize_on_alignment", "noinline", "debug")


class ExtractError(Exception):
    """The kernel cannot be carried into a scratch module; ``reason`` says why."""

    def __init__(self, path: str, function: str, reason: str, line: int | None = None):
        self.path = path
        self.function = function
        self.reason = reason
        self.line = line
        where = f"{path}:{line}" if line else path
        super().__init__(f"cannot extract {function} from {where}: {reason}")


def without_scratch_location(text: str) -> str:
    """``text`` (a compiler's error line) without the scratch module's path and position: the
    path names a local folder (the cache's, which differs between machines and runs) and the
    position a line of generated text, neither of them the user's source."""
    return _SCRATCH_LOCATION.sub("", text)


@dataclass(frozen=True)
class ScratchModule:
    """A self-contained module holding one kernel and what it needs."""

    name: str  # importable name: _tilefit_scratch_<hash[:20]>
    source: str  # the module's text
    kernel: str  # the kernel's function name in it
    functions: tuple[str, ...]  # every @triton.jit function it defines, kernel first
    constants: tuple[str, ...]  # module-level constants it defines
    imports: tuple[str, ...]  # the import statements it starts with
    origin: str  # the source file of the kernel
    hash: str  # sha256 of ``source`` (hex)
    files: tuple[str, ...] = ()  # every source file something was taken from
    members: tuple[str, ...] = ()  # the triton.language paths it uses (checked before loading)

    def check(self) -> None:
        """Resolve :attr:`members` against the installed Triton (raises :class:`ExtractError`)."""
        why = check_members(self.members)
        if why is not None:
            raise ExtractError(self.origin, self.kernel, f"{why}: it blocks compiling the kernel without importing its file")

    def write(self, folder: str | os.PathLike | None = None) -> Path:
        """Write the module to ``folder`` (default: the tilefit cache, else a private temporary
        folder) as ``<name>.py``. An existing file is used only if it holds exactly this text
        (its name is the text's hash): a truncated or altered one is rewritten, never loaded."""
        from tilefit.atomicfile import write_atomic
        from tilefit.readfile import read_bytes

        base = Path(folder) if folder is not None else scratch_dir()
        base.mkdir(parents=True, exist_ok=True)
        path = base / f"{self.name}.py"
        want = self.source.encode("utf-8")
        try:
            ok = read_bytes(path, len(want)) == want
        except OSError:
            ok = False
        if not ok:
            write_atomic(path, want)
        return path

    def load(self, folder: str | os.PathLike | None = None):
        """Import the scratch module (written first if needed) and return it. Registered in
        ``sys.modules`` under :attr:`name`, so ``importlib.import_module(name)`` finds it."""
        with _load_lock:
            mod = sys.modules.get(self.name)
            if mod is not None:
                return mod
            self.check()
            path = self.write(folder)
            spec = importlib.util.spec_from_file_location(self.name, path)
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            sys.modules[self.name] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                sys.modules.pop(self.name, None)
                raise
            return mod


_load_lock = threading.Lock()


_private: list[Path] = []
_private_lock = threading.Lock()


def scratch_dir() -> Path:
    """``<cache root>/scratch``; with caching off (``TILEFIT_CACHE_DIR=""``) or an unwritable
    cache, a private folder of this process (``mkdtemp``: no other user can plant a module in
    it, as they could in a shared ``/tmp/tilefit-scratch``), removed at exit."""
    from tilefit.cachedir import cache_root

    root = cache_root()
    if root is not None:
        try:
            (root / "scratch").mkdir(parents=True, exist_ok=True)
            return root / "scratch"
        except OSError:
            pass
    with _private_lock:
        if not _private:
            import atexit
            import shutil

            folder = Path(tempfile.mkdtemp(prefix="tilefit-scratch-"))
            atexit.register(shutil.rmtree, folder, True)
            _private.append(folder)
        return _private[0]


# ----------------------------------------------------------------------------------------------
# reading modules


_parse_lock = threading.Lock()
_parsed: dict[tuple[str, int, int], object] = {}


# Archives whose members are read as files (a wheel read straight from its zip, never unpacked):
# path of the archive -> {member path: bytes loader}; ``<archive path>/<member>`` names a member.
_archives: dict[str, object] = {}
_archives_lock = threading.Lock()


def mount_archive(path: str | os.PathLike) -> str:
    """Make the ``.py`` files of the zip archive (a wheel) at ``path`` readable by the extraction
    as ``<path>/<member>``; returns the archive's absolute path (the tree's root). Idempotent."""
    import zipfile

    root = os.path.abspath(os.fspath(path))
    with _archives_lock:
        if root not in _archives:
            with zipfile.ZipFile(root) as zf:
                names = {n for n in zf.namelist() if n.endswith(".py")}
            _archives[root] = names
    return root


def _in_archive(path: str) -> tuple[str, str] | None:
    for root, names in _archives.items():
        if path.startswith(root + os.sep):
            member = path[len(root) + 1:].replace(os.sep, "/")
            return (root, member) if member in names else ("", "")
    return None


def is_file(path: str) -> bool:
    """``os.path.isfile``, also for members of mounted archives."""
    found = _in_archive(path)
    if found is None:
        return os.path.isfile(path)
    return bool(found[0])


def read_bytes(path: str) -> bytes:
    """The bytes of a file or of a mounted archive's member (OSError when absent)."""
    found = _in_archive(path)
    if found is None:
        with open(path, "rb") as fh:
            return fh.read()
    if not found[0]:
        raise FileNotFoundError(f"no such member: {path}")
    import zipfile

    with zipfile.ZipFile(found[0]) as zf:
        return zf.read(found[1])


def _load_module(path: str):
    """The scan of ``path`` (cached by path, mtime and size; an archive member by its path)."""
    from tilefit.pysource.scan import scan_source
    from tilefit.pysource.source import SourceFile

    path = os.path.abspath(path)
    member = _in_archive(path)
    try:
        if member is None:
            st = os.stat(path)
            key = (path, st.st_mtime_ns, st.st_size)
        else:
            key = (path, 0, 0)
            if not member[0]:
                raise FileNotFoundError(path)
    except OSError as exc:
        raise ExtractError(path, "?", f"cannot read: {exc.strerror or exc}") from None
    with _parse_lock:
        hit = _parsed.get(key)
    if hit is None:
        if member is None:
            src = SourceFile.read(path)
        else:
            src = SourceFile.from_bytes(path, read_bytes(path))
        hit = scan_source(src)
        with _parse_lock:
            _parsed[key] = hit
    return hit


def _package_root(path: str) -> str:
    """The folder above the outermost package that holds ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    while is_file(os.path.join(folder, "__init__.py")):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def _module_file(base: str, dotted: str) -> str | None:
    stem = os.path.join(base, *dotted.split(".")) if dotted else base
    for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
        if is_file(cand):
            return cand
    return None


# ----------------------------------------------------------------------------------------------
# free names


def free_names(fn: ast.FunctionDef) -> list[tuple[str, int]]:
    """Names ``fn`` reads that it does not bind (first use order, with the line)."""
    bound = parameter_names(fn)
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
            bound.add(node.name)
        elif isinstance(node, ast.arg) and node is not fn:
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                bound.add((a.asname or a.name).split(".")[0])
    seen: dict[str, int] = {}
    # what is evaluated: defaults and annotations (at def time), the body (at compile time)
    roots: list[ast.AST] = []
    args = fn.args
    for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs):
        if a.annotation is not None:
            roots.append(a.annotation)
    roots.extend(d for d in list(args.defaults) + list(args.kw_defaults) if d is not None)
    if fn.returns is not None:
        roots.append(fn.returns)
    roots.extend(fn.body)
    for root in roots:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id not in bound and node.id not in seen:
                    seen[node.id] = node.lineno
    out = list(seen.items())
    return out


# ----------------------------------------------------------------------------------------------
# the extraction


@dataclass
class _Emitted:
    key: tuple  # what the name stands for (for clash detection)
    text: str  # import/const/alias: the statement (def: empty; its AST is compared)
    kind: str  # import | const | def | alias
    order: int
    node: ast.AST | None = None  # def: the FunctionDef
    jit: ast.expr | None = None  # def: its jit decorator
    targets: tuple[str, ...] = ()  # import: the modules or members it binds (one per home)
    alias_of: str = ""  # alias: the name it stands for
    path: str = ""


@dataclass
class _State:
    root_path: str
    root_fn: str
    modules: Callable[[str], object]
    names: dict[str, _Emitted] = field(default_factory=dict)
    functions: list[str] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    counter: int = 0
    future: bool = False
    visiting: set = field(default_factory=set)
    members: set = field(default_factory=set)  # triton.language paths the module uses

    def fail(self, reason: str, line: int | None = None, path: str | None = None) -> ExtractError:
        return ExtractError(path or self.root_path, self.root_fn, reason, line)

    def emit(self, name: str, key: tuple, text: str, kind: str, path: str, line: int | None, **extra) -> None:
        have = self.names.get(name)
        if have is not None:
            if kind == "def" and have.kind == "def" and have.key != key:
                same = ast.dump(have.node) == ast.dump(extra["node"])
            else:
                same = have.key == key or have.text == text
            if not same:
                raise self.fail(f"the name {name} stands for two different things (in {os.path.basename(have.path)} "
                                f"and {os.path.basename(path)})", line, path)
            return
        self.counter += 1
        self.names[name] = _Emitted(key, text, kind, self.counter, path=path, **extra)


def extract_kernel(source_path: str | os.PathLike, function_name: str, *,
                   modules: Callable[[str], object] | None = None) -> ScratchModule:
    """Build the scratch module of ``function_name`` in ``source_path``.

    ``modules`` maps a file path to its :class:`~tilefit.pysource.scan.ModuleScan` (to reuse a
    scan); by default files are parsed here (and cached by mtime). Raises :class:`ExtractError`.
    """
    path = os.path.abspath(os.fspath(source_path))
    load = modules or _load_module
    st = _State(path, function_name, load)
    module = load(path)
    if module.error:
        raise st.fail(module.error)
    st.future = any(isinstance(s, ast.ImportFrom) and s.module == "__future__" and
                    any(a.name == "annotations" for a in s.names)
                    for s in (module.source.tree.body if module.source.tree else []))
    kernel = module.kernels.get(function_name)
    if kernel is None:
        b = module.binding(function_name)
        if b is None:
            nested = [k for k in module.all_kernels if k.name == function_name]
            if nested:
                raise st.fail(f"{function_name} is defined inside a function or class", nested[0].node.lineno)
            raise st.fail(f"no function {function_name} at module level")
        raise st.fail(f"{function_name} is not decorated with @triton.jit",
                      getattr(b.node, "lineno", None))
    _jit_function(st, module, kernel.node, function_name, kernel.jit)
    return _assemble(st, module, function_name)


def _jit_decorator(jit: ast.expr, fn_name: str) -> ast.expr:
    """Our ``@_tilefit_triton.jit(...)`` with the literal options that decide the compile
    (``do_not_specialize``, ...); a non-literal one blocks the kernel, other options are dropped
    (``launch_metadata``, ``repr``: hooks Python runs, no effect on the compile)."""
    keywords = []
    if isinstance(jit, ast.Call):
        for kw in jit.keywords:
            if kw.arg in _JIT_KEEP:
                try:
                    value = ast.literal_eval(kw.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    raise Blocked(f"{kw.arg}=", f"the jit decorator of {fn_name} passes {kw.arg} a non-literal",
                                  kw.value.lineno) from None
                keywords.append(ast.keyword(kw.arg, ast.Constant(value) if not isinstance(value, (list, tuple))
                                            else ast.parse(repr(value), mode="eval").body))
    func = ast.Attribute(ast.Name(_TRITON, ast.Load()), "jit", ast.Load())
    return ast.Call(func, [], keywords) if keywords else func


def _finfo_global(module, name: str) -> str | None:
    """The element type of a module global ``name = torch.finfo(<dtype>)`` (``torch.bfloat16``,
    ``torch.float8_e4m3fn``; ``current_platform.fp8_dtype()``: the CUDA fp8 type, e4m3fn) whose
    fields :data:`tilefit.dtypes.FINFO` has; else None. Nothing is imported or run."""
    from tilefit.dtypes import ALIASES, FINFO

    b = module.binding(name)
    if b is None or b.kind != "assign" or b.conditional or len(module.bindings.get(name, ())) > 1:
        return None
    v = b.node
    if not (isinstance(v, ast.Call) and len(v.args) == 1 and not v.keywords and isinstance(v.func, ast.Attribute)
            and v.func.attr == "finfo" and isinstance(v.func.value, ast.Name)):
        return None
    tb = module.binding(v.func.value.id)
    if tb is None or tb.kind != "import" or (tb.module or "") != "torch" or tb.attr is not None:
        return None
    arg = v.args[0]
    if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == v.func.value.id:
        ty = ALIASES.get(arg.attr)
    elif isinstance(arg, ast.Call) and not arg.args and not arg.keywords and isinstance(arg.func, ast.Attribute) \
            and arg.func.attr == "fp8_dtype":
        ty = "fp8e4nv"  # vLLM's current_platform.fp8_dtype() on CUDA (ROCm MI300: e4m3fnuz; a clamp bound)
    else:
        return None
    return ty if ty in FINFO else None


def _fold_finfo(module, fn: ast.FunctionDef) -> ast.FunctionDef:
    """``fn`` with each ``G.max`` / ``G.min`` / ``G.eps`` / ``G.tiny`` / ``G.bits`` of a global ``G =
    torch.finfo(<dtype>)`` (:func:`_finfo_global`) replaced by its literal value (a copy; ``fn`` when
    there is none). The allowlist then sees a literal default (vLLM's ``FP8_MAX: tl.constexpr =
    float8_info.max``)."""
    from tilefit.dtypes import FINFO

    bound = parameter_names(fn)
    hits = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id not in bound \
                and isinstance(node.ctx, ast.Load):
            ty = _finfo_global(module, node.value.id)
            if ty is not None and node.attr in FINFO[ty]:
                hits[id(node)] = FINFO[ty][node.attr]
    if not hits:
        return fn

    class _Fold(ast.NodeTransformer):
        def visit_Attribute(self, node):
            if id(node) in hits:
                return ast.copy_location(ast.Constant(hits[id(node)]), node)
            return self.generic_visit(node)

    import copy

    # ids are of the original nodes: transform the original's structure into a copy by position
    twin = copy.deepcopy(fn)
    for a, b in zip(ast.walk(fn), ast.walk(twin)):
        if id(a) in hits:
            hits[id(b)] = hits[id(a)]
    return _Fold().visit(twin)


def _jit_function(st: _State, module, fn: ast.FunctionDef, local_name: str, jit: ast.expr) -> None:
    key = ("def", module.path, fn.name)
    if key in st.visiting:
        return
    st.visiting.add(key)
    fn = _fold_finfo(module, fn)
    st.files.add(module.path)
    st.emit(fn.name, key, "", "def", module.path, fn.lineno, node=fn, jit=jit)
    if fn.name not in st.functions:
        st.functions.append(fn.name)
    if local_name != fn.name:  # imported under another name
        st.emit(local_name, ("alias", module.path, fn.name), f"{local_name} = {fn.name}", "alias",
                module.path, fn.lineno, alias_of=fn.name)
    for name, line in free_names(fn):
        _name(st, module, name, line)


def _name(st: _State, module, name: str, line: int | None) -> None:
    """Carry what ``name`` means in ``module`` into the scratch module under ``name``."""
    key = ("name", module.path, name)
    if key in st.visiting:
        return
    st.visiting.add(key)
    b = module.binding(name)
    if b is None:
        if name in _BUILTINS:
            return
        raise st.fail(f"{name} is not defined at module level", line, module.path)
    alternatives = [x for x in module.bindings.get(name, ()) if x.kind == "import"]
    if b.kind == "import":
        if b.conditional and len(alternatives) > 1:
            _conditional_import(st, module, name, alternatives, line)
        else:
            _import(st, module, name, b, line)
        return
    if b.conditional and len(module.bindings.get(name, ())) > 1:
        raise st.fail(f"{name} is defined differently under conditions (if/try) at module level",
                      getattr(b.stmt, "lineno", line), module.path)
    if b.kind == "def":
        fn = b.node
        kernel = module.kernels.get(name)
        if kernel is not None and kernel.node is fn:
            _jit_function(st, module, fn, name, kernel.jit)
            return
        decorators = [module.dotted(d.func if isinstance(d, ast.Call) else d) or "" for d in fn.decorator_list]
        if any(d.endswith("constexpr_function") for d in decorators):
            raise st.fail(f"{name} is a triton.constexpr_function: Python code Triton runs while compiling "
                          f"(use --allow-import)", fn.lineno, module.path)
        raise st.fail(f"calls {name}, a plain Python function, not @triton.jit", fn.lineno, module.path)
    if b.kind == "class":
        raise st.fail(f"uses the class {name}", getattr(b.node, "lineno", line), module.path)
    if b.kind == "assign":
        _constant(st, module, name, b, line)
        return
    raise st.fail(f"cannot carry {name}", line, module.path)  # pragma: no cover


def _triton_import_text(module, name: str, b) -> str | None:
    """The import statement binding ``name`` as ``b`` does, when it imports from Triton (or
    re-exports ``triton``/``tl``), else None."""
    mod = b.module or ""
    top = mod.split(".")[0]
    if b.level == 0 and (top == "triton" or top in _ALLOWED_EXTERNAL):
        if b.attr is None:
            return f"import {mod}" if name == mod else f"import {mod} as {name}"
        return f"from {mod} import {b.attr}" + (f" as {name}" if name != b.attr else "")
    if b.attr == "triton":  # from engine.triton_utils import triton
        return "import triton" if name == "triton" else f"import triton as {name}"
    if b.attr == "tl":
        return f"import triton.language as {name}"
    return None


def _import_target(b) -> str:
    """The dotted module or member an import of Triton (or ``math``) binds."""
    mod = b.module or ""
    if b.level == 0 and mod.split(".")[0] in ("triton",) + _ALLOWED_EXTERNAL:
        if b.attr is None:
            return mod
        return f"{mod}.{b.attr}"
    return "triton.language" if b.attr == "tl" else "triton"


def _import(st: _State, module, name: str, b, line: int | None) -> None:
    text = _triton_import_text(module, name, b)
    if text is not None:
        st.emit(name, ("import", text), text, "import", module.path, line, targets=(_import_target(b),))
        return
    # an import from the scanned tree: follow it into its file
    target_path = _resolve_import_file(module, b)
    if target_path is None:
        what = ("." * b.level) + (b.module or "")
        raise st.fail(f"{name} is imported from {what}, which is not Triton and not found next to the file",
                      getattr(b.stmt, "lineno", line), module.path)
    target = st.modules(target_path)
    if target.error:
        raise st.fail(f"{target_path}: {target.error}", None, module.path)
    if b.attr is None:
        raise st.fail(f"uses the module {name} ({b.module}) itself", getattr(b.stmt, "lineno", line), module.path)
    tb = target.binding(b.attr)
    if tb is None and target.is_package:
        sub = _module_file(os.path.dirname(target.path), b.attr)
        if sub is not None:
            raise st.fail(f"uses the module {name} itself", getattr(b.stmt, "lineno", line), module.path)
    if tb is None:
        raise st.fail(f"{b.attr} is not defined in {target.path}", getattr(b.stmt, "lineno", line), module.path)
    if tb.kind == "def" and b.attr in target.kernels and target.kernels[b.attr].node is tb.node:
        k = target.kernels[b.attr]
        _jit_function(st, target, k.node, name, k.jit)
        return
    if name != b.attr:
        # a constant or a re-export under another name: carry it under its own name, then alias
        _name(st, target, b.attr, tb.node.lineno if hasattr(tb.node, "lineno") else line)
        st.emit(name, ("alias", target.path, b.attr), f"{name} = {b.attr}", "alias", module.path, line,
                alias_of=b.attr)
        return
    _name(st, target, b.attr, line)


def _conditional_import(st: _State, module, name: str, alternatives, line: int | None) -> None:
    texts = []
    targets = tuple(dict.fromkeys(_import_target(b) for b in alternatives))
    for b in alternatives:
        text = _triton_import_text(module, name, b)
        if text is None:
            raise st.fail(f"{name} is imported under conditions, not only from Triton",
                          getattr(b.stmt, "lineno", line), module.path)
        if text not in texts:
            texts.append(text)
    if len(texts) == 1:
        st.emit(name, ("import", texts[0]), texts[0], "import", module.path, line, targets=targets)
        return
    # try each home in the file's order (libdevice moved between Triton releases)
    block = _try_chain(texts)
    st.emit(name, ("import", block), block, "import", module.path, line, targets=targets)


def _try_chain(texts: list[str]) -> str:
    if len(texts) == 1:
        return texts[0]
    inner = textwrap.indent(_try_chain(texts[1:]), "    ")
    return f"try:\n    {texts[0]}\nexcept ImportError:\n{inner}"


def _resolve_import_file(module, b) -> str | None:
    if b.level:
        folder = os.path.dirname(os.path.abspath(module.path))
        for _ in range(b.level - 1):
            folder = os.path.dirname(folder)
        return _module_file(folder, b.module or "") if b.module else _module_file(folder, "")
    root = _package_root(module.path)
    return _module_file(root, b.module or "")


def _scope(st: _State) -> Scope:
    """What the scratch module binds so far, as the allowlist sees it."""
    scope = Scope()
    for name, e in st.names.items():
        if e.kind == "import":
            scope.modules[name] = e.targets
        elif e.kind == "def":
            scope.functions.add(name)
        elif e.kind == "const":
            scope.constants.add(name)
    for name, e in st.names.items():
        if e.kind == "alias":
            (scope.functions if e.alias_of in scope.functions else scope.constants).add(name)
    return scope


def _blocked(st: _State, exc: Blocked, path: str, fallback_line: int | None) -> ExtractError:
    return st.fail(f"{exc.why}: `{exc.name}` blocks compiling it without importing the file", exc.line or fallback_line,
                   path)


def _constant(st: _State, module, name: str, b, line: int | None) -> None:
    value = b.node
    if value is None:
        raise st.fail(f"{name} is unpacked from an expression", getattr(b.stmt, "lineno", line), module.path)
    roots = [value] + ([b.annotation] if b.annotation is not None else [])
    for root in roots:
        # an attribute is read from an import of Triton (or math) or from nothing the file binds
        for n in ast.walk(root):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
                ib = module.binding(n.value.id)
                if ib is None or ib.kind != "import" or _triton_import_text(module, n.value.id, ib) is None:
                    raise st.fail(f"uses the global {name} = `{module.source.segment(value, 60)}`, which is computed "
                                  f"by Python code (an attribute of {n.value.id})", getattr(b.stmt, "lineno", line),
                                  module.path)
        for n in ast.walk(root):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                if n.id == name:
                    raise st.fail(f"{name} refers to itself", n.lineno, module.path)
                if n.id not in ("True", "False", "None"):
                    _name(st, module, n.id, n.lineno)
    scope = _scope(st)
    try:
        reads = check_constant(name, value, scope, b.annotation)
    except Blocked as exc:
        raise _blocked(st, exc, module.path, getattr(b.stmt, "lineno", line)) from None
    for dep in reads:
        if dep not in scope.constants:
            raise st.fail(f"the global {name} reads {dep}, which is not a literal constant",
                          getattr(b.stmt, "lineno", line), module.path)
    if b.annotation is not None:
        node = ast.AnnAssign(ast.Name(name, ast.Store()), b.annotation, value, 1)
    else:
        node = ast.Assign([ast.Name(name, ast.Store())], value, lineno=1)
    stmt = ast.unparse(ast.fix_missing_locations(ast.Module([node], [])))
    st.emit(name, ("const", module.path, name), stmt, "const", module.path, getattr(b.stmt, "lineno", line))
    st.members.update(scope.members)


def _assemble(st: _State, module, kernel_name: str) -> ScratchModule:
    imports = [e for e in st.names.values() if e.kind == "import"]
    consts = [e for e in st.names.values() if e.kind == "const"]
    defs = [e for e in st.names.values() if e.kind == "def"]
    aliases = [e for e in st.names.values() if e.kind == "alias"]
    # constants in dependency order: a constant is emitted after what it reads (visit order is
    # depth-first, a dependency finishes first, so the counter order of completion is reversed:
    # sort by emission counter, which is assigned on completion)
    import_lines = sorted({e.text for e in imports}, key=lambda t: (not t.startswith("import"), t))
    scope = _scope(st)
    texts: dict[int, str] = {}
    for e in defs:
        try:
            decorator = _jit_decorator(e.jit, e.node.name)
            clean = check_function(e.node, scope, decorator)
        except Blocked as exc:
            raise _blocked(st, exc, e.path, e.node.lineno) from None
        texts[id(e)] = ast.unparse(ast.fix_missing_locations(clean))
    st.members.update(scope.members)
    # no file name, path or source line reaches the module: only unparsed, validated nodes
    header = ['"""tilefit scratch module: a Triton kernel with the helpers and constants it uses '
              '(generated from validated AST nodes; do not edit)."""']
    if st.future:
        header.insert(0, "from __future__ import annotations")
    body = header + [f"import triton as {_TRITON}"] + import_lines + [""]
    body += [e.text for e in sorted(consts, key=lambda e: e.order)]
    body.append("")
    ordered_defs = sorted(defs, key=lambda e: (e.key[2] != kernel_name, e.order))
    for e in ordered_defs:
        body.append("")
        body.append(texts[id(e)])
    if aliases:
        body.append("")
        body.extend(e.text for e in sorted(aliases, key=lambda e: e.order))
    source = "\n".join(body).rstrip() + "\n"
    digest = hashlib.sha256((EXTRACT_VERSION + "\0" + source).encode("utf-8")).hexdigest()
    name = SCRATCH_PREFIX + digest[:20]
    functions = tuple([kernel_name] + [f for f in st.functions if f != kernel_name])
    return ScratchModule(name=name, source=source, kernel=kernel_name, functions=functions,
                         constants=tuple(n for n, e in st.names.items() if e.kind == "const"),
                         imports=tuple(import_lines), origin=st.root_path, hash=digest,
                         files=tuple(sorted(st.files)), members=tuple(sorted(st.members)))
