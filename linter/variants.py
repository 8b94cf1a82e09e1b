"""From a table entry to the kernels the engine will launch with it.

One entry can feed more than one kernel: an ``int8_w8a16`` table serves both the per-channel
path (the plain fused-MoE kernel with int8 weights) and the group-quantised path (the wNa16
kernel), and the file name does not say which. Each such kernel is a *variant*; the
shared-memory rules judge every variant and report the worst.

Triton's defaults for missing ``num_warps``/``num_stages`` are filled in here; the rest is the
kernel family's that the table's config family launches (:func:`tilefit.kernels.table`, its
``table_variants``), with the engines' launch-time adjustments (vLLM's clamp of BLOCK_SIZE_K to the
quantisation block and its swap of A and B on sm_90, :mod:`tilefit.serving.launch`), so the spec
is what really compiles. What of that is the table's is made once per kernel key, arch and engine
(:class:`TableLaunch`); a family that says how its entries' kernels vary (``launch_key``) builds
the variants of each key once, and every other entry of the key gets them filled in with its numbers.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import kernels
from .dtypes import path_of_file_dtype
from .families import TableMeta, kernel_key
from .kernels.spec import Variant, from_templates, variant_template
from .parameters import domain_test

# Triton's launch defaults on CUDA (and on ROCm for num_warps).
DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES_CUDA = 3
DEFAULT_NUM_STAGES_ROCM = 2
# ``triton.Config(kwargs)``'s own defaults: the autotuner passes them to every launch
# (``Config.all_kwargs``), so on ROCm an autotune config without num_stages runs 3 stages, not
# the HIP launch default of 2.
CONFIG_NUM_WARPS = 4
CONFIG_NUM_STAGES = 3

# the tile keys of the GEMM config tables (fused_moe, w8a8_gemm)
TILE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")

__all__ = ["CONFIG_NUM_STAGES", "CONFIG_NUM_WARPS", "DEFAULT_NUM_STAGES_CUDA", "DEFAULT_NUM_STAGES_ROCM",
           "DEFAULT_NUM_WARPS", "TILE_KEYS", "TableLaunch", "Variant", "dtype_path", "effective_launch", "is_int",
           "kernel_variants", "table_kernel"]


def dtype_path(meta: TableMeta) -> str | None:
    return path_of_file_dtype(meta.dtype)


def is_int(value) -> bool:
    return type(value) is int


def effective_launch(entry: Mapping, vendor: str) -> tuple[int, int]:
    """num_warps and num_stages as the launch will see them (Triton defaults filled in)."""
    warps = entry.get("num_warps", DEFAULT_NUM_WARPS)
    default_stages = DEFAULT_NUM_STAGES_ROCM if vendor == "AMD" else DEFAULT_NUM_STAGES_CUDA
    stages = entry.get("num_stages", default_stages)
    return warps, stages


def kernel_variants(meta: TableMeta, entry: Mapping, arch: str, vendor: str, engine: str | None) -> tuple[Variant, ...]:
    """The kernels one entry launches on ``arch``; () when the entry is not launchable as is."""
    launch = _table_launch(meta, arch, engine)
    if launch is None or (type(entry) is not dict and not isinstance(entry, Mapping)):
        return ()
    return launch.variants(meta, entry, vendor)


class TableLaunch:
    """The launches of the entries of the tables of one kernel key (``meta``'s family, dtype,
    block shape, per-channel quantisation, engine, ``_down``, Triton folder) on one arch with one
    engine: what of a build is the table's, made once. Where the kernel family says how its
    entries' kernels vary (:meth:`~tilefit.kernels.family.KernelFamily.launch_key`), the variants
    of each of its keys are built once by the family and filled in with every other entry's
    numbers (:func:`~tilefit.kernels.spec.from_templates`)."""

    def __init__(self, meta: TableMeta, family, arch: str, engine: str | None):
        self.family = family
        self.arch = arch
        self.engine = engine
        self.names = family.tile_names
        self.group = family.group_name
        self.launchable = dtype_path(meta) is not None
        self.in_domain = domain_test(meta.family)
        self.key_of = family.launch_key(meta, arch, engine)
        # launch key -> ((label, spec template), ...) of its variants; None where a family's
        # variants are not the filled-in templates of the first entry of their key
        self.templates: dict = {}

    def variants(self, meta: TableMeta, entry: Mapping, vendor: str) -> tuple[Variant, ...]:
        if not self.launchable:
            return ()
        for k in self.names:
            v = entry.get(k)
            if type(v) is not int or v <= 0:
                return ()
        warps, stages = effective_launch(entry, vendor)
        if type(warps) is not int or type(stages) is not int or warps <= 0 or stages <= 0:
            return ()
        if not self.in_domain(entry):  # VAL003's: never estimated, never compiled
            return ()
        tile = {k: entry[k] for k in self.names}
        group = self.group
        if group:
            tile[group] = entry.get(group, 1) if is_int(entry.get(group, 1)) else 1
        key_of = self.key_of
        if key_of is None:
            return self._built(meta, entry, tile, warps, stages)
        key, launched = key_of(tile, entry)
        templates = self.templates.get(key, False)
        if templates is False:
            variants = self._built(meta, entry, tile, warps, stages)
            self.templates[key] = _templates(variants, launched, warps, stages)
            return variants
        if templates is None:
            return self._built(meta, entry, tile, warps, stages)
        return from_templates(templates, launched, warps, stages)

    def _built(self, meta: TableMeta, entry: Mapping, tile: dict, warps: int, stages: int) -> tuple[Variant, ...]:
        family, arch, engine = self.family, self.arch, self.engine
        variants = family.table_variants(meta, tile, warps, stages, arch, engine)
        return family.engine_variants(variants, entry, meta, engine, arch)


def _templates(variants: tuple[Variant, ...], tile: Mapping[str, int], warps: int, stages: int) -> tuple | None:
    """The variants as templates (:func:`~tilefit.kernels.spec.variant_template`), or None where
    one's tile, warps or stages are not the entry's (then no other entry's fill them in)."""
    out = []
    for v in variants:
        t = variant_template(v)
        if v.spec.num_warps != warps or v.spec.num_stages != stages or \
                v.spec.tile != tuple([(k, tile.get(k)) for k in t[2]]):
            return None
        out.append(t)
    return tuple(out)


def _table_launch(meta: TableMeta, arch: str, engine: str | None) -> TableLaunch | None:
    """The :class:`TableLaunch` of ``meta``'s tables on ``arch`` with ``engine`` (None: no
    registered kernel family launches the table's config family); memoised per table name
    (identity) and per kernel key, so the tables of one kernel key share theirs."""
    family = kernels.table(meta.family)
    if family is None:
        return None
    ctx = (id(meta), arch, engine)
    hit = _BY_META.get(ctx)
    if hit is None or hit[0] is not meta or hit[1].family is not family:
        key = (*kernel_key(meta), arch, engine)
        launch = _LAUNCHES.get(key)
        if launch is None or launch.family is not family:
            launch = _LAUNCHES[key] = TableLaunch(meta, family, arch, engine)
        hit = _BY_META[ctx] = (meta, launch)
    return hit[1]


def table_kernel(meta: TableMeta) -> tuple[tuple, str | None, object]:
    """``(kernel key, launch-order group, in-domain test)`` of ``meta``'s tables: the fields of the
    name that decide its entries' kernels (family, dtype, block shape, per-channel quantisation,
    engine, ``_down``, Triton folder), the kernel family's group constexpr (``GROUP_SIZE_M``; None
    where no family launches the table or it has none) and
    :func:`~tilefit.parameters.domain_test` of its config family. Memoised per table name."""
    family = kernels.table(meta.family)
    hit = _KERNELS.get(id(meta))
    if hit is None or hit[0] is not meta or hit[1] is not family:
        key = kernel_key(meta)
        hit = _KERNELS[id(meta)] = (meta, family, (key, family.group_name if family is not None else None,
                                                   domain_test(meta.family)))
    return hit[2]


# id(meta) -> (meta, its kernel family, table_kernel's answer)
_KERNELS: dict[int, tuple] = {}
# (id(meta), arch, engine) -> (meta, its TableLaunch): the meta is kept, so its id is not reused
_BY_META: dict[tuple, tuple[TableMeta, TableLaunch]] = {}
# (kernel key, arch, engine) -> TableLaunch
_LAUNCHES: dict[tuple, TableLaunch] = {}
