"""Compiles in a child process, each with a time limit.

Triton's pipeline is C++ (MLIR passes, LLVM): a compile that runs away (the HIP pipeline with
``num_stages=16`` ran over 500 s) cannot be interrupted in the process that runs it. So every
compile the linter asks for runs in a child process (``spawn``: no inherited threads or
CUDA state), one request at a time over a pipe; when a request is not answered within the limit
the child is killed, the answer is a timed-out :class:`~tilefit.smem.exact.ExactResult`
(``error_stage="timeout"``; never written to a cache: it depends on the machine's load, not on
the kernel) and the next request starts a fresh child. A child that dies (a compiler crash,
the OOM killer) answers ``error_stage="crash"`` the same way. Kernels reach the child as data:
our reference kernels by their :class:`KernelSpec`, extracted kernels by their scratch module
(:mod:`tilefit.pysource.extract`), an ``--allow-import`` kernel by its module and package root.

A child is started only when no running one can answer for the caller's settings: a change of
the settings it reads as it goes (:data:`LIVE_SETTINGS`: the cache folder, ...) is sent to it,
and the idle children of closed pools are taken by the next pool of the process
(``CompileWorker(reuse=True)``): each start imports Triton again (~0.7 s of CPU).

The limit is :data:`DEFAULT_TIMEOUT` seconds, ``[tool.tilefit] compile-timeout`` or
``--compile-timeout``; the process-wide value is set with :func:`set_default_timeout`.

The child is isolated from the folder being scanned (issue 18: Triton runs Python while it
compiles, so a compile is never in tilefit's own process). It is ``python -I -m
tilefit.smem.worker`` (or another interpreter's Triton: :mod:`tilefit.smem.interpreter`): no current folder, script folder, ``PYTHONPATH`` or user site on
``sys.path``, so no ``conftest.py``, ``sitecustomize.py``, ``.pth`` or shadowing ``triton.py`` of
the tree is imported. It runs in a temporary working folder (removed when the child stops) with
a scrubbed environment (:func:`scrubbed_env`: ``PATH``, the locale, the ``TRITON_*``,
``TILEFIT_*`` and ``CUDA_*`` settings, nothing else of the caller's; ``HOME`` and ``TMPDIR`` in the
temporary folder). Its stdout and stderr go to a log in that folder: whatever the compiler
prints (MLIR dumps, warnings) never reaches tilefit's output, so ``--output-format json`` stays
parseable. Requests and answers travel as pickles over a socket pair. A scratch module whose
``triton.language`` paths leave Triton (:func:`tilefit.pysource.allowlist.check_members`, run in
the child before the module is loaded) is answered ``error_stage="blocked"``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from .timeout import DEFAULT_TIMEOUT, default_timeout, set_default_timeout  # noqa: F401 - the limit's home


# the caller's settings a compile may depend on (the user's own, never the scanned tree's)
_KEEP_ENV = ("PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LD_LIBRARY_PATH", "SYSTEMROOT", "VIRTUAL_ENV")
_KEEP_PREFIXES = ("TRITON_", "TILEFIT_", "CUDA_", "PTXAS", "ROCM_", "HIP_", "MLIR_", "LLVM_")
_NOT_KEPT = ("TRITON_HOME",)  # set below: it must not be the temporary HOME's default


def scrubbed_env(folder: str, environ=None) -> dict[str, str]:
    """The child's environment: what the compile needs of the caller's, ``HOME``/``TMPDIR`` in
    ``folder``; Triton's cache stays where the caller's Triton keeps it (warm runs stay warm)."""
    environ = os.environ if environ is None else environ
    env = kept_settings(environ)
    home = environ.get("TRITON_HOME") or os.path.expanduser("~")
    env.setdefault("TRITON_CACHE_DIR", os.path.join(home, ".triton", "cache"))
    env["TRITON_HOME"] = home  # Triton's other folders (dumps, overrides) where the caller has them
    env.update({"HOME": folder, "TMPDIR": folder, "TEMP": folder, "TMP": folder,
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8"})
    return env


def kept_settings(environ=None) -> dict[str, str]:
    """The caller's settings a child is started with (:func:`scrubbed_env` less its own
    folders): a child started under other settings answers for them, not for the caller's."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items()
            if (k in _KEEP_ENV or k.startswith(_KEEP_PREFIXES)) and k not in _NOT_KEPT}


# tilefit's settings that the child reads each time it uses them, never once when it starts
# (the cache folder a scratch module is written to, the user data folder, job counts, ...): a
# running child is told their new values before its next compile instead of being replaced
# (a start imports Triton again: ~0.7 s of CPU). Every other kept setting starts a new child:
# TILEFIT_KERNEL_PATH (the kernel registry, loaded once), TILEFIT_TRITON_PYTHON (the interpreter),
# Triton's, CUDA's and the compiler's own variables, the locale.
LIVE_SETTINGS = ("TILEFIT_CACHE_DIR", "TILEFIT_DATA_DIR", "TILEFIT_JOBS", "TILEFIT_COMPILE_JOBS",
                 "TILEFIT_COMPILE_CHILD_MB", "TILEFIT_ISOLATED_PERF", "TILEFIT_PERF_MODEL_PATH",
                 "TILEFIT_KEEP_BODIES", "TILEFIT_ARCH_CLASSES", "TILEFIT_CORPUS")


def start_settings(settings: dict[str, str]) -> dict[str, str]:
    """The part of :func:`kept_settings` a child reads when it starts: when it changes, the
    child is replaced (the rest, :data:`LIVE_SETTINGS`, is sent to the running child)."""
    return {k: v for k, v in settings.items() if k not in LIVE_SETTINGS}


def live_settings(settings: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in settings.items() if k in LIVE_SETTINGS}


class _Child:
    """A started ``python -I -m tilefit.smem.worker``: the process, its socket, its folder."""

    def __init__(self):
        from multiprocessing.connection import Connection

        from .interpreter import child_command

        # what the child's registry, caches and compiler read (TILEFIT_KERNEL_PATH, ...)
        self.settings = kept_settings()
        self.folder = tempfile.mkdtemp(prefix="tilefit-compile-")
        parent, child = socket.socketpair()
        try:
            with open(os.path.join(self.folder, "compiler.log"), "wb") as log:
                self.popen = subprocess.Popen(
                    child_command(child.fileno()),
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.folder,
                    env=scrubbed_env(self.folder), pass_fds=(child.fileno(),), close_fds=True)
        except BaseException:
            parent.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        finally:
            child.close()
        self.conn = Connection(parent.detach())
        self.served = 0  # requests answered
        self.rss_mb = 0.0  # resident memory after the last answer
        self.clean = True  # no request left half-answered (an answer may still be on its way)
        self.imported = False  # served an ``("import", root, module)`` plan: its modules stay imported
        self.owner = os.getpid()  # a forked process (tilefit.parallel) never takes its parent's child

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def exitcode(self) -> int | None:
        return self.popen.poll()

    def is_alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 300) -> str:
        try:
            with open(os.path.join(self.folder, "compiler.log"), encoding="utf-8", errors="replace") as fh:
                lines = [ln for ln in fh.read()[-20000:].splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:chars] if lines else ""

    def stop(self) -> None:
        try:
            self.conn.close()
        except OSError:
            pass
        if self.popen.poll() is None:
            self.popen.kill()
        try:
            self.popen.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover - a kill that did not take
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


def timeout_message(seconds: float) -> str:
    return f"the compile did not finish within {seconds:g} s (compile-timeout)"


# Idle children of closed workers that asked for reuse (the compile pool's, the exact
# estimator's): a worker that asks for reuse takes one started under the same settings before it
# starts a child, so the runs of one process (an API user's, a test suite's) do not import
# Triton again for each run. A child is kept only while it is fit to serve: alive, no answer
# pending, fewer than RECYCLE_AFTER compiles and below the pool's memory limit (tilefit.smem.pool),
# no ``--allow-import`` module loaded; at most the pool's default size are kept, stopped at exit.
_spares: list[_Child] = []
_spares_lock = threading.Lock()


def _keep_spare(proc: _Child) -> bool:
    from .pool import RECYCLE_AFTER, default_size, recycle_rss_mb

    if not (proc.clean and not proc.imported and proc.owner == os.getpid() and proc.is_alive()
            and proc.served < RECYCLE_AFTER and proc.rss_mb <= recycle_rss_mb()):
        return False
    with _spares_lock:
        if not _spares:
            atexit.register(_stop_spares)
        _spares.append(proc)
        old = _spares[:-default_size()] if len(_spares) > default_size() else []
        del _spares[:len(old)]
    for stale in old:
        stale.stop()
    return True


def _take_spare() -> _Child | None:
    want = start_settings(kept_settings())
    me = os.getpid()
    with _spares_lock:
        for i in range(len(_spares) - 1, -1, -1):
            if _spares[i].owner == me and start_settings(_spares[i].settings) == want and _spares[i].is_alive():
                return _spares.pop(i)
    return None


def _stop_spares() -> None:
    with _spares_lock:
        procs = list(_spares)
        _spares.clear()
    for proc in procs:
        proc.stop()


class CompileWorker:
    """One child process that compiles on request; thread-safe (requests are serialised).

    ``reuse``: start from an idle child of a closed worker (:data:`_spares`) when one fits, and
    leave the child idle for the next such worker when closed. Without it (the default) the
    worker's child is its own: started by it, stopped by :meth:`close`."""

    def __init__(self, reuse: bool = False):
        self._proc = None
        self._conn = None
        self._lock = threading.Lock()
        self.reuse = reuse
        self.rss_mb = 0.0  # the child's resident memory after its last answer

    def _start(self) -> None:
        proc = _take_spare() if self.reuse else None
        if proc is None:
            proc = _Child()
        self._proc, self._conn = proc, proc.conn
        self.rss_mb = proc.rss_mb

    def _stop(self) -> None:
        proc = self._proc
        self._proc = self._conn = None
        if proc is not None:
            proc.stop()

    def close(self, keep: bool = True) -> None:
        """Stop the child; a ``reuse`` worker's is left idle for the next one instead when
        ``keep`` and it is fit to serve."""
        with self._lock:
            proc = self._proc
            if keep and self.reuse and proc is not None and _keep_spare(proc):
                self._proc = self._conn = None
                return
            self._stop()

    def request(self, job: tuple, timeout: float | None) -> dict:
        """The child's answer to ``job`` (a result record as ``ExactResult.to_json``), or a
        record with ``error_stage`` ``"timeout"`` / ``"crash"``."""
        with self._lock:
            # a child started before the settings changed (a kernel family registered since:
            # $TILEFIT_KERNEL_PATH; another Triton) would answer with the old ones; one that
            # only missed a change of the settings it reads as it goes is told the new values
            now = kept_settings()
            if (self._proc is None or not self._proc.is_alive()
                    or start_settings(self._proc.settings) != start_settings(now)):
                self._stop()
                self._start()
            t0 = time.perf_counter()
            proc = self._proc
            try:
                proc.clean = False
                if proc.settings != now:
                    self._conn.send(("settings", live_settings(now)))
                    self._conn.recv()
                    proc.settings = now
                if job[0] == "plan" and isinstance(job[-1], tuple):
                    proc.imported = True
                self._conn.send(job)
                if timeout is not None and not self._conn.poll(timeout):
                    self._stop()
                    return {"error": timeout_message(timeout), "error_stage": "timeout",
                            "seconds": time.perf_counter() - t0}
                answer = self._conn.recv()
                self.rss_mb = proc.rss_mb = float(answer.pop(RSS_KEY, 0.0) or 0.0)
                proc.served += 1
                proc.clean = True
                return answer
            except (EOFError, OSError, BrokenPipeError):
                proc = self._proc
                code = tail = None
                if proc is not None:
                    try:
                        proc.popen.wait(5)
                    except subprocess.TimeoutExpired:
                        pass
                    code, tail = proc.exitcode, proc.log_tail()
                self._stop()
                why = f"the compiler process died (exit code {code})" + (f": {tail}" if tail else "")
                return {"error": why, "error_stage": "crash", "seconds": time.perf_counter() - t0}


_shared: CompileWorker | None = None
_shared_lock = threading.Lock()


def shared_worker() -> CompileWorker:
    """The process-wide worker (started on first use, stopped at exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = CompileWorker(reuse=True)
            atexit.register(_shared.close, False)
        return _shared


def _limit(timeout) -> float | None:
    return default_timeout() if timeout == "default" else timeout


def result_of(answer: dict, arch: str, num_warps: int, warp_size: int = 32):
    """An :class:`~tilefit.smem.exact.ExactResult` from the child's answer (a result record, or
    the parent's own record of a timeout, a crash or a setup error)."""
    from .exact import ExactResult
    from .interpreter import compile_triton_version

    if "arch" in answer:
        return ExactResult.from_json(answer)
    stage = answer.get("error_stage") or "setup"
    return ExactResult(arch, None, num_warps, num_warps * warp_size, stage, float(answer.get("seconds") or 0.0),
                       compile_triton_version() or "", answer.get("error") or "unknown failure", stage)


def compile_spec_limited(spec, arch: str, *, stop: str = "alloc", timeout="default", worker=None):
    """``compile_spec(spec, arch, stop=stop, raise_on_error=False)`` under the time limit
    (``timeout``: seconds, ``"default"``, or None to compile in this process without one)."""
    limit = _limit(timeout)
    if limit is None:
        from .exact import compile_spec

        return compile_spec(spec, arch, stop=stop, raise_on_error=False)
    answer = (worker or shared_worker()).request(("spec", spec, arch, stop), limit)
    return result_of(answer, arch, spec.num_warps)


def compile_plan_limited(plan, arch: str, *, stop: str = "alloc", source=None, spec=None, timeout="default",
                         worker=None):
    """``compile_plan(plan, arch, ...)`` under the time limit; ``source`` makes the plan's module
    importable in the child (a ``ScratchModule``, or ``("import", package_root, module)``)."""
    limit = _limit(timeout)
    if limit is None:
        from .exact import compile_plan

        _prepare(source)
        return compile_plan(plan, arch, stop=stop, spec=spec, raise_on_error=False)
    answer = (worker or shared_worker()).request(("plan", plan, arch, stop, source), limit)
    return result_of(answer, arch, plan.num_warps)


# ------------------------------------------------------------------------------------------------
# the child


def _serve(conn) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            answer = _run(job)
        except Exception as exc:  # noqa: BLE001 - e.g. a spec our kernels cannot express
            from tilefit.pysource.extract import ExtractError

            if isinstance(exc, ExtractError):  # the allowlist refused a triton.language path
                answer = {"error": exc.reason, "error_stage": "blocked"}
            else:
                answer = {"error": f"{type(exc).__name__}: {exc}", "error_stage": "setup"}
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        answer[RSS_KEY] = _resident_mb()  # the parent replaces a child that grew too large
        try:
            conn.send(answer)
        except (EOFError, OSError):
            return


RSS_KEY = "child_rss_mb"


def _resident_mb() -> float:
    """This process's resident memory now (MB; 0 where ``/proc`` does not say)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, ValueError, IndexError):
        return 0.0


def _run(job: tuple) -> dict:
    from .exact import compile_plan, compile_spec

    kind = job[0]
    if kind == "settings":  # the caller's LIVE_SETTINGS now (those absent are unset)
        _, values = job
        for name in LIVE_SETTINGS:
            if name in values:
                os.environ[name] = values[name]
            else:
                os.environ.pop(name, None)
        return {}
    if kind == "spec":
        _, spec, arch, stop = job
        return compile_spec(spec, arch, stop=stop, raise_on_error=False).to_json()
    if kind == "plan":
        _, plan, arch, stop, source = job
        _prepare(source)
        return compile_plan(plan, arch, stop=stop, raise_on_error=False).to_json()
    raise ValueError(f"unknown compile job {kind!r}")


def _prepare(source: Any) -> None:
    """Make the plan's module importable in the child: a scratch module is written and loaded;
    an ``("import", root, module)`` source puts the package root on ``sys.path``."""
    if source is None:
        return
    if isinstance(source, tuple) and source and source[0] == "import":
        import sys

        _, root, _module = source
        if root not in sys.path:
            sys.path.insert(0, root)
        return
    source.load()  # a ScratchModule


def main(argv=None) -> None:
    """``python -I -m tilefit.smem.worker FD``: serve the requests that arrive on socket FD."""
    from multiprocessing.connection import Connection

    argv = sys.argv[1:] if argv is None else argv
    _serve(Connection(int(argv[0])))


if __name__ == "__main__":
    main()
