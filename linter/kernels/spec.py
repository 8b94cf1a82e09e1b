"""What a kernel launch is, as data: the input of every shared-memory estimator.

A :class:`KernelSpec` names one compiled kernel: which reference kernel, which dtype path
(operand types and quantisation), the tile constexprs, ``num_warps``/``num_stages`` and the
launch specialisation that changes code generation (16-byte divisibility of the problem sizes,
the arch-dependent swap of A and B). Two launches with equal specs compile to the same kernel,
so a spec is the key of the compile cache and of the estimators' memo tables.

Which kernels exist is the registry's (:mod:`tilefit.kernels.registry`): a spec names a
registered family, which validates it. This module imports neither triton nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from collections.abc import Mapping, Sequence

from ..dtypes import QUANT_MODES
from ..model import build_frozen
from . import registry


@dataclass(frozen=True)
class KernelSpec:
    """One kernel specialisation. Hashable; ``key()`` is a stable string form.

    ``tile`` holds the tile constexprs by their JSON names (``BLOCK_SIZE_M``, ``BLOCK_SIZE_N``,
    ``BLOCK_SIZE_K``, ``GROUP_SIZE_M``; for MLA decode ``BLOCK_N``, ``BLOCK_H``,
    ``BLOCK_DMODEL``, ``BLOCK_DPE``). ``block_shape`` is ``(block_n, block_k)`` for block
    quantisation and ``(0, group_size)`` for weight-only group quantisation.
    ``problem`` holds the problem sizes that matter for specialisation (``N``, ``K`` and, for
    MoE, ``top_k``); only their divisibility by 16 changes the compiled kernel.
    ``engine`` names whose kernel it is: ``None`` for our reference kernel, ``"vllm"`` /
    ``"sglang"`` for that engine's own kernel, launched as that engine launches it (the shared-memory
    model then answers with that engine's calibrated forms: the engine of record of a table).
    ``triton`` (``"3.4"``) is the Triton release the launch compiles with when the table says
    (SGLang's ``triton_X_Y_Z`` folders); None: the installed one.
    """

    kernel: str
    dtype: str
    tile: tuple[tuple[str, int], ...]
    num_warps: int = 4
    num_stages: int = 3
    quant: str = "none"
    block_shape: tuple[int, int] | None = None
    problem: tuple[tuple[str, int], ...] = ()
    swap_ab: bool = False
    kv_dtype: str | None = None
    extra: tuple[tuple[str, object], ...] = field(default=())
    engine: str | None = None
    triton: str | None = None

    def _fields_key(self) -> tuple:
        """The fields in order (what the dataclass's ``__eq__`` compares), built once per object."""
        k = self.__dict__.get("_key")
        if k is None:
            k = (self.kernel, self.dtype, self.tile, self.num_warps, self.num_stages, self.quant, self.block_shape,
                 self.problem, self.swap_ab, self.kv_dtype, self.extra, self.engine, self.triton)
            object.__setattr__(self, "_key", k)
        return k

    def __hash__(self) -> int:
        # specs key every memo of a check (tens of thousands of lookups): hashed once per object
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(self._fields_key())
            object.__setattr__(self, "_hash", h)
        return h

    def __eq__(self, other) -> bool:
        # the dataclass's comparison (field by field, the same class only), without building both
        # tuples on each call: equal specs built apart meet in every memo of a check
        if self is other:
            return True
        if other.__class__ is not KernelSpec:
            return NotImplemented
        return self._fields_key() == other._fields_key()

    @property
    def smem_key(self) -> tuple:
        """The fields with the family's launch-order constexpr (``GROUP_SIZE_M``:
        :attr:`KernelFamily.group_name`) left out of the tile: it orders the program ids, and no
        closed form, calibration point or failure rule of the shared-memory models reads it, so
        the engine model's answers are shared across it (two tables' entries that differ only
        there are one question). Built once per object."""
        k = self.__dict__.get("_smem_key")
        if k is None:
            group = registry.get(self.kernel).group_name
            tile = self.tile if group is None else tuple(p for p in self.tile if p[0] != group)
            k = (self.kernel, self.dtype, tile, self.num_warps, self.num_stages, self.quant, self.block_shape,
                 self.problem, self.swap_ab, self.kv_dtype, self.extra, self.engine, self.triton)
            object.__setattr__(self, "_smem_key", k)
        return k

    @property
    def smem_id(self) -> int:
        """:attr:`smem_key` as an int, equal for equal keys in this process (interned once per
        object): the key of the shared-memory models' memos, which a look-up hashes in C instead
        of hashing the key's thirteen fields each time (a check looks up tens of thousands).
        Never pickled: another process numbers the keys it meets itself."""
        i = self.__dict__.get("_smem_id")
        if i is None:
            i = _SMEM_IDS.setdefault(self.smem_key, len(_SMEM_IDS))
            object.__setattr__(self, "_smem_id", i)
        return i

    def __getstate__(self) -> dict:
        # a string's hash differs between processes: the cached hash never travels with a pickle
        # (nor the fields' tuples, rebuilt when asked)
        return {k: v for k, v in self.__dict__.items() if k not in _MEMO_ATTRS}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def __post_init__(self) -> None:
        family = registry.find(self.kernel)
        if family is None:
            raise ValueError(f"unknown kernel {self.kernel!r}; known: {', '.join(registry.names())}")
        family.validate(self)
        if self.quant not in QUANT_MODES:
            raise ValueError(f"unknown quantisation {self.quant!r}; known: {', '.join(QUANT_MODES)}")

    @property
    def tile_dict(self) -> dict[str, int]:
        return dict(self.tile)

    @property
    def problem_dict(self) -> dict[str, int]:
        return dict(self.problem)

    def get(self, name: str, default: int | None = None) -> int | None:
        for key, value in self.tile:
            if key == name:
                return value
        return default

    def with_(self, **changes) -> "KernelSpec":
        return replace(self, **changes)

    def evolve(self, **changes) -> "KernelSpec":
        """``with_`` without re-validating: for changes that cannot make a valid spec invalid
        (``engine``, ``triton``, an ``extra`` entry), on the hot path of table checks."""
        new = object.__new__(KernelSpec)
        d = new.__dict__
        d.update(self.__dict__)  # a C-level copy; the memoised reference, hash and key are not the new spec's
        d.pop("_reference", None)
        d.pop("_hash", None)
        d.pop("_key", None)
        d.pop("_smem_key", None)
        d.pop("_smem_id", None)
        d.update(changes)
        return new

    def key(self) -> str:
        """A stable, human-readable identity, used as the compile-cache key."""
        parts = [self.kernel, self.dtype, self.quant]
        if self.block_shape is not None:
            parts.append("bs=%dx%d" % self.block_shape)
        if self.kv_dtype:
            parts.append(f"kv={self.kv_dtype}")
        parts.extend(f"{k}={v}" for k, v in sorted(self.tile))
        parts.append(f"w={self.num_warps}")
        parts.append(f"s={self.num_stages}")
        if self.swap_ab:
            parts.append("swap_ab")
        parts.extend(f"{k}={v}" for k, v in sorted(self.problem))
        parts.extend(f"{k}={v}" for k, v in sorted(self.extra))
        if self.engine:
            parts.append(f"engine={self.engine}")
        if self.triton:
            parts.append(f"triton={self.triton}")
        return ",".join(parts)

    @property
    def reference(self) -> "KernelSpec":
        """The same launch of our reference kernel (``engine`` and ``triton`` cleared; memoised)."""
        if self.engine is None and self.triton is None:
            return self
        ref = self.__dict__.get("_reference")
        if ref is None:
            ref = self.evolve(engine=None, triton=None)
            object.__setattr__(self, "_reference", ref)
        return ref


def make_spec(kernel: str, dtype: str, tile: Mapping[str, int], **kwargs) -> KernelSpec:
    """Build a spec from a tile mapping (keys are sorted so equal tiles give equal specs)."""
    problem = kwargs.pop("problem", None) or {}
    extra = kwargs.pop("extra", None) or ()
    if isinstance(extra, Mapping):
        extra = tuple(sorted(extra.items()))
    fields_ = dict(kernel=kernel, dtype=dtype, tile=tuple(sorted([(k, int(v)) for k, v in tile.items()])),
                   problem=tuple(sorted([(k, int(v)) for k, v in problem.items()])) if problem else (),
                   extra=tuple(extra), **kwargs)
    if not _FIELDS.issuperset(kwargs):
        return KernelSpec(**fields_)  # the dataclass's own error for an unknown field
    # the frozen dataclass's __init__ sets each of its 13 fields through object.__setattr__: the
    # same object built from its defaults' dict, validated as __init__ would (thousands per check)
    spec = build_frozen(KernelSpec, _DEFAULTS)
    spec.__dict__.update(fields_)
    spec.__post_init__()
    return spec


_DEFAULTS = {f.name: f.default for f in fields(KernelSpec)}
_MEMO_ATTRS = frozenset(("_hash", "_key", "_smem_key", "_smem_id"))
# KernelSpec.smem_key -> its number (KernelSpec.smem_id), kept for the process's life: a check meets
# a few tens of thousands of keys, and the estimators' memos hold the same tuples while they live
_SMEM_IDS: dict[tuple, int] = {}
_FIELDS = frozenset(_DEFAULTS)


@dataclass(frozen=True)
class Variant:
    """One kernel a table entry launches: its spec, and what tells it apart from the entry's
    other variants (shown in messages; "" when there is one)."""

    label: str
    spec: KernelSpec


def variant_template(variant: Variant) -> tuple[str, dict, tuple[str, ...]]:
    """``variant``'s label, its spec's fields (without what the spec memoised) and its tile's
    names: what :func:`from_templates` fills in with another tile, ``num_warps`` and ``num_stages``."""
    spec = variant.spec
    fields_ = {k: v for k, v in spec.__dict__.items() if k not in _MEMO_ATTRS and k != "_reference"}
    return variant.label, fields_, tuple(k for k, _ in spec.tile)


def from_templates(templates: Sequence[tuple[str, dict, tuple[str, ...]]], tile: Mapping[str, int], num_warps: int,
                   num_stages: int) -> tuple[Variant, ...]:
    """The variants of :func:`variant_template`'s templates, each spec with ``tile``'s values
    (integers) for its tile names, ``num_warps`` and ``num_stages``: the specs ``make_spec``
    builds from the same fields, not validated again (``KernelFamily.validate`` reads none of
    these three)."""
    out = []
    for label, fields_, names in templates:
        spec = object.__new__(KernelSpec)
        d = spec.__dict__
        d.update(fields_)  # the fields in their order (a pickle's state is the same dict)
        d["tile"] = tuple([(k, tile[k]) for k in names])
        d["num_warps"] = num_warps
        d["num_stages"] = num_stages
        variant = object.__new__(Variant)
        variant.__dict__.update(label=label, spec=spec)  # build_frozen's way: the frozen __init__ skipped
        out.append(variant)
    return tuple(out)
