"""On-disk compile cache of the exact estimator, and parallel compiles.

Every compile result (shared bytes, or the compiler's error) is one JSON record (never pickle)::

    <cache dir>/exact/v1/triton-<version>/<arch>/<kernel>-<source hash>/<sha256(spec.key())>.json

so a record is keyed by the Triton version, a hash of our kernel's source (and of the launch
plan module, which decides the arguments), the target arch and ``KernelSpec.key()``; the record
repeats the key, and a record whose content does not match, or does not parse, is ignored and
rewritten. Writes go to a temporary file in the same folder, then ``os.replace``: readers see the
old record or the new one, never half of one, and any number of processes may write at once (the
last same-content write wins). Compile failures are cached too: they are deterministic for a
(kernel source, Triton, arch, spec); a compile that ran out of time or crashed is not.

The cache folder is, in order: the ``cache_dir`` argument, ``$TILEFIT_CACHE_DIR`` (empty: no
cache), ``platformdirs.user_cache_dir("tilefit")``.

A lookup needs neither triton nor torch (the Triton version is read from the installed
distribution's metadata), so a warm cache answers without importing the compiler.

:class:`ExactEstimator` puts the pieces together: ``shared_bytes(spec, arch)`` and
``many(items, jobs, progress)``, which compiles what the cache lacks on child processes over all
cores (:mod:`tilefit.smem.worker`), each compile under the time limit.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..atomicfile import write_atomic
from ..readfile import read_bytes
from .. import versions
from .exact import CompileFailed, ExactResult
from ..kernels import registry
from ..kernels.spec import KernelSpec

SCHEMA = 1
RECORD_LIMIT = 1 << 20  # a record is a few hundred bytes; a compiler message at most 4000
ENV_VAR = "TILEFIT_CACHE_DIR"

_PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # linter/ == tilefit
_source_hashes: dict[str, str] = {}
_source_lock = threading.Lock()

Item = tuple[KernelSpec, str]
Progress = Callable[[int, int], None]


def default_cache_dir() -> Path | None:
    """The one cache root (:func:`tilefit.cachedir.cache_root`): ``$TILEFIT_CACHE_DIR`` or the
    platform's user cache folder; None when ``TILEFIT_CACHE_DIR`` is empty (caching off)."""
    from ..cachedir import cache_root

    root = cache_root()
    return root.expanduser() if root is not None else None


def kernel_source_hash(kernel: str) -> str:
    """sha256 (hex, 16 digits) of the files a compile of ``kernel`` depends on: the reference
    kernel's module, its family's launch plan and the shared plan helpers
    (:meth:`tilefit.kernels.KernelFamily.source_files`)."""
    with _source_lock:
        cached = _source_hashes.get(kernel)
        if cached is not None:
            return cached
        family = registry.get(kernel)
        h = hashlib.sha256()
        h.update(f"schema={SCHEMA}\n".encode())
        for path in family.source_files():
            try:
                rel = str(path.resolve().relative_to(_PACKAGE_ROOT))
            except ValueError:  # a family outside the package ($TILEFIT_KERNEL_PATH)
                rel = f"{family.name}/{path.name}"
            h.update(rel.encode() + b"\0")
            h.update(path.read_bytes())
        digest = h.hexdigest()[:16]
        _source_hashes[kernel] = digest
        return digest


def read_record(path: Path, key: str, arch: str, triton: str, source_hash: str) -> ExactResult | None:
    """The result of a compile record, or None: absent, unreadable, not JSON, for another key,
    or with any field of the wrong type (:meth:`ExactResult.from_record`). A None makes the
    caller compile again and rewrite the record, so a bad record is never trusted twice."""
    try:
        data = json.loads(read_bytes(path, RECORD_LIMIT))
    except (OSError, ValueError, RecursionError):
        return None
    if (type(data) is not dict or data.get("schema") != SCHEMA or data.get("key") != key
            or data.get("arch") != arch or data.get("triton") != triton or data.get("source_hash") != source_hash):
        return None
    return ExactResult.from_record(data.get("result"))


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-+" else "_" for c in text)


class CompileCache:
    """JSON records of compile results; see the module docstring for layout and guarantees."""

    def __init__(self, cache_dir: str | os.PathLike | None = None, triton: str | None = None):
        # None (TILEFIT_CACHE_DIR=""): nothing is read or written
        self.root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
        self.triton = triton or versions.installed_triton() or "none"

    def path(self, spec: KernelSpec, arch: str) -> Path:
        key = spec.key()
        name = hashlib.sha256(key.encode()).hexdigest()[:32] + ".json"
        return (self.root / "exact" / f"v{SCHEMA}" / _safe(f"triton-{self.triton}") / _safe(arch)
                / f"{_safe(spec.kernel)}-{kernel_source_hash(spec.kernel)}" / name)

    def get(self, spec: KernelSpec, arch: str) -> ExactResult | None:
        """The cached result, or ``None`` (absent, unreadable, corrupt, or for another key)."""
        if self.root is None:
            return None
        return read_record(self.path(spec, arch), spec.key(), arch, self.triton, kernel_source_hash(spec.kernel))

    def put(self, spec: KernelSpec, arch: str, result: ExactResult) -> Path | None:
        """Write a record atomically (temporary file + ``os.replace``); None when caching is off."""
        if self.root is None:
            return None
        path = self.path(spec, arch)
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "schema": SCHEMA, "key": spec.key(), "kernel": spec.kernel, "arch": arch,
            "triton": self.triton, "source_hash": kernel_source_hash(spec.kernel),
            "result": result.to_json(),
        }
        write_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
        return path


# ------------------------------------------------------------------------------------------------
# compiles in worker processes


_UNCACHED_STAGES = ("timeout", "crash", "setup", "blocked")  # about this run, not about the kernel


class ExactEstimator:
    """Exact shared-memory figures with an on-disk cache and parallel compiles.

    ``cache_dir``: cache folder (see :func:`default_cache_dir`); ``use_cache=False`` keeps results
    in memory only. ``stop``: the compile's stopping point (``alloc``, ``llir``, ``full``).
    ``timeout``: seconds each compile may take (:mod:`tilefit.smem.worker`: compiles run in child
    processes; ``"default"``: the process-wide limit; None: in this process, unlimited). A compile
    that runs out of time or crashes comes back as a result with ``error_stage`` ``"timeout"`` /
    ``"crash"``, kept for this run and never written to the cache.
    ``stats`` counts ``hits`` (memory or disk), ``compiles`` and ``errors``.
    """

    def __init__(self, cache_dir: str | os.PathLike | None = None, *, use_cache: bool = True,
                 stop: str = "alloc", triton: str | None = None, timeout: float | str | None = "default"):
        self.cache = CompileCache(cache_dir, triton) if use_cache else None
        self.stop = stop
        self.timeout = timeout
        self._memo: dict[Item, ExactResult] = {}
        # compiles that ran out of time, with the limit they had: a later, longer limit retries
        self._timed_out: dict[Item, tuple[float, ExactResult]] = {}
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "compiles": 0, "errors": 0}

    # -- one point

    def lookup(self, spec: KernelSpec, arch: str) -> ExactResult | None:
        """Memory, then disk; ``None`` if this point was never compiled."""
        with self._lock:
            hit = self._memo.get((spec, arch))
        if hit is None and self.cache is not None:
            hit = self.cache.get(spec, arch)
            if hit is not None:
                with self._lock:
                    self._memo[(spec, arch)] = hit
        if hit is not None:
            self.stats["hits"] += 1
        return hit

    def _limit(self) -> float | None:
        from .worker import default_timeout

        return default_timeout() if self.timeout == "default" else self.timeout

    def _store(self, spec: KernelSpec, arch: str, result: ExactResult, persist: bool = True) -> None:
        with self._lock:
            if result.error_stage == "timeout":
                self._timed_out[(spec, arch)] = (self._limit() or 0.0, result)
            else:
                self._memo[(spec, arch)] = result
        self.stats["compiles"] += 1
        if result.error is not None:
            self.stats["errors"] += 1
        if persist and self.cache is not None and result.error_stage not in _UNCACHED_STAGES:
            try:
                self.cache.put(spec, arch, result)
            except OSError:
                pass  # a read-only or full cache folder costs speed, not answers

    def result(self, spec: KernelSpec, arch: str) -> ExactResult:
        """The compile result of ``spec`` on ``arch`` (compiling in-process if not cached).

        Raises ``ValueError`` for a spec our kernels cannot express and ``UnsupportedArch`` /
        ``TritonUnavailable``; compiler failures come back as a result with ``error`` set.
        """
        hit = self.lookup(spec, arch)
        if hit is not None:
            return hit
        limit = self._limit()
        with self._lock:
            tried = self._timed_out.get((spec, arch))
        if tried is not None and limit is not None and limit <= tried[0]:
            return tried[1]  # ran out of this much time already: not again in this run
        from .exact import parse_arch
        from ..kernels import launch_plan
        from .worker import compile_spec_limited

        if self.timeout is not None:  # what compile_spec would raise, raised here, not in the child
            launch_plan(spec)
            parse_arch(arch)
            if versions.installed_triton() is None:
                from .exact import TritonUnavailable

                raise TritonUnavailable("the exact estimator needs triton (pip install 'tilefit[triton]')")
        result = compile_spec_limited(spec, arch, stop=self.stop, timeout=self.timeout)
        self._store(spec, arch, result)
        return result

    def shared_bytes(self, spec: KernelSpec, arch: str) -> int:
        """Shared memory per block; raises :class:`CompileFailed` when Triton cannot compile it."""
        result = self.result(spec, arch)
        if result.error is not None:
            raise CompileFailed(spec, arch, result.error_stage or "?", result.error)
        assert result.shared_bytes is not None
        return result.shared_bytes

    # -- many points

    def many(self, items: Iterable[Item], jobs: int | None = None,
             progress: Progress | None = None) -> dict[Item, ExactResult]:
        """Results for many ``(spec, arch)`` pairs; compiles the missing ones in parallel.

        ``jobs``: worker processes (default: all cores; 1 compiles in this process).
        ``progress(done, total)`` is called after every finished point (cache hits included),
        e.g. ``lambda d, t: bar.update(1)`` for a click progress bar. Compiler failures come back
        as results with ``error`` set; specs our kernels cannot express raise ``ValueError``
        before any compile starts.
        """
        from ..kernels import launch_plan

        unique: list[Item] = list(dict.fromkeys(items))
        for spec, _arch in unique:
            launch_plan(spec)  # fail fast on specs no kernel can run
        total = len(unique)
        done = 0
        out: dict[Item, ExactResult] = {}
        missing: list[Item] = []
        for item in unique:
            hit = self.lookup(*item)
            if hit is None:
                missing.append(item)
            else:
                out[item] = hit
                done += 1
                if progress:
                    progress(done, total)
        if not missing:
            return out

        workers = jobs if jobs and jobs > 0 else (os.cpu_count() or 1)
        workers = min(workers, len(missing))
        counter = [done]

        def finished(item: Item, result: ExactResult) -> None:
            self._store(item[0], item[1], result)
            out[item] = result
            counter[0] += 1
            if progress:
                progress(counter[0], total)

        if workers <= 1 and self.timeout is None:
            from .exact import compile_spec

            for spec, arch in missing:
                finished((spec, arch), compile_spec(spec, arch, stop=self.stop, raise_on_error=False))
            return out
        self._run_workers(missing, workers, finished)
        return out

    def _run_workers(self, items: list[Item], workers: int, finished: Callable[[Item, ExactResult], None]) -> None:
        """Compile ``items`` on ``workers`` child processes, each compile under the time limit; a
        child that dies or runs out of time costs only its own item (the next item gets a fresh
        child). ``finished`` is called in this thread, as results come in."""
        from .worker import CompileWorker, compile_spec_limited

        pool: queue.Queue = queue.Queue()
        children = [CompileWorker(reuse=True) for _ in range(workers)]
        for child in children:
            pool.put(child)
        limit = self.timeout

        def one(item: Item) -> ExactResult:
            child = pool.get()
            try:
                return compile_spec_limited(item[0], item[1], stop=self.stop, timeout=limit, worker=child)
            finally:
                pool.put(child)

        try:
            with ThreadPoolExecutor(max_workers=workers) as threads:
                futures = {threads.submit(one, item): item for item in items}
                try:
                    for fut in as_completed(futures):
                        finished(futures[fut], fut.result())
                except BaseException:
                    for fut in futures:
                        fut.cancel()
                    for child in children:  # unblocks the threads waiting on them
                        child.close(keep=False)
                    raise
        finally:
            for child in children:
                child.close()


_default: ExactEstimator | None = None
_default_lock = threading.Lock()


def default_estimator() -> ExactEstimator:
    """The process-wide estimator (default cache folder, ``alloc`` stop)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ExactEstimator()
        return _default


def results_table(results: Mapping[Item, ExactResult]) -> list[dict]:
    """Plain rows (for reports and JSON output)."""
    rows = []
    for (spec, arch), r in results.items():
        rows.append({"key": spec.key(), "arch": arch, "shared_bytes": r.shared_bytes, "error": r.error,
                     "threads": r.threads, "stage": r.stage})
    return rows
