"""Choosing an estimator: analytic, exact, or analytic re-checked exactly near a limit.

``--estimator analytic`` uses only the closed forms (instant; the pre-commit default when
Triton is absent). ``--estimator exact`` compiles every distinct kernel for the target arch.
``--estimator auto`` (default) uses the closed forms and, when Triton is installed, compiles
whatever lies within ``margin`` bytes of a limit, or has no calibrated form.

``engine_kernels`` (``--engine-kernels PATH|installed``): kernels the engine's source provides are
compiled from the engine's own ``@triton.jit`` function (:mod:`tilefit.smem.engine_kernels`)
instead of our reference kernel, in every mode but ``analytic``; the others as usual.
"""

from __future__ import annotations

from typing import Callable

from . import versions
from .smem.analytic import AnalyticModel, Estimate, ModelError, load_model
from .kernels.spec import KernelSpec

MODES = ("auto", "analytic", "exact")
DEFAULT_MARGIN = 4096


class EstimatorUnavailable(Exception):
    """No estimator can answer for this (spec, arch): the message says why."""


class CompileTimedOut(EstimatorUnavailable):
    """The compile ran out of time (``compile-timeout``): the figure is unknown, and ``auto``
    does not fall back to a closed form it had asked a compile to confirm (EST001 says so)."""


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
        self._memo: dict[tuple, Estimate] = {}

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
        return self._exact_fn() is not None

    def estimate(self, spec: KernelSpec, arch: str, limit: int | None = None) -> Estimate:
        key = (spec, arch, limit if self.mode == "auto" else None)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        result = self._estimate(spec, arch, limit)
        self._memo[key] = result
        return result

    def _estimate(self, spec: KernelSpec, arch: str, limit: int | None) -> Estimate:
        if self.engine_kernels and self._engine_has(spec.kernel):
            return self._compile_engine(spec, arch)
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

    def _compile(self, spec: KernelSpec, arch: str) -> Estimate:
        fn = self._exact_fn()
        if fn is None:
            raise EstimatorUnavailable("the exact estimator needs Triton: pip install 'tilefit[triton]'")
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
