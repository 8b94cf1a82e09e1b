"""Compile an engine's own kernel (``--engine-kernels``, ``calibrate smem --engine``).

``EngineKernels(source)`` opens an engine's source (:mod:`tilefit.smem.engine_source`: a wheel
fetched with pip and read from its zip, a ``.whl``, a folder, the installed package), finds the
engine's ``@triton.jit`` kernel for a spec, takes it and the jit helpers it calls out by AST
(:func:`tilefit.pysource.extract.extract_kernel`: a scratch module that imports only triton; the
engine is never imported), and compiles it with the engine's own launch:

* **The engine's launcher, restated.** Where the kernel family models the engine's launch
  (``kernels/<family>/engines.py``: vLLM's ``invoke_fused_moe_triton_kernel``, SGLang's
  ``invoke_fused_moe_kernel`` with its TMA descriptors, the MLA decode and block-GEMM launchers),
  the engine kernel gets exactly those arguments, by its parameter names; which of the engine's
  kernels runs is the launcher's choice too (SGLang's int8 block GEMM is another function).
* **A tree the family does not model** (a user's patched release, a made-up engine) gets our
  reference plan mapped onto the kernel's parameters: a parameter our plan has is passed as the
  plan passes it; one it lacks takes its default, else a pointer-like name gets ``None``, a
  constexpr ``False``, an int ``0`` -- each such guess is reported (``EngineCompile.guessed``);
  a plan argument the kernel does not have is dropped (``EngineCompile.dropped``).

Results are cached on disk (JSON) by the scratch module's content hash, the launch's source
hash, the Triton version, the arch and the spec; :meth:`EngineKernels.many` compiles in a spawn
pool over all cores. This module imports neither triton nor torch at import time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..atomicfile import write_atomic
from ..kernels import launch_plan, registry
from ..kernels.plan import Arg, LaunchPlan
from ..kernels.spec import KernelSpec
from .engine_source import (ENGINE_NAMES, EngineSourceError, EngineTree, engine_of_file, installed_roots,  # noqa: F401
                            open_source)

CACHE_SCHEMA = 4  # 4: descriptor dtypes no longer mixed up by the specialiser cache (exact._torch_dtype)


def engine_functions(kernel: str) -> tuple[str, ...]:
    """The engines' function names standing for our ``kernel`` (vLLM and SGLang share them)."""
    fam = registry.find(kernel)
    return fam.engine_functions if fam is not None else ()


def known_files(kernel: str, engine: str | None = None) -> tuple[str, ...]:
    """Where the engines keep it (relative to the package's parent folder), searched first: the
    family's files for ``engine``, its other files, then every other family's."""
    own = registry.find(kernel)
    files: list[str] = []
    if own is not None:
        per = own.engines
        for name in ([engine] if engine else []) + [n for n in per if n != engine]:
            files.extend(f for f in (per.get(name) or {}).get("files", ()) if f not in files)
        files.extend(f for f in own.engine_files if f not in files)
    for fam in registry.families():
        files.extend(f for f in fam.engine_files if f not in files)
    return tuple(files)


_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", "build", "dist", "tests", "test"}


class EngineKernelError(Exception):
    """The engine kernel cannot be found, extracted or compiled; the message says why."""


def _defines(path: str, function: str) -> bool:
    from ..pysource.extract import read_bytes

    try:
        text = read_bytes(path).decode("utf-8", errors="replace")
    except OSError:
        return False
    return re.search(rf"^\s*def\s+{re.escape(function)}\s*\(", text, re.M) is not None


def _search(tree: EngineTree, kernel: str, names: tuple[str, ...], engine: str | None) -> tuple[Path, str] | None:
    bases = [tree.root, os.path.dirname(tree.root)]
    for base in bases:
        for rel in known_files(kernel, engine):
            f = os.path.join(base, *rel.split("/"))
            from ..pysource.extract import is_file

            if is_file(f):
                for fn in names:
                    if _defines(f, fn):
                        return Path(f), fn
    for f in tree.python_files():
        parts = set(tree.relative(f).split("/")[:-1])
        if parts & _SKIP_DIRS or any(p.startswith(".") for p in parts):
            continue
        for fn in names:
            if _defines(f, fn):
                return Path(f), fn
    return None


def find_source(source: str, kernel: str, function: str | None = None) -> tuple[Path, str] | None:
    """``(file, function)`` of the engine kernel standing for our ``kernel`` in ``source``."""
    names = (function,) if function else engine_functions(kernel)
    try:
        tree = open_source(source)
    except EngineSourceError as exc:
        raise EngineKernelError(str(exc)) from None
    p = Path(source).expanduser()
    if p.is_file() and p.suffix == ".py":
        for fn in names:
            if _defines(str(p), fn):
                return p, fn
        return None
    return _search(tree, kernel, names, tree.engine)


@dataclass
class EngineCompile:
    """One engine-kernel compile: ``shared_bytes`` or ``error``, and how the launch was mapped."""

    shared_bytes: int | None
    error: str | None = None
    guessed: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    source: str = ""
    function: str = ""
    launch: str = ""  # "engine" (the engine's launcher, restated) or "mapped" (our plan, mapped)
    stage: str = ""  # where a failed compile failed (ttir, ttgir, llir, ...)

    @property
    def failed_to_compile(self) -> bool:
        """The compiler itself rejected the kernel (a fact about the kernel, not about our setup:
        a Python error of tilefit's own calls into Triton is not one)."""
        return (self.error is not None and self.error.startswith("compile failed")
                and not _SETUP_ERROR.search(self.error))

    def to_json(self) -> dict:
        return {"shared_bytes": self.shared_bytes, "error": self.error, "guessed": list(self.guessed),
                "dropped": list(self.dropped), "source": self.source, "function": self.function,
                "launch": self.launch, "stage": self.stage}

    @classmethod
    def from_json(cls, r: dict) -> "EngineCompile":
        return cls(r["shared_bytes"], r["error"], tuple(r.get("guessed", ())), tuple(r.get("dropped", ())),
                   r.get("source", ""), r.get("function", ""), r.get("launch", ""), r.get("stage", ""))


_SETUP_ERROR = re.compile(r"\b(TypeError|AttributeError|ImportError|ModuleNotFoundError|NameError|KeyError): ")
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


def _params_fit(plan: LaunchPlan, params) -> bool:
    """Whether the engine launch ``plan`` names only parameters the kernel has and covers every
    parameter without a default."""
    names = {p.name for p in params}
    given = {a.name for a in plan.args}
    return given <= names and all(p.name in given or p.has_default for p in params)


_launch_hashes: dict[str, str] = {}


def launch_source_hash(kernel: str) -> str:
    """sha256 (16 hex digits) of what an engine launch of ``kernel`` is built from: the family's
    ``engines.py``, its launch plan and the shared plan helpers (memoised per process)."""
    hit = _launch_hashes.get(kernel)
    if hit is None:
        hit = _launch_hashes[kernel] = _launch_source_hash(kernel)
    return hit


def _launch_source_hash(kernel: str) -> str:
    fam = registry.get(kernel)
    h = hashlib.sha256(f"schema={CACHE_SCHEMA}\n".encode())
    files = list(fam.source_files()) + [fam.folder / "engines.py"]
    for path in files:
        if path.is_file():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def _engine_compile_worker(scratch, plan: LaunchPlan, arch: str, stop: str, meta: dict) -> dict:
    """Top-level (picklable) worker: load the scratch module, compile one engine launch."""
    import warnings

    warnings.filterwarnings("ignore")
    return _compile_loaded(scratch, plan, arch, stop, meta).to_json()


def _compile_loaded(scratch, plan: LaunchPlan, arch: str, stop: str, meta: dict) -> EngineCompile:
    """One engine launch compiled under the compile time limit (:mod:`tilefit.smem.worker`: a
    child process that loads the scratch module itself); a timeout, a crashed or refused child
    is an error that is not a compile failure, so it is never cached."""
    from .worker import compile_plan_limited

    base = dict(guessed=tuple(meta.get("guessed", ())), dropped=tuple(meta.get("dropped", ())),
                source=meta.get("source", ""), function=plan.function, launch=meta.get("launch", ""))
    try:
        scratch.load()
    except Exception as exc:  # noqa: BLE001 - a scratch module that does not load is an answer
        return EngineCompile(None, f"the engine kernel does not load: {type(exc).__name__}: {exc}", **base)
    try:
        result = compile_plan_limited(plan, arch, stop=stop, source=scratch)
    except Exception as exc:  # noqa: BLE001 - e.g. a parameter the mapping could not satisfy
        return EngineCompile(None, f"{type(exc).__name__}: {exc}", **base)
    if result.error_stage in ("timeout", "crash", "blocked", "setup"):  # not the compiler's verdict
        return EngineCompile(None, result.error or result.error_stage, **base)
    if result.error is not None:
        return EngineCompile(None, f"compile failed ({result.error_stage}): {_error_line(result.error)}",
                             stage=result.error_stage or "", **base)
    return EngineCompile(int(result.shared_bytes), None, **base)


def _error_line(text: str) -> str:
    """The compiler's own words: the first line naming an error, else the last line (without the
    scratch module's path, which names a local folder)."""
    from ..pysource.extract import without_scratch_location

    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower() and len(ln) < 300:
            if ln.rstrip().endswith(":") and lines[-1] != ln and len(lines[-1]) < 200:
                ln = f"{ln} {lines[-1]}"  # CompilationError: at 281:51: <the reason, after the source excerpt>
            return without_scratch_location(ln)
    return without_scratch_location((lines[-1] if lines else text)[:300])


Item = tuple[KernelSpec, str]


class EngineKernels:
    """The engine kernels of ``source``; ``compile(spec, arch)`` -> :class:`EngineCompile`.

    ``engine``: whose launcher to restate (default: the engine the source is, from its wheel name,
    its ``*.dist-info`` or its package folder). ``stop``: the compile's stopping point (``alloc``
    is enough for the bytes; ``llir`` also catches failures in the LLVM lowering)."""

    def __init__(self, source: str, cache_dir: str | os.PathLike | None = None, engine: str | None = None,
                 stop: str = "alloc", tree: EngineTree | None = None, log=None):
        self.source = str(source)
        self._tree = tree
        self._cache_arg = cache_dir
        self._log = log
        self._engine = engine
        self.stop = stop
        self._found: dict[tuple, tuple[Path, str] | None] = {}
        self._scratch: dict[tuple, object] = {}
        self._memo: dict[tuple, EngineCompile] = {}
        self._lock = threading.Lock()
        root = Path(cache_dir) if cache_dir is not None else None
        if root is None:
            from tilefit.cachedir import cache_root

            root = cache_root()
        self._cache_root = root / "engine" / f"v{CACHE_SCHEMA}" if root is not None else None
        self.stats = {"hits": 0, "compiles": 0}

    # -- the source

    @property
    def tree(self) -> EngineTree:
        if self._tree is None:
            try:
                self._tree = open_source(self.source, self._cache_arg, self._log)
            except EngineSourceError as exc:
                raise EngineKernelError(str(exc)) from None
        return self._tree

    @property
    def engine(self) -> str | None:
        return self._engine or self.tree.engine

    def _function_for(self, spec: KernelSpec, arch: str) -> str | None:
        """The engine kernel the engine's launcher runs for ``spec`` (None: not modelled)."""
        fam = registry.get(spec.kernel)
        engine = self.engine
        if engine is None or engine not in fam.engine_launchers():
            return None
        return fam.engine_function(engine, spec, arch)

    def locate(self, kernel: str, function: str | None = None) -> tuple[Path, str] | None:
        key = (kernel, function)
        if key not in self._found:
            p = Path(self.source).expanduser()
            if p.is_file() and p.suffix == ".py":
                self._found[key] = find_source(self.source, kernel, function)
            else:
                names = (function,) if function else engine_functions(kernel)
                self._found[key] = _search(self.tree, kernel, names, self.engine)
        return self._found[key]

    def scratch(self, kernel: str, function: str | None = None):
        """The scratch module of the engine kernel for our ``kernel`` (raises EngineKernelError)."""
        from ..pysource.extract import ExtractError, extract_kernel

        key = (kernel, function)
        if key not in self._scratch:
            found = self.locate(kernel, function)
            if found is None:
                names = (function,) if function else engine_functions(kernel)
                raise EngineKernelError(f"no engine kernel for {kernel} ({' / '.join(names)}) in {self.source}")
            path, fn = found
            try:
                self._scratch[key] = extract_kernel(path, fn)
            except ExtractError as exc:
                raise EngineKernelError(str(exc)) from None
        return self._scratch[key]

    def describe(self, kernel: str) -> str:
        found = self.locate(kernel)
        return f"{found[1]} in {found[0]}" if found else f"(none in {self.source})"

    def provenance(self, spec: KernelSpec, arch: str) -> dict:
        """What a figure of ``spec`` on ``arch`` comes from: the engine and release, the kernel's
        name, its file (relative to the tree) and that file's sha256, the scratch module's hash."""
        function = self._function_for(spec, arch)
        scratch = self.scratch(spec.kernel, function)
        tree = self.tree
        origin = scratch.origin
        return {"engine": tree.engine, "engine_version": tree.version, "kernel": scratch.kernel,
                "file": tree.relative(origin), "file_sha256": tree.sha256(origin),
                "helpers": [f for f in scratch.functions if f != scratch.kernel],
                "scratch_sha256": scratch.hash, "wheel": os.path.basename(tree.wheel) if tree.wheel else None,
                "wheel_sha256": tree.wheel_sha256}

    # -- the launch

    def plan(self, spec: KernelSpec, arch: str) -> tuple[object, LaunchPlan, dict]:
        """``(scratch module, launch plan, meta)`` of the engine kernel for ``spec`` on ``arch``.
        Raises EngineKernelError (no kernel, not extractable) or ValueError (not launched so)."""
        fam = registry.get(spec.kernel)
        engine = self.engine
        function = self._function_for(spec, arch)
        scratch = self.scratch(spec.kernel, function)
        meta = {"source": str(scratch.origin)}
        if function is not None:
            plan = fam.engine_plan(engine, spec, arch, scratch.name)
            params = _scratch_params(scratch)
            if params is None or _params_fit(plan, params):
                meta["launch"] = "engine"
                return scratch, plan, meta
        from .exact import load_kernel

        scratch.load()
        fn = load_kernel(scratch.name, scratch.kernel)
        plan, guessed, dropped = adapt_plan(launch_plan(spec), fn.params, scratch.name, scratch.kernel)
        meta.update(launch="mapped", guessed=guessed, dropped=dropped)
        return scratch, plan, meta

    # -- cache

    def _cache_path(self, digest: str, arch: str, spec: KernelSpec, plan: LaunchPlan | None = None) -> Path | None:
        """``<root>/triton-<v>/<arch>/<scratch hash>/<sha256 of the launch>.json``: keyed by what
        decides the compile -- the scratch module's text and the launch plan's arguments and
        options -- so a change anywhere else in tilefit keeps the cache."""
        if self._cache_root is None:
            return None
        if plan is None:
            try:
                _s, plan, _m = self.plan(spec, arch)
            except Exception:  # noqa: BLE001
                return None
        key = hashlib.sha256(repr((plan.function, plan.args, plan.num_warps, plan.num_stages, plan.options,
                                   self.stop)).encode()).hexdigest()[:32]
        from .interpreter import compile_triton_version

        return (self._cache_root / f"triton-{compile_triton_version() or 'none'}" / arch / digest[:20]
                / f"{key}.json")

    def _target(self, spec: KernelSpec, arch: str, scratch, plan: LaunchPlan) -> str:
        """The arch compiled for ``arch``: the first arch of its class
        (:mod:`tilefit.smem.archclass`) where the engine's launch there is this same plan
        of this same kernel, else ``arch``. Its compile, and its cache record, answer both."""
        from .archclass import compile_arch
        from .interpreter import compile_triton_version

        key = repr((plan.function, plan.args, plan.num_warps, plan.num_stages, plan.options))
        target = compile_arch(arch, compile_triton_version(), key, scratch.source)
        if target == arch:
            return arch
        try:
            other, other_plan, _m = self.plan(spec, target)
        except Exception:  # noqa: BLE001 - no launch there: compile for the arch asked
            return arch
        return target if other.hash == scratch.hash and other_plan == plan else arch

    def _cache_get(self, path: Path | None, spec: KernelSpec) -> EngineCompile | None:
        if path is None:
            return None
        from tilefit.readfile import read_bytes

        try:
            data = json.loads(read_bytes(path, 1 << 20))
            if type(data) is not dict or data.get("engine") != self.engine or data.get("stop") != self.stop:
                return None
            r = data.get("result") if data.get("key") == spec.key() else None
        except (OSError, ValueError, RecursionError):
            return None
        if type(r) is not dict:
            return None
        shared, error = r.get("shared_bytes"), r.get("error")
        lists = (r.get("guessed", []), r.get("dropped", []))
        texts = tuple(r.get(k, "") for k in ("source", "function", "launch", "stage"))
        if (not (type(shared) is int and shared >= 0 and error is None or shared is None and type(error) is str)
                or not all(type(v) is list and all(type(x) is str for x in v) for v in lists)
                or not all(type(v) is str for v in texts)):
            return None  # a damaged record: compiled again and rewritten
        return EngineCompile.from_json(r)

    def _cache_put(self, path: Path | None, spec: KernelSpec, result: EngineCompile) -> None:
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps({"key": spec.key(), "engine": self.engine, "stop": self.stop,
                                           "result": result.to_json()}))
        except OSError:
            pass  # an unwritable cache only costs time

    def lookup(self, spec: KernelSpec, arch: str) -> EngineCompile | None:
        """Memory, then the disk cache; None when this point was never compiled."""
        with self._lock:
            hit = self._memo.get((spec, arch))
        if hit is not None:
            return hit
        try:
            scratch, _plan, _meta = self.plan(spec, arch)
        except (EngineKernelError, ValueError, KeyError):
            return None
        target = self._target(spec, arch, scratch, _plan)
        hit = self._cache_get(self._cache_path(scratch.hash, target, spec, _plan), spec)
        if hit is not None:
            self.stats["hits"] += 1
            with self._lock:
                self._memo[(spec, arch)] = hit
        return hit

    # -- compile

    def compile(self, spec: KernelSpec, arch: str) -> EngineCompile:
        memo_key = (spec, arch)
        with self._lock:
            hit = self._memo.get(memo_key)
        if hit is not None:
            return hit
        try:
            scratch, plan, meta = self.plan(spec, arch)
        except EngineKernelError as exc:
            return EngineCompile(None, str(exc), source=self.source)
        except Exception as exc:  # noqa: BLE001 - a launch the engine never makes, a broken scratch module
            return EngineCompile(None, f"{type(exc).__name__}: {exc}", source=self.source)
        target = self._target(spec, arch, scratch, plan)
        path = self._cache_path(scratch.hash, target, spec, plan)
        result = self._cache_get(path, spec)
        if result is None:
            result = _compile_loaded(scratch, plan, target, self.stop, meta)
            self.stats["compiles"] += 1
            if result.error is None or result.failed_to_compile:
                self._cache_put(path, spec, result)
        else:
            self.stats["hits"] += 1
        with self._lock:
            self._memo[memo_key] = result
        return result

    def many(self, items: Iterable[Item], jobs: int | None = None,
             progress: Callable[[int, int], None] | None = None) -> dict[Item, EngineCompile]:
        """Results for many ``(spec, arch)`` pairs; what the cache lacks is compiled in a spawn pool
        (``jobs`` processes, default all cores). ``progress(done, total)`` after every point."""
        unique = list(dict.fromkeys(items))
        out: dict[Item, EngineCompile] = {}
        # one compile per (spec, kernel, plan, arch class): the points it also answers
        todo: list[tuple[Item, object, LaunchPlan, dict, Path | None, str]] = []
        same: dict[tuple, list[Item]] = {}
        done = 0
        for item in unique:
            spec, arch = item
            with self._lock:
                hit = self._memo.get(item)
            if hit is None:
                try:
                    scratch, plan, meta = self.plan(spec, arch)
                except EngineKernelError as exc:
                    hit = EngineCompile(None, str(exc), source=self.source)
                except Exception as exc:  # noqa: BLE001
                    hit = EngineCompile(None, f"{type(exc).__name__}: {exc}", source=self.source)
                else:
                    target = self._target(spec, arch, scratch, plan)
                    path = self._cache_path(scratch.hash, target, spec, plan)
                    hit = self._cache_get(path, spec)
                    if hit is None:
                        group = (spec, scratch.hash, repr(plan), target)
                        if group not in same:
                            same[group] = []
                            todo.append((item, scratch, plan, meta, path, target))
                        same[group].append(item)
                        continue
                    self.stats["hits"] += 1
            out[item] = hit
            done += 1
            if progress:
                progress(done, len(unique))
        if not todo:
            return out
        workers = min(jobs if jobs and jobs > 0 else (os.cpu_count() or 1), len(todo))

        def finished(entry, result: EngineCompile) -> None:
            nonlocal done
            item, scratch, plan, _m, path, target = entry
            self.stats["compiles"] += 1
            if result.error is None or result.failed_to_compile:
                self._cache_put(path, item[0], result)
            for answered in same[(item[0], scratch.hash, repr(plan), target)]:
                with self._lock:
                    self._memo[answered] = result
                out[answered] = result
                done += 1
                if progress:
                    progress(done, len(unique))

        if workers <= 1:
            for entry in todo:
                _item, scratch, plan, meta, _path, target = entry
                finished(entry, _compile_loaded(scratch, plan, target, self.stop, meta))
            return out
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        from concurrent.futures.process import BrokenProcessPool

        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {pool.submit(_engine_compile_worker, scratch, plan, target, self.stop, meta):
                       (item, scratch, plan, meta, path, target) for item, scratch, plan, meta, path, target in todo}
            try:
                for fut in as_completed(futures):
                    entry = futures[fut]
                    try:
                        result = EngineCompile.from_json(fut.result())
                    except BrokenProcessPool:
                        result = EngineCompile(None, "the compiler process died", source=entry[3].get("source", ""),
                                               function=entry[2].function)
                    finished(entry, result)
            except BaseException:
                for fut in futures:
                    fut.cancel()
                raise
        return out

    def shared_bytes(self, spec: KernelSpec, arch: str) -> int:
        """For :class:`tilefit.estimate.Estimator`: bytes, or an exception with the reason."""
        result = self.compile(spec, arch)
        if result.error is not None:
            raise EngineKernelError(result.error)
        assert result.shared_bytes is not None
        return result.shared_bytes


def _scratch_params(scratch):
    """The kernel's parameters read from the scratch module's AST (no import): objects with
    ``name``, ``has_default``; None when they cannot be read."""
    import ast

    try:
        tree = ast.parse(scratch.source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == scratch.kernel:
            a = node.args
            pos = list(a.posonlyargs) + list(a.args)
            n_default = len(a.defaults)
            out = [_Param(p.arg, i >= len(pos) - n_default) for i, p in enumerate(pos)]
            out += [_Param(p.arg, d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
            return out
    return None


@dataclass(frozen=True)
class _Param:
    name: str
    has_default: bool


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
