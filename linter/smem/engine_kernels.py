"""Compile the engine's own kernel instead of our reference kernel (``--engine-kernels``).

Our reference kernels reproduce the engines' kernels' structure; an engine's release can still
differ (an extra bias tile, another epilogue). ``EngineKernels(source)`` finds the engine's
``@triton.jit`` kernel for each of our kernels in ``source`` -- a ``.py`` file, a source tree
(vLLM / SGLang layouts are searched first), or ``installed`` / ``vllm`` / ``sglang`` for the
installed package -- takes it and the jit helpers it calls out by AST
(:func:`tilefit.pysource.extract.extract_kernel`: a scratch module that imports only triton; the
engine is never imported), and compiles it with the launch of our kernel's plan
(:mod:`tilefit.kernels`) mapped onto the engine kernel's parameters:

* a parameter our plan has is passed as the plan passes it;
* a parameter the plan lacks takes its default; without one, a pointer-like name (``*_ptr``,
  capitalised buffers) gets ``None``, a constexpr ``False``/``0``, an int ``0`` -- each such
  guess is reported (``EngineCompile.guessed``);
* a plan argument the engine kernel does not have is dropped (``EngineCompile.dropped``).

Results are cached on disk (JSON) by the scratch module's content hash, the Triton version,
the arch and the spec.

This module imports neither triton nor torch at import time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .. import versions
from ..atomicfile import write_atomic
from ..kernels import launch_plan, registry
from ..kernels.plan import Arg, LaunchPlan
from ..kernels.spec import KernelSpec

# The engines' function names of each of our kernels and the files they keep them in are the
# kernel families' (family.json's ``engine``, tilefit.kernels).


def engine_functions(kernel: str) -> tuple[str, ...]:
    """The engines' function names standing for our ``kernel`` (vLLM and SGLang share them)."""
    fam = registry.find(kernel)
    return fam.engine_functions if fam is not None else ()


def known_files(kernel: str) -> tuple[str, ...]:
    """Where the engines keep it (relative to the package's parent folder), searched first: the
    family's own files, then every other family's."""
    own = registry.find(kernel)
    files = list(own.engine_files if own is not None else ())
    for fam in registry.families():
        files.extend(f for f in fam.engine_files if f not in files)
    return tuple(files)


_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", "build", "dist", "tests", "test"}


class EngineKernelError(Exception):
    """The engine kernel cannot be found, extracted or compiled; the message says why."""


def installed_roots(which: str) -> list[Path]:
    """Folders holding the installed ``vllm`` / ``sglang`` packages (found without importing)."""
    import importlib.util

    names = ("vllm", "sglang") if which == "installed" else (which,)
    roots = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            for loc in spec.submodule_search_locations:
                roots.append(Path(loc))
    return roots


def _defines(path: Path, function: str) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return re.search(rf"^\s*def\s+{re.escape(function)}\s*\(", text, re.M) is not None


def find_source(source: str, kernel: str) -> tuple[Path, str] | None:
    """``(file, function)`` of the engine kernel standing for our ``kernel`` in ``source``."""
    names = engine_functions(kernel)
    if source in ("installed", "vllm", "sglang"):
        roots = installed_roots(source)
        if not roots:
            raise EngineKernelError(f"no installed {'vllm or sglang' if source == 'installed' else source} found")
    else:
        p = Path(source).expanduser()
        if not p.exists():
            raise EngineKernelError(f"{source}: no such file or folder")
        if p.is_file():
            for fn in names:
                if _defines(p, fn):
                    return p, fn
            return None
        roots = [p]
    for root in roots:
        bases = [root, root.parent]
        for base in bases:
            for rel in known_files(kernel):
                f = base / rel
                if f.is_file():
                    for fn in names:
                        if _defines(f, fn):
                            return f, fn
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(".py"):
                    f = Path(dirpath) / name
                    for fn in names:
                        if _defines(f, fn):
                            return f, fn
    return None


@dataclass
class EngineCompile:
    """One engine-kernel compile: ``shared_bytes`` or ``error``, and how the launch was mapped."""

    shared_bytes: int | None
    error: str | None = None
    guessed: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    source: str = ""
    function: str = ""

    def to_json(self) -> dict:
        return {"shared_bytes": self.shared_bytes, "error": self.error, "guessed": list(self.guessed),
                "dropped": list(self.dropped), "source": self.source, "function": self.function}


_POINTERISH = re.compile(r"(_ptr$|^ptr_|_Buffer$|^[A-Z][A-Za-z]*$)")


def adapt_plan(plan: LaunchPlan, params, module: str, function: str) -> tuple[LaunchPlan, list[str], list[str]]:
    """Our plan's arguments mapped onto the engine function's parameters."""
    given = plan.arg_dict()
    names = {p.name for p in params}
    args: list[Arg] = []
    guessed: list[str] = []
    for p in params:
        if p.name in given:
            args.append(given[p.name])
            continue
        if p.has_default:
            continue  # Triton takes the default itself
        if _POINTERISH.search(p.name) and not p.is_constexpr:
            args.append(Arg(p.name, "none"))
            guessed.append(f"{p.name}=None")
        elif p.is_constexpr:
            args.append(Arg(p.name, "constexpr", False))
            guessed.append(f"{p.name}=False")
        else:
            args.append(Arg(p.name, "int", 0))
            guessed.append(f"{p.name}=0")
    dropped = [a.name for a in plan.args if a.name not in names]
    adapted = LaunchPlan(plan.kernel, module, function, tuple(args), plan.num_warps, plan.num_stages, plan.options)
    return adapted, guessed, dropped


class EngineKernels:
    """The engine kernels of ``source``; ``compile(spec, arch)`` -> :class:`EngineCompile`."""

    def __init__(self, source: str, cache_dir: str | os.PathLike | None = None):
        self.source = str(source)
        self._found: dict[str, tuple[Path, str] | None] = {}
        self._scratch: dict[str, object] = {}
        self._memo: dict[tuple, EngineCompile] = {}
        self._lock = threading.Lock()
        root = Path(cache_dir) if cache_dir is not None else None
        if root is None:
            from tilefit.cachedir import cache_root

            root = cache_root()
        self._cache_root = root / "engine" / "v1" if root is not None else None

    def locate(self, kernel: str) -> tuple[Path, str] | None:
        if kernel not in self._found:
            self._found[kernel] = find_source(self.source, kernel)
        return self._found[kernel]

    def scratch(self, kernel: str):
        """The scratch module of the engine kernel for our ``kernel`` (raises EngineKernelError)."""
        from ..pysource.extract import ExtractError, extract_kernel

        if kernel not in self._scratch:
            found = self.locate(kernel)
            if found is None:
                raise EngineKernelError(f"no engine kernel for {kernel} ({' / '.join(engine_functions(kernel))})"
                                        f" in {self.source}")
            path, fn = found
            try:
                self._scratch[kernel] = extract_kernel(path, fn)
            except ExtractError as exc:
                raise EngineKernelError(str(exc)) from None
        return self._scratch[kernel]

    def describe(self, kernel: str) -> str:
        found = self.locate(kernel)
        return f"{found[1]} in {found[0]}" if found else f"(none in {self.source})"

    # -- cache

    def _cache_path(self, digest: str, arch: str, spec: KernelSpec) -> Path | None:
        if self._cache_root is None:
            return None
        key = hashlib.sha256(spec.key().encode()).hexdigest()[:32]
        return self._cache_root / f"triton-{versions.installed_triton() or 'none'}" / arch / digest[:20] / f"{key}.json"

    def _cache_get(self, path: Path | None, spec: KernelSpec) -> EngineCompile | None:
        if path is None:
            return None
        from tilefit.readfile import read_bytes

        try:
            data = json.loads(read_bytes(path, 1 << 20))
        except (OSError, ValueError, RecursionError):
            return None
        r = data.get("result") if type(data) is dict and data.get("key") == spec.key() else None
        if type(r) is not dict:
            return None
        shared, error = r.get("shared_bytes"), r.get("error")
        lists, texts = (r.get("guessed"), r.get("dropped")), (r.get("source"), r.get("function"))
        if (not (type(shared) is int and shared >= 0 and error is None or shared is None and type(error) is str)
                or not all(type(v) is list and all(type(x) is str for x in v) for v in lists)
                or not all(type(v) is str for v in texts)):
            return None  # a damaged record: compiled again and rewritten
        return EngineCompile(shared, error, tuple(lists[0]), tuple(lists[1]), texts[0], texts[1])

    def _cache_put(self, path: Path | None, spec: KernelSpec, result: EngineCompile) -> None:
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps({"key": spec.key(), "result": result.to_json()}))
        except OSError:
            pass  # an unwritable cache only costs time

    # -- compile

    def compile(self, spec: KernelSpec, arch: str) -> EngineCompile:
        memo_key = (spec, arch)
        with self._lock:
            hit = self._memo.get(memo_key)
        if hit is not None:
            return hit
        try:
            scratch = self.scratch(spec.kernel)
        except EngineKernelError as exc:
            return EngineCompile(None, str(exc), source=self.source)
        path = self._cache_path(scratch.hash, arch, spec)
        result = self._cache_get(path, spec)
        if result is None:
            result = self._compile(scratch, spec, arch)
            if result.error is None or "compile failed" in (result.error or ""):
                self._cache_put(path, spec, result)
        with self._lock:
            self._memo[memo_key] = result
        return result

    def _compile(self, scratch, spec: KernelSpec, arch: str) -> EngineCompile:
        from .exact import CompileFailed, load_kernel
        from .worker import compile_plan_limited

        src = str(scratch.origin)
        try:
            scratch.load()
            fn = load_kernel(scratch.name, scratch.kernel)
            plan, guessed, dropped = adapt_plan(launch_plan(spec), fn.params, scratch.name, scratch.kernel)
        except Exception as exc:  # noqa: BLE001 - a scratch module that does not load is an answer
            return EngineCompile(None, f"the engine kernel does not load: {type(exc).__name__}: {exc}",
                                 source=src, function=scratch.kernel)
        try:
            result = compile_plan_limited(plan, arch, spec=spec, source=scratch)
        except CompileFailed as exc:  # pragma: no cover - raise_on_error=False returns errors
            return EngineCompile(None, f"compile failed: {exc.message}", tuple(guessed), tuple(dropped), src,
                                 scratch.kernel)
        except Exception as exc:  # noqa: BLE001 - e.g. a parameter the mapping could not satisfy
            return EngineCompile(None, f"{type(exc).__name__}: {exc}", tuple(guessed), tuple(dropped), src,
                                 scratch.kernel)
        if result.error_stage in ("timeout", "crash", "blocked"):  # not "compile failed": never cached
            return EngineCompile(None, result.error, tuple(guessed), tuple(dropped), src, scratch.kernel)
        if result.error is not None:
            return EngineCompile(None, f"compile failed ({result.error_stage}): {result.error.splitlines()[-1][:300]}",
                                 tuple(guessed), tuple(dropped), src, scratch.kernel)
        return EngineCompile(int(result.shared_bytes), None, tuple(guessed), tuple(dropped), src, scratch.kernel)

    def shared_bytes(self, spec: KernelSpec, arch: str) -> int:
        """For :class:`tilefit.estimate.Estimator`: bytes, or an exception with the reason."""
        result = self.compile(spec, arch)
        if result.error is not None:
            raise EngineKernelError(result.error)
        assert result.shared_bytes is not None
        return result.shared_bytes


_shared: dict[str, EngineKernels] = {}
_shared_lock = threading.Lock()


def engine_kernels(source: str) -> EngineKernels:
    """A process-wide :class:`EngineKernels` per source."""
    with _shared_lock:
        ek = _shared.get(source)
        if ek is None:
            ek = _shared[source] = EngineKernels(source)
        return ek


@dataclass
class Comparison:
    spec: KernelSpec
    arch: str
    ours: int | None
    engine: EngineCompile
    notes: list = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return self.ours is not None and self.engine.shared_bytes is not None and self.ours != self.engine.shared_bytes
