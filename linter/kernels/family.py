"""One kernel family: its data (``family.json``) and its behaviour (the methods of its class).

A family folder holds everything about one kernel::

    kernels/<name>/
      family.json   the facts, as data: the reference kernel's function, the tile constexprs, the
                    dtype paths it runs, the engines' function names and source files, the probe's
                    defaults, the calibration's dtype paths and grid, and -- when config tables
                    launch it -- the table family: its file-name grammar, its parameters (VAL
                    rules), its performance-model shape and the fixer's constraints
      family.py     ``class Family(KernelFamily)`` (usually ``GemmFamily``): how a spec becomes a
                    launch plan (``launch_plan``), the closed forms' variables, the calibration
                    points, the probe's specs, how a table entry becomes specs (``table_variants``)
      kernel.py     the ``@triton.jit`` reference kernel (+ torch launcher and reference); only
                    compiles and GPU checks import it
      check.py      numerical checks against the torch reference (``check(case, device)``,
                    ``GPU_CASES``); optional
      smem/triton-<X.Y>.json
                    the family's calibrated closed forms per Triton release (written by
                    ``tilefit calibrate smem``)

:class:`KernelFamily` gives the data as attributes and declares every behaviour as a method;
:class:`tilefit.kernels.gemm.GemmFamily` implements them for GEMM-shaped kernels (tiles
``BLOCK_SIZE_M/N/K``), so a GEMM family only writes ``launch_plan``. ``family.py`` imports neither
triton nor torch (the check path reads it).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..dtypes import PATHS

if TYPE_CHECKING:  # pragma: no cover
    from .plan import LaunchPlan
    from .spec import KernelSpec, Variant

FORMAT = 1
DTYPE_KINDS = ("path", "query")
ENGINE_LABELS = {"vllm": "vLLM", "sglang": "SGLang"}
_REQUIRED = ("format", "name", "reference", "dtype", "tile")


class KernelFamilyError(ValueError):
    """A family folder is malformed (its ``family.json`` or ``family.py``); the message says where."""


class FormVariablesError(ValueError):
    """A spec's closed-form variables cannot be computed (the model lacks a size it needs)."""


def read_data(folder: Path) -> dict:
    """``folder/family.json``, checked for the fields every family needs."""
    path = folder / "family.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise KernelFamilyError(f"{path}: cannot read: {exc}") from None
    except ValueError as exc:
        raise KernelFamilyError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise KernelFamilyError(f"{path}: expected an object")
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise KernelFamilyError(f"{path}: missing {', '.join(missing)}")
    if data["format"] != FORMAT:
        raise KernelFamilyError(f"{path}: unsupported format {data['format']!r}")
    if not isinstance(data["name"], str) or not data["name"].isidentifier():
        raise KernelFamilyError(f"{path}: name {data['name']!r} is not an identifier")
    if data["dtype"] not in DTYPE_KINDS:
        raise KernelFamilyError(f"{path}: dtype must be one of {', '.join(DTYPE_KINDS)}")
    ref = data["reference"]
    if not (isinstance(ref, dict) and isinstance(ref.get("module"), str) and isinstance(ref.get("function"), str)):
        raise KernelFamilyError(f"{path}: reference must be {{\"module\": ..., \"function\": ...}}")
    if not (isinstance(data["tile"], list) and data["tile"] and all(isinstance(t, str) for t in data["tile"])):
        raise KernelFamilyError(f"{path}: tile must be a list of constexpr names")
    tables = data.get("tables")
    if tables is not None:
        if not isinstance(tables, dict) or not isinstance(tables.get("family"), str):
            raise KernelFamilyError(f"{path}: tables.family must name the config family")
        grammar = tables.get("file_name") or {}
        if not (grammar.get("leading_keys") or grammar.get("tag")):
            raise KernelFamilyError(f"{path}: tables.file_name needs leading_keys or a tag")
    return data


class KernelFamily:
    """A registered kernel family. Subclasses (in the family's ``family.py``) implement the
    behaviour; the data is ``self.data`` (``family.json``) with the accessors below."""

    def __init__(self, data: Mapping[str, Any], folder: Path, package: str):
        self.data = data
        self.folder = Path(folder)
        self.package = package  # importable name of the folder (tilefit.kernels.fused_moe, ...)

    # -- identity and data ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def order(self) -> int:
        return int(self.data.get("order", 100))

    @property
    def summary(self) -> str:
        return self.data.get("summary", "")

    @property
    def dtype_kind(self) -> str:
        """``path``: a spec's dtype is a dtype path (tilefit.dtypes.PATHS); ``query``: the query's
        element type (MLA decode, whose KV cache is ``spec.kv_dtype``)."""
        return self.data["dtype"]

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(self.data.get("dtypes", ()))

    @property
    def kv_dtypes(self) -> tuple[str, ...]:
        return tuple(self.data.get("kv_dtypes", ()))

    @property
    def tile_names(self) -> tuple[str, ...]:
        """The tile constexprs a config sets (``BLOCK_SIZE_M``, ...; MLA: ``BLOCK_N``, ``BLOCK_H``)."""
        return tuple(self.data["tile"])

    @property
    def group_name(self) -> str | None:
        return self.data.get("group")

    @property
    def quant_modes(self) -> tuple[str, ...]:
        """The quantisation modes the kernel runs (``none``, ``per_tensor``, ``block``, ...)."""
        return tuple((self.data.get("quant") or {}).get("modes", ("none",)))

    @property
    def can_swap_ab(self) -> bool:
        """The kernel has the swap of A and B (the launch decides: tilefit.serving.launch)."""
        return bool(self.data.get("swap_ab"))

    @property
    def engine_functions(self) -> tuple[str, ...]:
        """The engines' names of the kernel this family reproduces (``--engine-kernels``)."""
        return tuple((self.data.get("engine") or {}).get("functions", ()))

    @property
    def engine_files(self) -> tuple[str, ...]:
        """Where the engines keep it, relative to the package's parent folder (searched first)."""
        return tuple((self.data.get("engine") or {}).get("files", ()))

    @property
    def probe_data(self) -> Mapping[str, Any]:
        return self.data.get("probe") or {}

    @property
    def calibration(self) -> Mapping[str, Any]:
        return self.data.get("calibration") or {}

    @property
    def table(self) -> Mapping[str, Any] | None:
        """The config family whose entries launch this kernel (None: no table launches it)."""
        return self.data.get("tables")

    @property
    def table_name(self) -> str | None:
        return self.table["family"] if self.table else None

    # -- the reference kernel -------------------------------------------------------------------
    @property
    def reference(self) -> tuple[str, str]:
        """``(module, function)`` of the reference ``@triton.jit`` kernel, importable."""
        ref = self.data["reference"]
        return f"{self.package}.{ref['module']}", ref["function"]

    def kernel_path(self) -> Path:
        return self.folder / (self.data["reference"]["module"].replace(".", "/") + ".py")

    def source_files(self) -> tuple[Path, ...]:
        """The files whose bytes decide a compile of this family (the compile cache's key): the
        kernel, the family's code and the shared launch-plan helpers."""
        here = Path(__file__).resolve().parent
        files = [self.kernel_path(), self.folder / "family.py", here / "plan.py"]
        files.extend(extra for extra in self.extra_sources() if extra not in files)
        return tuple(files)

    def extra_sources(self) -> Sequence[Path]:
        """Other files the family's launch plan is built from (``gemm.py`` for GEMM families)."""
        return ()

    def submodule(self, name: str):
        """A module of the family's folder (``kernel``, ``check``), imported on first use."""
        return importlib.import_module(f"{self.package}.{name}")

    # -- behaviour (implemented by the family's class) ------------------------------------------
    def _missing(self, what: str):
        return NotImplementedError(f"kernel family {self.name} has no {what} ({self.folder / 'family.py'})")

    def launch_plan(self, spec: "KernelSpec") -> "LaunchPlan":
        """The launch of ``spec``'s reference kernel as the engine's launcher would make it; raises
        ``ValueError`` for a spec the kernel cannot run."""
        raise self._missing("launch_plan")

    # the engines' own kernels (tilefit.smem.engine_kernels, the engine calibration)
    @property
    def engines(self) -> Mapping[str, Mapping[str, Any]]:
        """``family.json``'s ``engines``: per engine (``vllm``, ``sglang``) the files its kernels live
        in (relative to the package's parent folder) and its launcher's name."""
        return self.data.get("engines") or {}

    def engine_launchers(self) -> Mapping[str, Any]:
        """``engines.py``'s ``LAUNCHERS``: engine -> ``f(reference plan, spec, arch) -> (function,
        args)``; empty when the family has no ``engines.py``."""
        hit = self.__dict__.get("_launchers")
        if hit is None:
            hit = getattr(self.submodule("engines"), "LAUNCHERS", {}) if (self.folder / "engines.py").is_file() else {}
            self.__dict__["_launchers"] = hit
        return hit

    def engine_min_triton(self, engine: str, arch: str) -> tuple[str, str] | None:
        """``(oldest Triton release, why)`` the engine's launch of this family can be built with on
        ``arch`` (``engines.py``'s ``min_triton``, from the releases' own sources); None when the
        family does not say."""
        if not (self.folder / "engines.py").is_file():
            return None
        fn = getattr(self.submodule("engines"), "min_triton", None)
        return fn(engine, arch) if fn else None

    def engine_function(self, engine: str, spec: "KernelSpec", arch: str) -> str:
        """The name of the engine's kernel that runs ``spec`` on ``arch`` (raises ValueError when
        the engine does not launch it)."""
        return self.engine_launch(engine, spec, arch)[0]

    def engine_launch(self, engine: str, spec: "KernelSpec", arch: str) -> tuple[str, tuple]:
        """``(function, args)`` of the engine's launch of ``spec`` on ``arch``: its kernel's name and
        the arguments its launcher passes, by that kernel's parameter names. ValueError when the
        engine does not launch this spec (or the family does not know the engine)."""
        launcher = self.engine_launchers().get(engine)
        if launcher is None:
            raise ValueError(f"{self.name}: no launch of {engine}'s kernel is modelled "
                             f"(engines.py knows {', '.join(self.engine_launchers()) or 'none'})")
        function, args, *_options = launcher(self.launch_plan(spec), spec, arch)
        return function, tuple(args)

    def engine_options(self, engine: str, spec: "KernelSpec", arch: str) -> dict:
        """Backend options the engine's launcher adds (ROCm: ``waves_per_eu``, ``kpack``, ...)."""
        launcher = self.engine_launchers().get(engine)
        if launcher is None:
            return {}
        out = launcher(self.launch_plan(spec), spec, arch)
        return dict(out[2]) if len(out) > 2 else {}

    def engine_launches(self, engine: str, spec: "KernelSpec", arch: str) -> bool:
        """Whether ``engine``'s launcher launches ``spec`` on ``arch`` at all (vLLM never loads its
        int8 block-GEMM tables: no vLLM kernel runs them)."""
        # the launchers accept or refuse a spec by its dtype path, quantisation, swap and extras
        # and the arch, never by its tile: the memo is keyed so
        key = (engine, spec.kernel, spec.dtype, spec.quant, spec.block_shape is None, spec.swap_ab, spec.extra,
               spec.kv_dtype, arch)
        memo = self.__dict__.setdefault("_launches_memo", {})
        hit = memo.get(key)
        if hit is None:
            try:
                self.engine_launch(engine, spec, arch)
                hit = True
            except ValueError:
                hit = False
            memo[key] = hit
        return hit

    def stand_in(self, engine: str, spec: "KernelSpec") -> tuple[str, str] | None:
        """``(other engine, why)`` when ``engine`` launches no kernel for ``spec``'s dtype path but
        ships a table for it whose entries another engine's kernel runs (``family.json``
        ``engines.<engine>.stand_in``, keyed ``<dtype>/<quant>``): vLLM 0.33.0 loads none of its
        ``int8_w8a8`` block-GEMM tables, which are SGLang's own entries. None otherwise."""
        rec = ((self.engines.get(engine) or {}).get("stand_in") or {}).get(f"{spec.dtype}/{spec.quant}")
        if not rec:
            return None
        return rec["engine"], rec["label"]

    def engine_plan(self, engine: str, spec: "KernelSpec", arch: str, module: str) -> "LaunchPlan":
        """The :class:`~.plan.LaunchPlan` of the engine's own kernel (extracted into ``module``)."""
        from .plan import LaunchPlan, options

        function, args = self.engine_launch(engine, spec, arch)
        opts = dict(options(spec))
        opts.update(self.engine_options(engine, spec, arch))
        return LaunchPlan(self.name, module, function, args, spec.num_warps, spec.num_stages,
                          tuple(sorted(opts.items())))

    def validate(self, spec: "KernelSpec") -> None:
        """Raise ``ValueError`` for a spec this family can never express (called by KernelSpec).
        This one reads the dtype path only."""
        if self.dtype_kind == "path" and spec.dtype not in PATHS:
            raise ValueError(f"unknown dtype path {spec.dtype!r}; known: {', '.join(PATHS)}")

    # the analytic model (tilefit.smem.analytic)
    def form_dtypes(self, spec: "KernelSpec") -> tuple[str, ...]:
        """The dtype keys of the closed forms that may answer for ``spec``, best first (the model
        tries them, then ``default``)."""
        raise self._missing("form_dtypes")

    def form_variables(self, spec: "KernelSpec", operand_bytes: Mapping, epilogue, arch_family: str | None,
                       arch: str | None) -> dict[str, float]:
        """The closed forms' variables for ``spec`` (``tilefit.smem.analytic.VARIABLES``).
        ``operand_bytes``: the model's bytes per dtype path; ``epilogue(arch, family, c, bm, bn, w, path=None)``:
        its measured epilogue scratch. Raises FormVariablesError for a dtype the model has no sizes for.
        Those of :meth:`tile_variables`, with ``E`` the answer of ``epilogue`` on the arch to its
        epilogue question."""
        values, question = self.tile_variables(spec, operand_bytes)
        if question is None:
            return values
        return {**values, "E": epilogue(arch, arch_family, *question)}

    def tile_variables(self, spec: "KernelSpec", operand_bytes: Mapping) -> tuple[dict[str, float], tuple | None]:
        """``(variables, epilogue question)``: the closed forms' variables for ``spec`` that do not
        depend on the arch (all of them but ``E``, the epilogue scratch the arch's table measures),
        and the question ``(c, bm, bn, w, path)`` whose ``epilogue`` answer on the arch is ``E``;
        None when the variables hold ``E`` too (a kernel without the table's epilogue). The
        engine model reads them once per spec, and the arch's ``E`` per arch (a spec is answered
        on half a dozen archs). A family that overrides :meth:`form_variables` instead is asked
        per arch."""
        raise self._missing("tile_variables")

    # the calibration (tilefit.smem.calibrate); ``path`` is a calibrate.Path
    def calibration_paths(self) -> list[dict]:
        """The dtype paths the calibration fits forms for (``Path.from_json`` dicts)."""
        return [dict(p, kernel=self.name) for p in self.calibration.get("paths", ())]

    def calibration_points(self) -> list[tuple[tuple[int, ...], int, int]]:
        """The calibration's pool: ``(tile, num_warps, num_stages)`` for every grid point."""
        raise self._missing("calibration_points")

    def engine_calibration_points(self, engine: str | None = None) -> list[tuple[tuple[int, ...], int, int]]:
        """The pool of ``engine``'s calibration (default: the calibration's; a family whose
        engines hard-code the tile narrows it to what each launches)."""
        return self.calibration_points()

    def calibration_strata(self) -> list:
        """Functions of a pool item whose every value the stratified design must cover."""
        raise self._missing("calibration_strata")

    @property
    def point_columns(self) -> tuple[str, ...]:
        """What a calibration point's tile tuple holds (the compact points format's columns)."""
        return tuple(self.calibration.get("point", ("BM", "BN", "BK")))

    def point_spec(self, path, tile: Sequence[int], num_warps: int, num_stages: int) -> "KernelSpec":
        """The spec of a calibration point."""
        raise self._missing("point_spec")

    def spec_point(self, spec: "KernelSpec") -> tuple[dict, tuple[int, ...]] | None:
        """``(path dict, tile)`` of a spec a table launches (the proof's real-table points), or None."""
        return None

    def ring_lower_bound(self, path, tile: Sequence[int], num_stages: int) -> int:
        """A cheap lower bound of the operand buffers (the grids' domain filter)."""
        raise self._missing("ring_lower_bound")

    def applies(self, path, tile: Sequence[int]) -> bool:
        """Whether the engines launch this tile on this dtype path at all."""
        return True

    @property
    def form_library(self) -> Mapping[str, Any]:
        """Which candidate forms the calibration searches: ``{"kind": "gemm"}`` (max(loop,
        epilogue), ``tilefit.smem.calibrate.gemm_library``) or ``{"kind": "sums", "terms": ...}``."""
        lib = self.calibration.get("library") or "gemm"
        return {"kind": lib} if isinstance(lib, str) else lib

    def form_dtype(self, path) -> str:
        """The model's dtype key of a calibration path's form."""
        return path.dtype

    # the probe (tilefit.smem.probe)
    def probe_spec(self, *, dtype: str, kv_dtype: str | None, tile: Mapping[str, int], group: int,
                   num_warps: int, num_stages: int, quant: str | None, block_shape, swap_ab: bool,
                   heads: tuple[int, int]) -> "KernelSpec":
        raise self._missing("probe_spec")

    def title(self, spec: "KernelSpec") -> str:
        """One line naming the kernel a probe compiles."""
        return f"{self.name} {spec.dtype}"

    def describe(self, spec: "KernelSpec") -> str:
        """The tile of ``spec`` as a finding shows it (SMEM001)."""
        t = spec.tile_dict
        return " ".join(f"{k}={t.get(k)}" for k in self.tile_names) + f" num_stages={spec.num_stages}"

    def launch_case(self, spec: "KernelSpec") -> dict:
        """The numerical-check case (``check.py``) that launches ``spec`` with real tensors."""
        raise self._missing("launch_case")

    # numerical checks (torch; tilefit.kernels.checks)
    def check(self, case: Mapping, device: str = "cpu") -> dict:
        return self.submodule("check").check(case, device)

    def gpu_cases(self) -> list[dict]:
        try:
            mod = self.submodule("check")
        except ImportError:
            return []
        return [dict(c, kernel=self.name) for c in getattr(mod, "GPU_CASES", ())]

    def validation_specs(self) -> list["KernelSpec"]:
        """Specs the GPU validation (``python -m tilefit.smem.validate``) compiles two ways."""
        return []

    # config tables (tilefit.variants, tilefit.families, the VAL rules, perf, fix)
    def default_quant(self, dtype: str, block_shape) -> tuple[str, tuple[int, int] | None]:
        """``(quant, block_shape)`` of a launch of ``dtype`` that names no quantisation."""
        q = self.data.get("quant") or {}
        mode = q.get("mode")
        default_bs = tuple(q["block_shape"]) if q.get("block_shape") else None
        if mode == "group":
            return "group", tuple(block_shape) if block_shape else default_bs
        if mode == "block":
            return "block", tuple(block_shape) if block_shape else default_bs
        if dtype in ("fp8_w8a8", "int8_w8a8"):
            return ("block", tuple(block_shape)) if block_shape else ("per_tensor", None)
        if dtype == "int8_w8a16":
            return "per_channel", None
        return "none", None

    def table_variants(self, meta, tile: Mapping[str, int], num_warps: int, num_stages: int, arch: str,
                       engine: str | None) -> "tuple[Variant, ...]":
        """The kernels one entry of this family's config table launches on ``arch`` (``tile`` holds
        the entry's valid tile values, warps/stages have Triton's defaults filled in)."""
        raise self._missing("table_variants")

    def launch_key(self, meta, arch: str, engine: str | None):
        """How the kernels of this family's table entries vary from entry to entry, for the tables
        of ``meta``'s kernel key (family, dtype, block shape, per-channel quantisation, engine,
        ``_down``, Triton folder) on ``arch`` with ``engine``: a function of an entry's tile (as
        :meth:`table_variants` gets it) and the entry, giving ``(key, tile)``. The kernels of
        two entries of one ``key`` differ only in their tiles, ``num_warps`` and ``num_stages``;
        each kernel's tile is ``tile``'s values for the names it carries, and the family's
        :meth:`validate` reads none of the three. :func:`tilefit.variants.kernel_variants` then
        builds the variants of a key once (:meth:`table_variants`, :meth:`engine_variants`) and
        fills in the numbers of every other entry of that key. None (the default): every entry
        is built by those two methods."""
        return None

    def engine_variants(self, variants: "Sequence[Variant]", entry: Mapping[str, Any], meta,
                        engine: str | None, arch: str) -> "tuple[Variant, ...]":
        """The variants as the engine of record launches them: each spec names the engine's own
        kernel (``spec.engine``) where its family models that engine's launch (``engines.py``).
        A table no engine claims (``engine`` None) is judged with each engine's kernel, each
        variant labelled with the engine it assumes. Families override this to read the table
        keys their engine's launcher reads (SGLang's ``USE_TMA``). An SGLang table in a
        ``triton_X_Y_Z`` folder compiles with that Triton release (``spec.triton``)."""
        registry, Variant = _registry_and_variant()
        engines = [engine] if engine else sorted({e for v in variants
                                                   for e in registry.get(v.spec.kernel).engine_launchers()})
        out = []
        for v in variants:
            fam = registry.get(v.spec.kernel)
            mine = [e for e in engines if e in fam.engine_launchers() and fam.engine_launches(e, v.spec, arch)]
            stand_in = None
            if not mine and engine:
                stand_in = fam.stand_in(engine, v.spec)
                if stand_in is not None and fam.engine_launches(stand_in[0], v.spec, arch):
                    mine = [stand_in[0]]
            if not mine:
                out.append(v)
                continue
            folder = getattr(meta, "triton_folder", None)
            triton = f"{folder[0]}.{folder[1]}" if folder else None
            for e in mine:
                label = v.label if engine else ", ".join(x for x in (v.label, f"{ENGINE_LABELS.get(e, e)}'s kernel") if x)
                if stand_in is not None:
                    label = ", ".join(x for x in (v.label, f"{ENGINE_LABELS.get(e, e)}'s kernel ({stand_in[1]})") if x)
                out.append(Variant(label, v.spec.evolve(engine=e, triton=triton)))
        return tuple(out)

    def callsite_spec(self, given: Mapping[str, Any], dtype_of, data_pointers: Sequence[str], num_warps: int,
                      num_stages: int) -> "KernelSpec | None":
        """A spec for a Python launch of a kernel with this family's function name (the analytic
        fallback of call sites); None when the family does not say."""
        return None

    def __repr__(self) -> str:
        return f"<kernel family {self.name} ({self.folder})>"


_SPEC_TYPES: list = []


def _registry_and_variant():
    """The registry module and :class:`~tilefit.kernels.spec.Variant` (both import this module:
    looked up on first use, then kept; asked once per table entry and device class)."""
    if not _SPEC_TYPES:
        from . import registry
        from .spec import Variant

        _SPEC_TYPES[:] = [registry, Variant]
    return _SPEC_TYPES[0], _SPEC_TYPES[1]
