"""A kernel launch as data: the argument list a reference kernel gets, and its helpers.

The exact estimator compiles a reference kernel ahead of time. To get the kernel the engine would
get, it must see the arguments the engine's launcher passes, because Triton specialises a compile
on them at launch:

* a pointer becomes ``*<element type>``, 16-byte aligned (``tt.divisibility 16``);
* an integer equal to 1 becomes the constant 1 (strides of contiguous dimensions), an integer
  divisible by 16 gets ``tt.divisibility 16``, others are plain ``i32``/``i64``;
* ``None`` becomes a constant ``None`` (unused scale pointers), floats are ``fp32``, bools ``u1``;
* ``tl.constexpr`` parameters are compile-time constants.

A :class:`LaunchPlan` describes each argument (:class:`Arg`) and leaves the specialisation to
Triton itself (``tilefit.smem.exact`` feeds the values to Triton's own launch specialiser), so the
rules stay those of the installed Triton. Each kernel family builds its plan in its own
``family.py`` (``launch_plan(spec)``, following the engines' launchers: which tensor each pointer
is, its layout, and so which strides are 1, 0, or some multiple of 16) with the helpers here
(:func:`ptr`, :func:`int_`, :func:`const`, :func:`dtype_arg`, :func:`require`, ...).

Policy the launcher of one engine applies before the launch (vLLM's clamp of BLOCK_SIZE_K to the
quantisation block, its swap of A and B: :mod:`tilefit.serving.launch`) is *not* applied here: a
spec names the tile that is launched.

This module imports neither triton nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import on_arch, triton_type
from .spec import KernelSpec

# Entries of ``KernelSpec.extra`` that are backend compile options rather than kernel arguments.
BACKEND_OPTIONS = frozenset({
    "num_ctas", "maxnreg", "waves_per_eu", "matrix_instr_nonkdim", "kpack", "instruction_sched_variant",
})

ARG_KINDS = ("ptr", "int", "float", "bool", "none", "constexpr", "dtype", "tensordesc")


@dataclass(frozen=True)
class Arg:
    """One launch argument.

    ``kind``: ``ptr`` (``value`` is the element type, e.g. ``"fp16"``; the pointer is 16-byte
    aligned), ``int`` (``value`` the integer the launcher passes), ``float``, ``bool``, ``none``
    (a ``None`` argument, a constant), ``constexpr`` (a ``tl.constexpr`` value: int, bool, float
    or str), ``dtype`` (a ``tl.constexpr`` holding a Triton dtype, ``value`` its name) or
    ``tensordesc`` (a host-side ``TensorDescriptor`` of a tensor, as SGLang's TMA path passes:
    ``value`` is :class:`Descriptor`).
    """

    name: str
    kind: str
    value: object = None

    def __post_init__(self) -> None:
        if self.kind not in ARG_KINDS:
            raise ValueError(f"unknown argument kind {self.kind!r}")


def ptr(name: str, ty: str | None) -> Arg:
    """A 16-byte aligned pointer to ``ty`` elements (None: a ``None`` argument)."""
    return Arg(name, "none") if ty is None else Arg(name, "ptr", triton_type(ty))


def int_(name: str, value: int) -> Arg:
    """An integer the launcher passes (specialised by Triton: 1, divisible by 16, other)."""
    return Arg(name, "int", int(value))


def const(name: str, value: object) -> Arg:
    """A ``tl.constexpr`` value."""
    return Arg(name, "constexpr", value)


def dtype_arg(name: str, ty: str) -> Arg:
    """A ``tl.constexpr`` holding a Triton dtype."""
    return Arg(name, "dtype", triton_type(ty))


@dataclass(frozen=True)
class Descriptor:
    """A host-side tensor descriptor (``triton.tools.tensor_descriptor.TensorDescriptor``): the
    tensor's element type, shape and strides, and the block one load moves. Triton specialises a
    kernel on the element type and the block shape (``tensordesc<fp8e4nv[1, 128, 128]>``)."""

    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]


def tensordesc(name: str, ty: str, shape, strides, block_shape) -> Arg:
    return Arg(name, "tensordesc", Descriptor(triton_type(ty), tuple(int(x) for x in shape),
                                              tuple(int(x) for x in strides), tuple(int(x) for x in block_shape)))


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a compile of one reference kernel needs, as plain data."""

    kernel: str
    module: str
    function: str
    args: tuple[Arg, ...]
    num_warps: int
    num_stages: int
    options: tuple[tuple[str, object], ...] = ()

    @property
    def threads(self) -> int:
        return self.num_warps * 32

    def arg(self, name: str) -> Arg:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)

    def arg_dict(self) -> dict[str, Arg]:
        return {a.name: a for a in self.args}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(x: int) -> int:
    return 1 if x <= 1 else 1 << (int(x) - 1).bit_length()


def extra_of(spec: KernelSpec) -> dict[str, object]:
    """``spec.extra`` as a dict (launcher options: ``act_dtype``, ``has_zp``, ``group_size``, ...)."""
    return dict(spec.extra)


def options(spec: KernelSpec) -> tuple[tuple[str, object], ...]:
    """The backend compile options among ``spec.extra`` (``num_ctas``, ``waves_per_eu``, ...)."""
    return tuple(sorted((k, v) for k, v in spec.extra if k in BACKEND_OPTIONS))


def require(spec: KernelSpec, *names: str) -> dict[str, int]:
    """``spec``'s tile; ValueError when it lacks one of ``names``."""
    tile = spec.tile_dict
    missing = [n for n in names if n not in tile]
    if missing:
        raise ValueError(f"{spec.kernel}: tile lacks {', '.join(missing)} ({spec.key()})")
    return tile


def out_type(spec: KernelSpec, default: str) -> str:
    """The output's element type (``extra["out_dtype"]``, else ``default``)."""
    return triton_type(str(extra_of(spec).get("out_dtype", default)))


def adapt_to_arch(plan: LaunchPlan, arch: str) -> LaunchPlan:
    """The plan as launched on ``arch``: on MI300 (gfx94x) fp8 tensors are e4m3fnuz/e5m2fnuz."""
    def adapt(a: Arg) -> Arg:
        if a.kind in ("ptr", "dtype"):
            return Arg(a.name, a.kind, on_arch(str(a.value), arch))
        if a.kind == "tensordesc":
            d = a.value
            return Arg(a.name, a.kind, Descriptor(on_arch(d.dtype, arch), d.shape, d.strides, d.block_shape))
        return a

    args = tuple(adapt(a) for a in plan.args)
    if args == plan.args:
        return plan
    return LaunchPlan(plan.kernel, plan.module, plan.function, args, plan.num_warps, plan.num_stages,
                      plan.options)
