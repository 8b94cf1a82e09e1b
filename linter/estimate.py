"""Choosing an estimator: analytic, exact, or analytic re-checked exactly near a limit.

``--estimator analytic`` uses only the closed forms (instant; the pre-commit default when
Triton is absent). ``--estimator exact`` compiles every distinct kernel for the target arch.
``--estimator auto`` (default) uses the closed forms and, when Triton is installed, compiles
whatever lies within ``margin`` bytes of a limit, or has no calibrated form.

``engine_kernels`` (``--engine-kernels PATH|installed``): kernels the engine's source provides are
compiled from the engine's own ``@triton.jit`` function (:mod:`tilefit.smem.engine_kernels`)
instead of our reference kernel, in every mode but ``analytic``; the others as usual.

**The engine of record.** A spec that names an engine (``spec.engine``: the engine that loads
the table) is answered from the forms calibrated on that engine's own kernel
(:mod:`tilefit.smem.engine_model`), for the Triton release the spec names or the installed one.
A form proven exact on held-out compiles of the arch is final: ``auto`` never re-checks it, so
the common path compiles nothing. Where no proven form exists, ``auto`` compiles the engine's
kernel (its wheel in the cache, or the installed engine) -- deferred, so that a whole check's
compiles run in parallel over all cores with a progress bar (:meth:`Estimator.precompile`) --
and without the engine's source our reference kernel's figure is used and says so. Configs the
engine's kernel does not compile for an arch are facts (:meth:`Estimator.compile_failure`).
"""

from __future__ import annotations

from typing import Callable

from . import versions
from .smem.analytic import AnalyticModel, Estimate, ModelError, load_model
from .kernels.spec import KernelSpec
from .model import build_frozen

MODES = ("auto", "analytic", "exact")
DEFAULT_MARGIN = 4096


class EstimatorUnavailable(Exception):
    """No estimator can answer for this (spec, arch): the message says why."""


class CompileTimedOut(EstimatorUnavailable):
    """The compile ran out of time (``compile-timeout``): the figure is unknown, and ``auto``
    does not fall back to a closed form it had asked a compile to confirm (EST001 says so)."""


def _has_tma(arch: str) -> bool:
    """Whether host tensor descriptors lower to the TMA unit on ``arch`` (NVIDIA sm_90 and later)."""
    digits = "".join(c for c in arch[3:] if c.isdigit()) if arch.startswith("sm_") else ""
    return bool(digits) and int(digits) >= 90


class Estimator:
    def __init__(self, mode: str = "auto", model: AnalyticModel | None = None, margin: int = DEFAULT_MARGIN,
                 exact: Callable[[KernelSpec, str], int] | None = None, triton_version: str | None = None,
                 engine_kernels: str | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown estimator {mode!r}; choose from {', '.join(MODES)}")
        if engine_kernels and mode == "analytic":
            raise ValueError("--engine-kernels compiles the engine's kernels: use --estimator exact or auto")
        self.engine_kernels = engine_kernels
        self._engine = None
        self.mode = mode
        self.margin = margin
        self._model = model
        self._triton_version = triton_version
        self._exact = exact
        self._exact_tried = exact is not None
        self._exact_possible: bool | None = None  # what exact_available() says before the estimator is set up
        self._memo: dict[tuple, Estimate] = {}
        self._engine_model = None
        self._engine_sources: dict[tuple, object] = {}
        self._engine_source_keys: dict[tuple, tuple | None] = {}  # (kernel, engine, triton) -> a key of the above
        self._engine_failures: dict[tuple, str] = {}
        self._engine_final: dict[tuple, Estimate] = {}  # see _estimate_engine()
        self._engine_open: set[tuple] = set()  # (smem_id, arch) of the engine estimates in _memo
        # deferred compiles (auto): (kind, spec, arch) recorded instead of compiled; see precompile()
        self.defer = False
        self.deferred: dict[tuple, None] = {}
        self.compiles = 0  # points this estimator compiled (or asked the compile cache for)

    @property
    def model(self) -> AnalyticModel:
        if self._model is None:
            self._model = load_model(self._triton_version)
        return self._model

    def _exact_fn(self) -> Callable[[KernelSpec, str], int] | None:
        if not self._exact_tried:
            self._exact_tried = True
            if versions.installed_triton() is not None:
                try:
                    from .smem.exact import default_estimator
                except ImportError:
                    self._exact = None
                else:
                    est = default_estimator()
                    self._exact = est.shared_bytes
        return self._exact

    def exact_available(self) -> bool:
        """Whether compiles can run (Triton installed). Asked at the start of every check: the
        exact estimator (:mod:`tilefit.smem.exact` and the compile cache) is set up only when a
        compile is really asked for (:meth:`_exact_fn`), so a run that compiles nothing never
        imports it."""
        if self._exact_tried:
            return self._exact is not None
        if self._exact_possible is None:
            from importlib.util import find_spec

            self._exact_possible = (versions.installed_triton() is not None
                                    and find_spec(f"{__package__}.smem.exact") is not None)
        return self._exact_possible

    def estimate(self, spec: KernelSpec, arch: str, limit: int | None = None) -> Estimate:
        if spec.engine and not self.engine_kernels:
            # the engine model's final answers are kept once per (KernelSpec.smem_key, arch), for
            # every limit (see _estimate_engine); only the others in the memo below
            fkey = (spec.smem_id, arch)
            hit = self._engine_final.get(fkey)
            if hit is not None:
                return hit
            key = None
            if fkey in self._engine_open:  # answered before, not finally: per limit and group
                key = (spec, arch, limit if self.mode == "auto" else None)
                hit = self._memo.get(key)
                if hit is not None:
                    return hit
            result = self._estimate_engine(spec, arch, limit, fkey)
            if self._engine_final.get(fkey) is not result:
                self._memo[key or (spec, arch, limit if self.mode == "auto" else None)] = result
                self._engine_open.add(fkey)
            return result
        key = (spec, arch, limit if self.mode == "auto" else None)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        result = self._estimate(spec, arch, limit)
        self._memo[key] = result
        return result

    def variants_fit(self, variants, arch: str, limit: int) -> bool:
        """Whether every variant's estimate on ``arch`` is usable and certainly fits ``limit``, and
        none is a known compile failure (:func:`tilefit.engine.variants_fit`, the lint engine's
        screen): asks :meth:`estimate` and :meth:`compile_failure` per variant, in that order, as
        the rules the screen stands for ask them."""
        for v in variants:
            spec = v.spec
            try:
                est = self.estimate(spec, arch, limit)
            except EstimatorUnavailable:
                return False
            if not est.surely_fits(limit) or self.compile_failure(spec, arch):
                return False
        return True

    def analytic_twin(self) -> "Estimator":
        """An ``analytic`` estimator on this one's closed forms, for the installed Triton release
        (the fix planner's search estimator: it never compiles), sharing this one's engine model
        where that reads the same release: the engine model's answers depend on the release
        alone, not on the estimator's mode or on what it compiled (those are the estimator's own
        records), so the check's answers serve the search, and the search's the rule checks of
        its candidates."""
        twin = Estimator("analytic", model=self.model)
        if (self._triton_version or versions.installed_triton()) == versions.installed_triton():
            twin._engine_model = self.engine_model
        return twin

    @property
    def engine_model(self):
        if self._engine_model is None:
            from .smem.engine_model import EngineModel

            self._engine_model = EngineModel(self._triton_version or versions.installed_triton())
        return self._engine_model

    def compile_failure(self, spec: KernelSpec, arch: str) -> str | None:
        """The compiler's words when the engine's kernel is known not to compile ``spec`` on ``arch``
        (from the engine calibration, or from a compile of this run); None otherwise."""
        if not spec.engine:
            return None
        if self._engine_failures:  # this run's compiles found some (most runs compile nothing)
            hit = self._engine_failures.get((spec, arch))
            if hit is not None:
                return hit
        return (self._engine_model or self.engine_model).compile_failure(spec, arch)

    def group_free(self, spec: KernelSpec, arch: str) -> bool:
        """Whether what this estimator said of ``spec`` on ``arch`` (its estimate, asked before,
        and its compile failure) holds for every spec of its :attr:`KernelSpec.smem_key`: the
        engine model's final answer, with no compile of this run to consult. The lint engine then
        shares a verdict between entries that differ only in the launch-order group."""
        return not self.engine_kernels and not self._engine_failures and (spec.smem_id, arch) in self._engine_final

    def _estimate(self, spec: KernelSpec, arch: str, limit: int | None) -> Estimate:
        if self.engine_kernels and self._engine_has(spec.kernel):
            return self._compile_engine(spec, arch)
        if spec.engine:
            return self._estimate_engine(spec, arch, limit, (spec.smem_id, arch))
        if self.mode == "exact":
            return self._compile(spec, arch)
        try:
            analytic = self.model.estimate(spec, arch)
        except ModelError as exc:
            if self.mode == "auto" and self.exact_available():
                return self._compile(spec, arch)
            raise EstimatorUnavailable(str(exc)) from None
        if self.mode == "analytic":
            return analytic
        needs_check = analytic.status == "uncalibrated" or (
            limit is not None and abs(analytic.shared_bytes - limit) <= self.margin)
        if needs_check and self.exact_available():
            try:
                return self._compile(spec, arch)
            except CompileTimedOut:
                raise
            except EstimatorUnavailable:
                return analytic
        return analytic

    # -- the engines' kernels ----------------------------------------------------------------------
    def _estimate_engine(self, spec: KernelSpec, arch: str, limit: int | None, fkey: tuple) -> Estimate:
        # an answer that is final (the calibration's compile, or a form no compile re-checks or can
        # re-check) is one Estimate per (KernelSpec.smem_key, arch): it depends on neither the limit
        # nor the group (``fkey``: keyed by its number, KernelSpec.smem_id). Whether an answer is
        # final is known when it is first found, and stays so
        est = self._engine_final.get(fkey)
        if est is not None:
            return est
        answer = (self._engine_model or self.engine_model).answer(spec, arch)
        if answer is not None:
            if answer.compiled:  # the engine's kernel's compiled figure (stored by the calibration)
                est = self._engine_final[fkey] = build_frozen(Estimate, {
                    "shared_bytes": answer.shared_bytes, "estimator": "exact", "arch": arch, "status": "exact",
                    "detail": answer.detail, "max_error": None})
                return est
            est = build_frozen(Estimate, {"shared_bytes": answer.shared_bytes, "estimator": "analytic", "arch": arch,
                                          "status": "calibrated" if answer.proven else "uncalibrated",
                                          "detail": answer.detail, "max_error": answer.max_error})
            if not answer.proven and answer.max_error is None:
                est = None  # a form with no held-out compile on this arch: no error bound, no answer
            elif self.mode == "analytic" or (answer.proven and self.mode != "exact"):
                self._engine_final[fkey] = est
                return est
        if self.mode == "exact":  # a compile, always: the engine's kernel where its source is at hand
            source = self._engine_source(spec) if self.exact_available() else None
            if source is not None:
                return self._compile_engine_kernel(source, spec, arch)
            return self._reference(spec, arch, limit, "--estimator exact without the engine's source: our "
                                                      "reference kernel compiled")
        if self.mode != "analytic" and self.exact_available():
            source = self._engine_source(spec)
            if source is not None:
                if self.defer:
                    self.deferred[("engine", spec, arch)] = None
                    if est is not None:
                        return est
                    return self._reference(spec, arch, limit, "compile pending")
                return self._compile_engine_kernel(source, spec, arch)
        if est is not None:  # no source to compile (per kernel, engine and release): the form's answer is final
            self._engine_final[fkey] = est
            return est
        return self._reference(spec, arch, limit, "no calibrated form of the engine's kernel, and its source "
                                                  "is not at hand to compile")

    def _reference(self, spec: KernelSpec, arch: str, limit: int | None, why: str) -> Estimate:
        try:
            if "tma" in dict(spec.extra) and not _has_tma(arch) and not self._covers(spec.reference, arch):
                # no TMA unit and no TMA form of our kernel here: a compile of our kernel's emulated
                # descriptors would not be the engine's figure either, so the plain form answers at
                # once (below) instead of a deferred compile
                raise EstimatorUnavailable("no TMA form on this arch")
            ref = self.estimate(spec.reference, arch, limit)
        except EstimatorUnavailable:
            extra = dict(spec.extra)
            if "tma" not in extra:
                raise
            # SGLang's TMA launch on an arch no TMA form covers: our reference kernel's plain form,
            # as before TMA launches were told apart (the descriptors' barriers add tens of bytes)
            extra.pop("tma")
            plain = spec.reference.evolve(extra=tuple(sorted(extra.items())))
            ref = None
            if not _has_tma(arch):
                # the plain form, never a compile (not even near a limit): our plain kernel's compile
                # is no more the engine's figure than its proven form is (without a TMA unit SGLang's
                # kernel lowers the descriptors to pointer loads, a kernel no form covers yet)
                try:
                    ref = self.model.estimate(plain, arch)
                except ModelError:
                    ref = None
            if ref is None:
                ref = self.estimate(plain, arch, limit)
            why += "; without the TMA descriptors' barriers, which no form covers on this arch"
        return Estimate(ref.shared_bytes, ref.estimator, ref.arch, ref.status,
                        f"our reference kernel's figure ({why})",
                        ref.max_error)

    def _covers(self, spec: KernelSpec, arch: str) -> bool:
        try:
            return self.model.covers(spec, arch)
        except ModelError:
            return False

    def _engine_source(self, spec: KernelSpec):
        """An :class:`~tilefit.smem.engine_kernels.EngineKernels` for the spec's engine: its wheel
        in the cache (as ``calibrate smem --engine`` fetched it) or the installed engine; None.
        Only when the spec's Triton release is the installed one (a compile answers for that)."""
        vkey = (spec.kernel, spec.engine, spec.triton)
        if vkey in self._engine_source_keys:
            key = self._engine_source_keys[vkey]
            return None if key is None else self._engine_sources[key]
        installed = versions.installed_triton()
        if spec.triton and installed and versions.major_minor(installed) != versions.major_minor(spec.triton):
            self._engine_source_keys[vkey] = None
            return None
        from .smem.engine_model import pick_engine_version

        version = pick_engine_version(spec.kernel, spec.engine, None)
        key = self._engine_source_keys[vkey] = (spec.engine, version)
        if key not in self._engine_sources:
            from .smem.engine_source import local_source

            found = local_source(spec.engine, version)
            if found:  # the compiler's side (launch plans, the source's reader) imported only then
                from .smem.engine_kernels import EngineKernels

                self._engine_sources[key] = EngineKernels(found, engine=spec.engine)
            else:
                self._engine_sources[key] = None
        return self._engine_sources[key]

    def _compile_engine_kernel(self, ek, spec: KernelSpec, arch: str) -> Estimate:
        self.compiles += 1
        result = ek.compile(spec, arch)
        return self._engine_estimate(result, spec, arch, ek)

    def _engine_estimate(self, result, spec: KernelSpec, arch: str, ek) -> Estimate:
        if result.error is not None:
            if result.failed_to_compile:
                self._engine_failures[(spec, arch)] = result.error
            raise EstimatorUnavailable(f"the engine's {result.function or spec.kernel} could not be compiled for "
                                       f"{arch}: {result.error}")
        return Estimate(int(result.shared_bytes), "exact", arch, "exact",
                        f"{spec.engine} {ek.tree.version or ''} {result.function} compiled".replace("  ", " "))

    # -- deferred compiles --------------------------------------------------------------------------
    def precompile(self, jobs: int | None = None, progress=None) -> int:
        """Compile everything the deferred estimates asked for, in parallel over ``jobs`` processes
        (default: all cores), then forget the deferred answers so the next estimates use the
        compiles. ``progress(done, total)``. Returns the number of points."""
        items = list(self.deferred)
        self.deferred = {}
        self.defer = False
        if not items:
            return 0
        total = len(items)
        self.compiles += total
        done = [0]

        def tick(_d=None, _t=None):
            done[0] += 1
            if progress:
                progress(done[0], total)

        ref = [(spec, arch) for kind, spec, arch in items if kind == "reference"]
        eng: dict[int, tuple] = {}
        for kind, spec, arch in items:
            if kind == "engine":
                ek = self._engine_source(spec)
                if ek is not None:
                    eng.setdefault(id(ek), (ek, []))[1].append((spec, arch))
        if ref:
            from .kernels import launch_plan
            from .smem.exact import default_estimator

            def expressible(item) -> bool:
                try:
                    launch_plan(item[0])
                except ValueError:  # a spec our kernels cannot run: its estimate says so, later
                    tick()
                    return False
                return True

            ref = [item for item in ref if expressible(item)]

            default_estimator().many(ref, jobs=jobs, progress=lambda d, t: tick())
        for ek, pairs in eng.values():
            ek.many(pairs, jobs=jobs, progress=lambda d, t: tick())
        self._memo.clear()
        self._engine_open.clear()
        return total

    def _compile(self, spec: KernelSpec, arch: str) -> Estimate:
        if self.defer and self.mode == "auto":
            self.deferred[("reference", spec, arch)] = None
            raise EstimatorUnavailable("compile pending")
        fn = self._exact_fn()
        if fn is None:
            raise EstimatorUnavailable("the exact estimator needs Triton: pip install 'tilefit[triton]'")
        self.compiles += 1
        try:
            shared = fn(spec, arch)
        except Exception as exc:  # a compile error is an answer about this kernel, not a crash
            if getattr(exc, "stage", None) == "timeout":
                raise CompileTimedOut(f"{getattr(exc, 'message', exc)}: {spec.kernel} for {arch} was not "
                                      "checked") from None
            raise EstimatorUnavailable(f"Triton could not compile {spec.kernel} for {arch}: {exc}") from None
        return Estimate(int(shared), "exact", arch, "exact")

    def _engine_has(self, kernel: str) -> bool:
        if self._engine is None:
            from .smem.engine_kernels import EngineKernels

            self._engine = EngineKernels(self.engine_kernels)
        try:
            return self._engine.locate(kernel) is not None
        except Exception as exc:  # noqa: BLE001 - e.g. no such folder: every estimate says so
            raise EstimatorUnavailable(str(exc)) from None

    def _compile_engine(self, spec: KernelSpec, arch: str) -> Estimate:
        if versions.installed_triton() is None:
            raise EstimatorUnavailable("--engine-kernels needs Triton: pip install 'tilefit[triton]'")
        result = self._engine.compile(spec, arch)
        if result.error is not None and "(compile-timeout)" in result.error:
            raise CompileTimedOut(f"{result.error}: the engine's {result.function or spec.kernel} for {arch} was "
                                  "not checked")
        if result.error is not None:
            raise EstimatorUnavailable(f"the engine's {result.function or spec.kernel} could not be compiled for "
                                       f"{arch}: {result.error}")
        return Estimate(int(result.shared_bytes), "exact", arch, "exact",
                        f"engine kernel {result.function} ({result.source})")
