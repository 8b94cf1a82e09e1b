"""Exact shared-memory figures: compile our reference kernel ahead of time and read the allocator.

``exact_shared_bytes(spec, arch)`` compiles the reference kernel of ``spec`` (``tilefit.kernels``)
for ``arch`` with ``GPUTarget``, no GPU needed, and returns the bytes of shared memory per block
Triton allocates (``metadata["shared"]``, the figure the launch compares with the device limit).

How it stays exact and fast:

* **Launch specialisation.** The launch plan (``tilefit.kernels.plan``, built by the family) describes every argument
  as the engine's launcher passes it; the values go through Triton's *own* launch specialiser
  (``native_specialize_impl``, the function ``JITFunction.run`` uses), so pointers get 16-byte
  alignment, ints equal to 1 become constants, ints divisible by 16 get the divisibility hint,
  ``None`` becomes a constant -- by the rules of the installed Triton. Without this,
  ``num_stages`` has no effect (the pipeliner needs the alignment facts).
* **No Triton cache, early stop.** We run the backend's stages ourselves (the same calls
  ``triton.compile`` makes, minus its on-disk cache) and stop once the figure is known.
  ``stop="alloc"`` (default) runs the ``llir`` stage's pass pipeline only up to the shared-memory
  allocation pass and reads ``ttg.shared`` there: the recorded pass list is the installed
  backend's own (its ``make_llir`` is run against recording stand-ins of the pass registries), so
  no pass list is hard-coded here. ``stop="llir"`` runs the whole ``llir`` stage (the LLVM lowering
  and LLVM O3 too; catches failures there), ``stop="full"`` every stage including ``ptxas``.
  If the recording does not find the allocation pass (a future backend), ``alloc`` falls back to
  ``llir`` and says so in the result's ``stage``.
* **Typed failures.** A compile that fails (Triton cannot lower some tiles, fp8 on sm_80, ...)
  raises :class:`CompileFailed` carrying the compiler's message and the stage; compile results
  can also be returned as data (:func:`compile_spec` with ``raise_on_error=False``).

Supported archs: ``sm_XY`` / ``sm_XYa`` / ``sm_XYf`` (CUDA, compute capability XY) and AMD
``gfxNNN`` (HIP; wave64 on gfx9, wave32 on gfx10+), all compiled without a device.

Works with Triton 3.4 to 3.9 (tested: 3.4.0, 3.5.1, 3.6.0, 3.7.1, 3.8.0, 3.9.0; 3.4's
``ASTSource.make_ir`` takes no target; the same figures in 3.5-3.9 for our kernels, and equal to ``JITFunction.warmup(...).metadata.shared`` on an H200
with Triton 3.6). The Triton APIs used: ``ASTSource``, ``make_backend``, ``backend.parse_options /
add_stages / load_dialects / get_codegen_implementation / get_module_map / parse_attr``,
``ir.context / load_dialects``, ``native_specialize_impl`` (3.6+) or
``runtime.jit.create_specialize_impl`` (3.5), and the backends' ``make_llir``. Older Triton is
refused with :class:`TritonUnavailable`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import sys
import tempfile
import threading
import time
import types
import warnings
from dataclasses import asdict, dataclass
from typing import Any

from .. import versions
from ..kernels import launch_plan, registry
from ..kernels.plan import Arg, LaunchPlan, adapt_to_arch
from ..kernels.spec import KernelSpec

STOP_MODES = ("alloc", "llir", "full")


class ExactError(Exception):
    """Base class of the exact estimator's errors."""


class TritonUnavailable(ExactError):
    """Triton is not installed (``pip install tilefit[triton]``)."""


class UnsupportedArch(ExactError):
    """The arch string is not one Triton can target."""


class CompileFailed(ExactError):
    """Triton failed to compile the kernel; ``message`` holds the compiler's words."""

    def __init__(self, spec: KernelSpec | None, arch: str, stage: str, message: str):
        self.spec = spec
        self.arch = arch
        self.stage = stage
        self.message = message
        what = spec.key() if spec is not None else "kernel"
        super().__init__(f"{what} on {arch}: compile failed in {stage}: {message}")


@dataclass(frozen=True)
class ExactResult:
    """The outcome of one compile (or one failed compile), JSON-serialisable.

    ``shared_bytes`` is ``None`` when the compile failed; ``error`` then holds the compiler's
    message and ``error_stage`` the stage (``ttir``, ``ttgir``, ``llir``, ...). ``stage`` is where
    the pipeline stopped (``alloc``, ``llir`` or ``cubin``/``hsaco``). ``threads`` is
    ``num_warps * 32`` (``* 64`` on wave64 AMD) after warp specialisation, when known.
    """

    arch: str
    shared_bytes: int | None
    num_warps: int
    threads: int
    stage: str
    seconds: float
    triton_version: str
    error: str | None = None
    error_stage: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "ExactResult":
        fields = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in fields})

    @classmethod
    def from_record(cls, data) -> "ExactResult | None":
        """A result read back from a cache file, or None when any field has the wrong type or
        the record contradicts itself (no error and no byte count): never trusted unchecked."""
        if type(data) is not dict:
            return None
        try:
            result = cls.from_json(data)
        except TypeError:  # a field missing
            return None
        ints = (result.num_warps, result.threads)
        if (not all(type(v) is int and v > 0 for v in ints) or type(result.arch) is not str
                or type(result.stage) is not str or type(result.triton_version) is not str
                or type(result.seconds) not in (int, float)
                or result.error is not None and type(result.error) is not str
                or result.error_stage is not None and type(result.error_stage) is not str):
            return None
        if result.error is None:
            if type(result.shared_bytes) is not int or result.shared_bytes < 0:
                return None
        elif result.shared_bytes is not None or result.error_stage in ("timeout", "crash"):
            return None  # a timeout or a crash says nothing about the kernel: never cached
        return result


# ------------------------------------------------------------------------------------------------
# archs


_SM = re.compile(r"^(?:sm_?|cc)?(\d+)([af]?)$")
_GFX = re.compile(r"^gfx[0-9a-f]+$")


def parse_arch(arch: str) -> tuple[str, object, int]:
    """``"sm_89"`` -> ``("cuda", 89, 32)``; ``"gfx942"`` -> ``("hip", "gfx942", 64)``."""
    a = arch.strip().lower()
    if _GFX.match(a):
        # CDNA (gfx9xx) runs wave64; RDNA (gfx10xx+) wave32, Triton's default there.
        warp = 64 if a.startswith("gfx9") else 32
        return "hip", a, warp
    m = _SM.match(a)
    if m:
        cc = int(m.group(1))
        if cc < 70:
            raise UnsupportedArch(f"{arch}: Triton targets compute capability 7.0 and newer")
        return "cuda", cc, 32
    raise UnsupportedArch(f"unknown arch {arch!r} (expected sm_XY or gfxNNN)")


# ------------------------------------------------------------------------------------------------
# Triton access (lazy)


MIN_TRITON = (3, 4)


def _triton():
    try:
        import triton  # noqa: F401
    except ImportError as exc:  # pragma: no cover - exercised where triton is absent
        raise TritonUnavailable("the exact estimator needs triton (pip install 'tilefit[triton]')") from exc
    if versions.release(triton.__version__, 2) < MIN_TRITON:
        raise TritonUnavailable(f"the exact estimator needs Triton >= 3.4 (found {triton.__version__})")
    return triton


_kernel_lock = threading.Lock()
_kernels: dict[tuple[str, str], Any] = {}


def load_kernel(module: str, function: str):
    """The ``JITFunction`` of a reference kernel (re-wrapped if the module was imported under
    ``TRITON_INTERPRET=1``, whose ``InterpretedFunction`` cannot be compiled)."""
    key = (module, function)
    with _kernel_lock:
        fn = _kernels.get(key)
        if fn is None:
            triton = _triton()
            if module.startswith(registry.EXTERNAL_PACKAGE + "."):
                registry.families()  # a $TILEFIT_KERNEL_PATH family: its package is made importable
            fn = getattr(importlib.import_module(module), function)
            for _ in range(8):  # @triton.autotune / @triton.heuristics wrap the JITFunction
                if isinstance(fn, triton.runtime.JITFunction) or not hasattr(fn, "fn"):
                    break
                fn = fn.fn
            if not isinstance(fn, triton.runtime.JITFunction):
                from triton.runtime.jit import JITFunction

                fn = JITFunction(getattr(fn, "fn", fn))
            _kernels[key] = fn
    return fn


class _Pointer:
    """What Triton's launch specialiser sees of a tensor: a dtype and a 16-byte aligned address."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype

    @staticmethod
    def data_ptr() -> int:
        return 0

    @staticmethod
    def ptr_range() -> int:  # AMD buffer ops: the tensor fits a 32-bit offset
        return 0


def _tl_dtype(name: str):
    import triton.language as tl

    from ..dtypes import TL_NAMES, triton_type

    name = triton_type(name)
    for attr, ty in TL_NAMES.items():
        if ty == name:
            return getattr(tl, attr)
    raise ValueError(f"unknown Triton element type {name!r}")


class _TorchDtype:
    """What ``TensorDescriptor`` and Triton's specialiser read of a torch dtype: its name
    (``torch.float8_e4m3fn``), size and kind."""

    __slots__ = ("name", "itemsize", "is_floating_point")

    def __init__(self, element_type: str):
        from ..dtypes import TORCH_NAMES, element_bytes

        self.name = TORCH_NAMES[element_type]
        self.itemsize = element_bytes(element_type, 1)
        self.is_floating_point = element_type.startswith(("fp", "bf"))

    def __str__(self) -> str:
        return f"torch.{self.name}"


# One stand-in dtype per element type for the life of the process. Triton's native launch
# specialiser caches "dtype object -> type string" by the object's hash (identity, for these) or
# address: a fresh stand-in per descriptor could be freed and a later one of another element type
# allocated at the same address, and be read with the first one's type -- a compile of a bf16
# descriptor's figure for an fp8 one, or a spurious failure (seen in long-lived compile workers).
_TORCH_DTYPES: dict[str, _TorchDtype] = {}


def _torch_dtype(element_type: str) -> _TorchDtype:
    found = _TORCH_DTYPES.get(element_type)
    if found is None:
        found = _TORCH_DTYPES[element_type] = _TorchDtype(element_type)
    return found


class _Tensor:
    """A tensor as a ``TensorDescriptor`` base: a torch-like dtype and a 16-byte aligned address."""

    __slots__ = ("dtype",)

    def __init__(self, element_type: str):
        self.dtype = _torch_dtype(element_type)

    @staticmethod
    def data_ptr() -> int:
        return 0


def _descriptor(desc):
    """A real ``TensorDescriptor`` of a stand-in tensor (SGLang's TMA path passes host descriptors;
    Triton specialises the kernel on their element type and block shape)."""
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError as exc:  # pragma: no cover - Triton < 3.4
        raise ValueError(f"this Triton has no host tensor descriptors: {exc}") from None
    return TensorDescriptor(_Tensor(desc.dtype), list(desc.shape), list(desc.strides), list(desc.block_shape))


def _arg_value(arg: Arg):
    if arg.kind == "tensordesc":
        return _descriptor(arg.value)
    if arg.kind == "ptr":
        return _Pointer(_tl_dtype(str(arg.value)))
    if arg.kind == "dtype":
        return _tl_dtype(str(arg.value))
    if arg.kind == "none":
        return None
    if arg.kind == "float":
        return float(arg.value)
    if arg.kind == "bool":
        return bool(arg.value)
    if arg.kind == "int":
        return int(arg.value)
    return arg.value  # constexpr


def _specialize_fn():
    """Triton's launch specialiser as ``f(backend, value, is_const, specialize, align)``.

    3.6+ has the C++ ``native_specialize_impl(backend, ...)``; 3.5 and older build a Python one
    from ``backend.get_arg_specialization``.
    """
    try:
        from triton._C.libtriton import native_specialize_impl

        return native_specialize_impl
    except ImportError:
        from triton.runtime.jit import create_specialize_impl

        made: dict[int, Any] = {}

        def specialize(backend, value, is_const, specialize_value, align):
            impl = made.get(id(backend))
            if impl is None:
                impl = made[id(backend)] = create_specialize_impl(backend.get_arg_specialization)
            return impl(value, is_const, specialize_value, align)

        return specialize


@contextlib.contextmanager
def _torch_stand_in():
    """Triton 3.6's AMD backend imports torch to size a tensor (``HIPBackend.is_within_2gb``) even
    when the argument answers ``ptr_range()`` itself, as our stand-in pointers do. Where torch is
    not installed, a module with an empty ``Tensor`` class stands in for the call."""
    if "torch" in sys.modules or importlib.util.find_spec("torch") is not None:
        yield
        return
    stub = types.ModuleType("torch")
    stub.Tensor = type("Tensor", (), {})
    sys.modules["torch"] = stub
    try:
        yield
    finally:
        if sys.modules.get("torch") is stub:
            del sys.modules["torch"]


def specialise(fn, plan: LaunchPlan, backend) -> tuple[dict, dict, dict]:
    """``(signature, constexprs, attrs)`` of ``plan`` as ``JITFunction.run`` would build them."""
    if getattr(getattr(backend, "target", None), "backend", None) == "hip":
        with _torch_stand_in():
            return _specialise(fn, plan, backend)
    return _specialise(fn, plan, backend)


def _specialise(fn, plan: LaunchPlan, backend) -> tuple[dict, dict, dict]:
    specialize_impl = _specialize_fn()
    given = plan.arg_dict()
    names = [p.name for p in fn.params]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ValueError(f"{plan.function}: launch plan has arguments the kernel lacks: {unknown}")
    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], Any] = {}
    for i, p in enumerate(fn.params):
        if p.name in given:
            value = _arg_value(given[p.name])
        elif p.has_default:
            value = p.default
        else:
            raise ValueError(f"{plan.function}: launch plan lacks argument {p.name!r}")
        if p.is_constexpr:
            signature[p.name] = "constexpr"
            constexprs[(i,)] = value
            continue
        ty, desc = specialize_impl(backend, value, p.is_const, not p.do_not_specialize,
                                   not p.do_not_specialize_on_alignment)
        ann = getattr(p, "annotation_type", "")
        if ann:  # an annotated parameter keeps its declared type (JITFunction does the same)
            if ann == "u1" or ann[:2] in ("fp", "bf") or p.do_not_specialize:
                desc = None
            ty = ann
        signature[p.name] = ty
        if ty == "constexpr":
            constexprs[(i,)] = value
        elif isinstance(desc, str) and desc:
            parsed = backend.parse_attr(desc)
            if parsed:
                attrs[(i,)] = parsed
    return signature, constexprs, attrs


# ------------------------------------------------------------------------------------------------
# stopping the pipeline at the shared-memory allocation


class _Allocated(Exception):
    def __init__(self, shared: int | None, total_warps: int | None):
        self.shared = shared
        self.total_warps = total_warps


class _NoAllocationPass(Exception):
    pass


class _RecordingPassManager:
    """Stands in for ``ir.pass_manager``: records the passes added, and on ``run`` replays them
    up to and including the shared-memory allocation pass onto a real pass manager."""

    def __init__(self, real_ir, context):
        self._ir = real_ir
        self._context = context
        self.calls: list[tuple[Any, tuple, dict]] = []
        self.allocated = False

    def record(self, fn, args, kwargs) -> None:
        if self.allocated:
            return
        self.calls.append((fn, args, kwargs))
        if "allocate_shared_memory" in getattr(fn, "__name__", ""):
            self.allocated = True

    def enable_debug(self) -> None:
        pass

    def run(self, mod, *args, **kwargs):
        if not self.allocated:
            raise _NoAllocationPass()
        pm = self._ir.pass_manager(self._context)
        for fn, fargs, fkwargs in self.calls:
            fn(pm, *fargs, **fkwargs)
        pm.run(mod, *args, **kwargs)
        raise _Allocated(mod.get_int_attr("ttg.shared"), mod.get_int_attr("ttg.total-num-warps"))


class _IrProxy:
    def __init__(self, real):
        self._real = real

    def pass_manager(self, context):
        return _RecordingPassManager(self._real, context)

    def __getattr__(self, name):
        return getattr(self._real, name)


class _PassRegistryProxy:
    """Wraps ``passes`` / ``nvidia`` / ``amd``: ``add_*`` calls on a recording pass manager are
    recorded, everything else passes through."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        real = getattr(self._real, name)
        if isinstance(real, types.ModuleType) or type(real).__name__ == "module":
            return _PassRegistryProxy(real)
        if callable(real) and not isinstance(real, type):
            def call(*args, __real=real, **kwargs):
                if args and isinstance(args[0], _RecordingPassManager):
                    args[0].record(__real, args[1:], kwargs)
                    return None
                return __real(*args, **kwargs)

            call.__name__ = getattr(real, "__name__", name)
            return call
        return real


def _install_alloc_stop(backend) -> bool:
    """Make ``backend``'s ``make_llir`` stop after shared-memory allocation (instance-local, no
    global state is touched). Returns False if the backend does not look as expected."""
    cls = type(backend)
    raw = None
    for klass in cls.__mro__:
        if "make_llir" in klass.__dict__:
            raw = klass.__dict__["make_llir"]
            break
    if raw is None:
        return False
    is_static = isinstance(raw, staticmethod)
    func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
    if not isinstance(func, types.FunctionType):
        return False
    g = dict(func.__globals__)
    if "ir" not in g:
        return False
    g["ir"] = _IrProxy(g["ir"])
    for name in ("passes", "nvidia", "amd"):
        if name in g:
            g[name] = _PassRegistryProxy(g[name])
    clone = types.FunctionType(func.__code__, g, func.__name__, func.__defaults__, func.__closure__)
    clone.__kwdefaults__ = func.__kwdefaults__
    if is_static:
        backend.make_llir = clone
    else:
        backend.make_llir = types.MethodType(clone, backend)
    return True


# ------------------------------------------------------------------------------------------------
# capturing the compiler's diagnostics (MLIR prints them on fd 2, not into the exception)


_fd_lock = threading.Lock()


@contextlib.contextmanager
def _capture_stderr():
    """Collect what C++ code writes to fd 2 (MLIR diagnostics) into ``box[0]``."""
    box = [""]
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, ValueError, OSError):  # pytest capture, notebooks
        fd = 2
    with _fd_lock:
        try:
            sys.stderr.flush()
        except Exception:  # pragma: no cover
            pass
        saved = os.dup(fd)
        with tempfile.TemporaryFile(mode="w+b") as tmp:
            os.dup2(tmp.fileno(), fd)
            try:
                yield box
            finally:
                try:
                    sys.stderr.flush()
                except Exception:  # pragma: no cover
                    pass
                os.dup2(saved, fd)
                os.close(saved)
                tmp.seek(0)
                box[0] = tmp.read().decode("utf-8", "replace")


def _message(exc: BaseException, diagnostics: str) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    cause = exc.__cause__
    while cause is not None and cause.__cause__ is not None and isinstance(cause, type(exc)):
        cause = cause.__cause__  # a jit helper's error: Triton chains one CompilationError per call level
    if cause is not None and str(cause).strip() and \
            not [ln for ln in str(cause).strip().splitlines() if ln.strip()][-1].strip().startswith("^"):
        # a CompilationError shows the source and a caret; the reason is its cause (Triton 3.4's
        # gdc_wait: "gdc_wait() got an unexpected keyword argument '_semantic'", a TypeError, put
        # after the words: it is the compiler's failure, not a Python error of our own calls)
        text += f"\nbecause: {str(cause).strip().splitlines()[-1]} [{type(cause).__name__}]"
    diag = "\n".join(line for line in diagnostics.splitlines() if line.strip())
    if diag:
        # keep the compiler's own words first; they say what failed (e.g. "error: ...")
        lines = [line for line in diag.splitlines() if "error" in line.lower()] or diag.splitlines()
        text = "\n".join(lines[-20:]) + "\n" + text
    return text[-4000:]


# ------------------------------------------------------------------------------------------------
# compile


def _compile_plan(plan: LaunchPlan, arch: str, stop: str) -> tuple[int | None, int, str]:
    """Run the pipeline. Returns ``(shared, num_warps, stage)``; raises ``_StageError``."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    backend_name, arch_value, warp_size = parse_arch(arch)
    target = GPUTarget(backend_name, arch_value, warp_size)
    backend = make_backend(target)
    fn = load_kernel(plan.module, plan.function)
    plan = adapt_to_arch(plan, arch)
    signature, constexprs, attrs = specialise(fn, plan, backend)
    src = ASTSource(fn, signature, constexprs, attrs)
    opts = {"num_warps": plan.num_warps, "num_stages": plan.num_stages, **dict(plan.options)}
    try:
        options = backend.parse_options(dict(opts, **src.parse_options()))
    except Exception as exc:  # noqa: BLE001 - e.g. num_warps not a power of two
        raise _StageError("options", exc) from exc
    if stop == "alloc":
        _install_alloc_stop(backend)
    stages: dict[str, Any] = {}
    backend.add_stages(stages, options, src.language)
    metadata: dict[str, Any] = {"target": target, **options.__dict__}
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    stage = "ast"
    try:
        codegen = backend.get_codegen_implementation(options)
        if _make_ir_takes_target(src):
            module = src.make_ir(target, options, codegen, backend.get_module_map(), context)
        else:  # Triton 3.4: make_ir(options, codegen_fns, module_map, context)
            module = src.make_ir(options, codegen, backend.get_module_map(), context)
        names = list(stages)
        first = names.index(src.ext)
        for ext in names[first:]:
            stage = ext
            try:
                module = stages[ext](module, metadata)
            except _Allocated as done:
                warps = done.total_warps or plan.num_warps
                return done.shared or 0, warps, "alloc"
            except _NoAllocationPass:
                # the backend's llir stage did not look as expected: run it for real
                fresh = make_backend(target)
                fresh_stages: dict[str, Any] = {}
                fresh.add_stages(fresh_stages, options, src.language)
                module = fresh_stages[ext](module, metadata)
            if ext == "llir" and stop in ("alloc", "llir"):
                return metadata.get("shared") or 0, metadata.get("num_warps", plan.num_warps), "llir"
        return metadata.get("shared") or 0, metadata.get("num_warps", plan.num_warps), stage
    except Exception as exc:  # noqa: BLE001 - every compiler failure becomes data
        raise _StageError(stage, exc) from exc


def _make_ir_takes_target(src) -> bool:
    import inspect

    try:
        return "target" in inspect.signature(src.make_ir).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return True


class _StageError(Exception):
    def __init__(self, stage: str, exc: BaseException):
        super().__init__(stage, exc)
        self.stage = stage
        self.exc = exc


def compile_plan(plan: LaunchPlan, arch: str, *, stop: str = "alloc", spec: KernelSpec | None = None,
                 raise_on_error: bool = True) -> ExactResult:
    """Compile a launch plan for ``arch``. See :func:`compile_spec`."""
    if stop not in STOP_MODES:
        raise ValueError(f"stop must be one of {STOP_MODES}")
    triton = _triton()
    _, _, warp_size = parse_arch(arch)
    t0 = time.perf_counter()
    try:
        with _capture_stderr() as diag, warnings.catch_warnings():
            # Triton 3.9 warns once that its fp-fusion default will change; it changes no buffer
            warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
            shared, warps, stage = _compile_plan(plan, arch, stop)
    except _StageError as err:
        message = _message(err.exc, diag[0])
        if raise_on_error:
            raise CompileFailed(spec, arch, err.stage, message) from err.exc
        return ExactResult(arch, None, plan.num_warps, plan.num_warps * warp_size, err.stage,
                           time.perf_counter() - t0, triton.__version__, message, err.stage)
    return ExactResult(arch, int(shared), int(warps), int(warps) * warp_size, stage,
                       time.perf_counter() - t0, triton.__version__)


def compile_spec(spec: KernelSpec, arch: str, *, stop: str = "alloc",
                 raise_on_error: bool = True) -> ExactResult:
    """Compile ``spec``'s reference kernel for ``arch`` and return what the compiler says.

    ``stop``: ``"alloc"`` (fastest, stops at shared-memory allocation), ``"llir"`` (after the
    LLVM-IR stage, where Triton records ``metadata["shared"]``) or ``"full"`` (to the binary).
    Raises :class:`CompileFailed` on a compiler failure unless ``raise_on_error`` is false (the
    result then carries the error), :class:`UnsupportedArch`, :class:`TritonUnavailable`, and
    ``ValueError`` for a spec our kernels cannot express.
    """
    return compile_plan(launch_plan(spec), arch, stop=stop, spec=spec, raise_on_error=raise_on_error)


def exact_shared_bytes(spec: KernelSpec, arch: str, *, stop: str = "alloc") -> int:
    """Bytes of shared memory per block Triton allocates for ``spec`` on ``arch``.

    Raises :class:`CompileFailed` (with the compiler's message) when the kernel does not compile.
    """
    result = compile_spec(spec, arch, stop=stop)
    assert result.shared_bytes is not None
    return result.shared_bytes


def default_estimator():
    """The process-wide cached :class:`tilefit.smem.cache.ExactEstimator`."""
    from .cache import default_estimator as _default_estimator

    return _default_estimator()
