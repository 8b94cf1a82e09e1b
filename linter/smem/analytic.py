"""The analytic shared-memory model: closed forms per (arch family, kernel), stored as data.

The forms live in ``tilefit/data/smem_model/triton-<major>.<minor>.json``, one file per Triton
release, each with its provenance; ``tilefit calibrate smem`` regenerates them from exact
compiles and writes the whole model to ``smem_model/triton-<major>.<minor>.json`` in the user
data folder (:mod:`tilefit.userdata`), which replaces the bundled model of that release. A form is a formula over these variables:

=========  ===================================================================
``S``      num_stages (Triton's default 3 when a config leaves it out)
``W``      num_warps
``BM``     BLOCK_SIZE_M (MLA decode: BLOCK_H, the query heads per program)
``BN``     BLOCK_SIZE_N (MLA decode: BLOCK_N, the KV rows per iteration)
``BK``     BLOCK_SIZE_K (MLA decode: BLOCK_DMODEL, the latent width)
``a b c``  bytes per element of A, B and the output (MLA: query, KV, output)
``GN GK``  quantisation block (block_n, block_k); 0 when not block-quantised
``SWAP``   1 when the kernel swaps A and B (vLLM's fp8 path on sm_90), else 0
``DPE``    MLA decode: BLOCK_DPE, the rope part of the head
``G``      wNa16 MoE: the weight quantisation group size along K (0 elsewhere)
``DV``     MLA decode: BLOCK_DV, the value width (0 elsewhere)
``E``      GEMM kernels: shared memory of the smallest kernel of this tile (num_stages 1,
           BLOCK_SIZE_K 16) on this arch family, measured by the calibration (``epilogue``
           table of the file): it holds the epilogue's layout-conversion scratch, whose size
           Triton's swizzling optimiser decides and no closed form gives. Outside the table:
           ``BM*BN*c``, an upper bound of that scratch.
=========  ===================================================================

A file holds, besides the forms: ``status`` per arch family (``calibrated`` when every form of
the family matched at least 99% of its calibration points exactly, ``uncalibrated`` otherwise;
``derived`` for hand-derived forms), ``form_status`` per (family, kernel, dtype) when forms of
one family differ (the estimator uses it first), and ``fits`` with the calibration's figures.
Estimates of an ``uncalibrated`` form are re-checked exactly when Triton is installed
(``--estimator auto``), or reported as EST001 when it is not.

Nothing here imports triton or torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Callable, Mapping

from .. import versions
from ..formula import compile_formula
from ..kernels import registry
from ..kernels.family import FormVariablesError, KernelFamily
from ..kernels.spec import KernelSpec

VARIABLES = ("S", "W", "BM", "BN", "BK", "a", "b", "c", "GN", "GK", "SWAP", "DPE", "G", "DV", "E")
# the variables but the arch's epilogue scratch, E (the last: AnalyticModel.tile_values)
_TILE_VARIABLES = VARIABLES[:-1]
PER_ARCH = object()  # see AnalyticModel.tile_values

class ModelError(ValueError):
    """A model file is missing, malformed, or has no form for what was asked."""


@dataclass(frozen=True)
class Estimate:
    shared_bytes: int
    estimator: str  # "analytic" or "exact"
    arch: str
    status: str  # "exact", "calibrated", "derived" or "uncalibrated"
    detail: str = ""
    # The largest |form - compiler| seen when the form was calibrated (None: not recorded). An
    # uncalibrated form's verdict is certain when the estimate is further than this from a limit.
    max_error: int | None = None

    def certainly_over(self, limit: int) -> bool:
        return self.shared_bytes - (0 if self.status in ("exact", "calibrated") else (self.max_error or 0)) > limit

    def certainly_fits(self, limit: int) -> bool:
        return self.shared_bytes + (0 if self.status in ("exact", "calibrated") else (self.max_error or 0)) <= limit

    @property
    def usable(self) -> bool:
        """Whether a verdict may rest on this estimate: exact, calibrated, or with a known error bound."""
        return self.status != "uncalibrated" or self.max_error is not None

    def surely_fits(self, limit: int) -> bool:
        """``usable and certainly_fits(limit) and not certainly_over(limit)`` in one call (the lint
        engine's screen asks it of tens of thousands of estimates): the same margins as those."""
        if self.status in ("exact", "calibrated"):
            return self.shared_bytes <= limit
        error = self.max_error
        if error is None:
            if self.status == "uncalibrated":
                return False
            error = 0
        return self.shared_bytes + error <= limit and not self.shared_bytes - error > limit


class AnalyticModel:
    """Closed forms of one Triton release. Cheap to call; memoises per (spec, arch)."""

    def __init__(self, table: Mapping, source: str = "<memory>"):
        self.source = source
        try:
            self.triton_version: str = str(table["triton_version"])
            self.provenance: Mapping = table.get("provenance", {})
            self.arch_families: Mapping[str, str] = dict(table["arch_families"])
            self.operand_bytes: Mapping[str, Mapping[str, float]] = table["operand_bytes"]
            formulas = table["formulas"]
        except (KeyError, TypeError) as exc:
            raise ModelError(f"{source}: missing or malformed field {exc}") from None
        self.status: dict[str, str] = {}
        self.form_status: dict[tuple[str, str, str], str] = {}
        for family, kernels in (table.get("form_status") or {}).items():
            for kernel, per_dtype in kernels.items():
                for dtype, status in per_dtype.items():
                    self.form_status[(family, kernel, dtype)] = str(status)
        self.fits: Mapping = table.get("fits", {})
        self.epilogue = EpilogueTables(table.get("epilogue") or {})
        self._forms: dict[tuple[str, str, str], Callable] = {}
        self.texts: dict[tuple[str, str, str], str] = {}
        for family, kernels in formulas.items():
            self.status[family] = kernels.get("status", "uncalibrated")
            for kernel, form in kernels.items():
                if kernel == "status":
                    continue
                # A kernel maps to one formula, or to {dtype path or "default": formula}.
                per_dtype = form if isinstance(form, Mapping) else {"default": form}
                for dtype, text in per_dtype.items():
                    # compiled when first asked for (:meth:`_form`): a check reads a few of them
                    self.texts[(family, kernel, dtype)] = text
        self._memo: dict[tuple[KernelSpec, str], Estimate] = {}

    def family_of(self, arch: str) -> str | None:
        return self.arch_families.get(arch)

    def covers(self, spec: KernelSpec, arch: str) -> bool:
        family = self.arch_families.get(arch)
        return family is not None and self._form_key(family, spec) is not None

    def _form_key(self, family: str, spec: KernelSpec):
        kernel = registry.find(spec.kernel)
        dtypes = kernel.form_dtypes(spec) if kernel is not None else (spec.dtype,)
        for dtype in dtypes + ("default",):
            key = (family, spec.kernel, dtype)
            if key in self.texts:
                return key
        return None

    def estimate(self, spec: KernelSpec, arch: str) -> Estimate:
        memo_key = (spec, arch)
        hit = self._memo.get(memo_key)
        if hit is not None:
            return hit
        family = self.arch_families.get(arch)
        if family is None:
            raise ModelError(f"no arch family for {arch!r} in {self.source}")
        key = self._form_key(family, spec)
        if key is None:
            raise ModelError(f"no {family} form for kernel {spec.kernel!r} ({spec.dtype}) in {self.source}")
        value = self._form(key)(**self.variables(spec, family, arch))
        fit = self.fits.get(key[0], {}).get(key[1], {}).get(key[2], {}) if isinstance(self.fits, Mapping) else {}
        max_error = fit.get("max_error") if isinstance(fit, Mapping) else None
        est = Estimate(int(round(value)), "analytic", arch, self.status_of(key), self.texts[key],
                       int(max_error) if isinstance(max_error, (int, float)) else None)
        self._memo[memo_key] = est
        return est

    def _form(self, key: tuple[str, str, str]) -> Callable:
        """The compiled form of ``key`` (its text checked and compiled on first use, then kept)."""
        fn = self._forms.get(key)
        if fn is None:
            try:
                fn = self._forms[key] = compile_formula(self.texts[key], VARIABLES)
            except ValueError as exc:  # a FormulaError: the model's fault, said as load_model said it
                raise ModelError(f"cannot read shared-memory model {self.source}: {exc}") from None
        return fn

    def status_of(self, key: tuple[str, str, str]) -> str:
        """The status of one form: its own (``form_status``), else its family's."""
        status = self.form_status.get(key)
        if status is None:
            status = self.status.get(key[0], "uncalibrated")
        return status

    def form_key(self, spec: KernelSpec, arch: str) -> tuple[str, str, str] | None:
        """``(family, kernel, dtype)`` of the form that answers for ``spec`` on ``arch``."""
        family = self.arch_families.get(arch)
        return None if family is None else self._form_key(family, spec)

    def variables(self, spec: KernelSpec, family: str | None = None, arch: str | None = None) -> dict[str, float]:
        """The formula variables of ``spec`` (its kernel family's, :meth:`KernelFamily.form_variables`;
        ``E`` from the epilogue table of ``arch``, else of ``family``'s default arch)."""
        try:
            return registry.get(spec.kernel).form_variables(spec, self.operand_bytes, self.epilogue.lookup, family,
                                                            arch)
        except (FormVariablesError, registry.UnknownKernel) as exc:
            raise ModelError(f"{exc} in {self.source}") from None


    def tile_values(self, spec: KernelSpec):
        """``(values, epilogue question)``: :meth:`variables` of ``spec`` in the order of
        :data:`VARIABLES`, read once for every arch: all of them when the question is None, else
        all but the last, ``E``, which is ``epilogue.lookup(arch, family, *question)`` on an arch
        (:meth:`KernelFamily.tile_variables`); :data:`PER_ARCH` for a family whose variables are
        only asked per arch (it overrides ``form_variables``)."""
        fam = registry.find(spec.kernel)
        if fam is not None and type(fam).form_variables is not KernelFamily.form_variables:
            return PER_ARCH
        try:
            values, question = registry.get(spec.kernel).tile_variables(spec, self.operand_bytes)
        except (FormVariablesError, registry.UnknownKernel) as exc:
            raise ModelError(f"{exc} in {self.source}") from None
        return tuple([values[v] for v in (VARIABLES if question is None else _TILE_VARIABLES)]), question


class EpilogueTables:
    """The measured ``E`` per arch: ``{"axes": {"BM": [...], "BN": [...], "W": [...]},
    "archs": {arch: {"<c>": [[[bytes per W] per BN] per BM]}}, "family_default": {family:
    arch}, "path_arch": {arch: {dtype path: arch}}}``. An arch without a table uses its family's
    default arch; ``path_arch`` names, for a dtype path an arch lowers with another arch's MMA (the
    epilogue then converts that MMA's accumulator layout), the arch whose table it reads."""

    def __init__(self, data: Mapping):
        axes = data.get("axes", {})
        self._index = tuple({v: i for i, v in enumerate(axes.get(k, ()))} for k in ("BM", "BN", "W"))
        self._archs: dict[str, dict[int, list]] = {
            arch: {int(c): grid for c, grid in per_c.items()} for arch, per_c in (data.get("archs") or {}).items()}
        self._default: dict[str, str] = dict(data.get("family_default") or {})
        self._path_arch: dict[str, dict[str, str]] = {a: dict(per) for a, per in (data.get("path_arch") or {}).items()
                                                      if isinstance(per, Mapping)}  # besides its "note"
        self._looked_up: dict[tuple, int] = {}  # see lookup()

    def table_arch(self, arch: str | None, family: str | None, path: str | None = None) -> str | None:
        if path is not None and arch in self._path_arch:
            mapped = self._path_arch[arch].get(path)
            if mapped in self._archs:
                return mapped
        if arch in self._archs:
            return arch
        default = self._default.get(family or "")
        return default if default in self._archs else None

    def covers(self, arch: str | None, family: str | None, c: float, bm: int, bn: int, w: int,
               path: str | None = None) -> bool:
        t = self.table_arch(arch, family, path)
        ibm, ibn, iw = self._index
        return t is not None and int(c) in self._archs[t] and bm in ibm and bn in ibn and w in iw

    def lookup(self, arch: str | None, family: str | None, c: float, bm: int, bn: int, w: int,
               path: str | None = None) -> int:
        """The table's value, or the full tile ``bm*bn*c`` (an upper bound) outside it. ``path``:
        the dtype path (``int8_w8a8``), for ``path_arch``. Memoised (every form's answer asks; a
        check's tens of thousands of answers ask a few hundred distinct questions)."""
        key = (arch, family, c, bm, bn, w, path)
        hit = self._looked_up.get(key)
        if hit is None:
            hit = self._looked_up[key] = self._lookup(arch, family, c, bm, bn, w, path)
        return hit

    def _lookup(self, arch: str | None, family: str | None, c: float, bm: int, bn: int, w: int,
                path: str | None) -> int:
        if not self.covers(arch, family, c, bm, bn, w, path):
            return int(bm * bn * c)
        ibm, ibn, iw = self._index
        grid = self._archs[self.table_arch(arch, family, path)][int(c)]
        return int(grid[ibm[bm]][ibn[bn]][iw[w]])


def _model_files() -> dict[str, object]:
    folder = resources.files("tilefit") / "data" / "smem_model"
    out = {}
    for entry in folder.iterdir():
        name = entry.name
        if name.startswith("triton-") and name.endswith(".json"):
            out[name[len("triton-"):-len(".json")]] = entry
    return out


def user_model_files() -> dict[str, Path]:
    """Triton release -> the model ``tilefit calibrate smem`` wrote to the user data folder
    (``smem_model/triton-<major>.<minor>.json``, :mod:`tilefit.userdata`): read before the
    bundled model of that release."""
    from ..userdata import SMEM_MODEL, model_folder

    folder = model_folder(SMEM_MODEL)
    out: dict[str, Path] = {}
    if folder is None or not folder.is_dir():
        return out
    for entry in folder.iterdir():
        name = entry.name
        if name.startswith("triton-") and name.endswith(".json") and entry.is_file():
            out[name[len("triton-"):-len(".json")]] = entry
    return out


def available_versions() -> list[str]:
    return sorted(set(_model_files()) | set(user_model_files()), key=versions.parse)


def pick_version(wanted: str | None) -> str:
    """The model version for a Triton version: same major.minor, else the closest older one,
    else the oldest we have."""
    available = available_versions()
    if not available:
        raise ModelError("no shared-memory model files are installed")
    if wanted is None:
        return available[-1]
    want = versions.release(wanted, 2)
    older = [v for v in available if versions.release(v, 2) <= want]
    return older[-1] if older else available[0]


FORMAT_SHARED = 2


def kernel_forms_path(family, version: str) -> Path:
    """Where a kernel family keeps its closed forms for Triton ``version`` (``X.Y``)."""
    return Path(family.folder) / "smem" / f"triton-{version}.json"


def merge_model(shared: Mapping, kernel_docs: Mapping[str, Mapping]) -> dict:
    """The model of one Triton release as :class:`AnalyticModel` reads it: the shared file
    (arch families, operand bytes, epilogue tables, provenance, per-family status) with every
    kernel family's forms file (``formulas``/``form_status``/``fits`` per arch family and dtype)."""
    if "formulas" in shared:  # a whole model in one file (``calibrate smem --out``)
        return dict(shared)
    table = {k: v for k, v in shared.items() if k != "family_status"}
    table["format"] = 1
    formulas: dict[str, dict] = {}
    form_status: dict[str, dict] = {}
    fits: dict[str, dict] = {}
    for kernel, doc in kernel_docs.items():
        for family, per in (doc.get("formulas") or {}).items():
            formulas.setdefault(family, {})[kernel] = per
        for family, per in (doc.get("form_status") or {}).items():
            form_status.setdefault(family, {})[kernel] = per
        for family, per in (doc.get("fits") or {}).items():
            fits.setdefault(family, {})[kernel] = per
    for family, status in (shared.get("family_status") or {}).items():
        formulas.setdefault(family, {})["status"] = status
    table.update(formulas=formulas, form_status=form_status, fits=fits)
    return table


def _with_forms(table: Mapping, kernel_docs: Mapping[str, Mapping]) -> dict:
    """A whole model table with more kernel families' forms files laid in."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in table.items()}
    for kernel, doc in kernel_docs.items():
        for section in ("formulas", "form_status", "fits"):
            for family, per in (doc.get(section) or {}).items():
                out.setdefault(section, {}).setdefault(family, {})
                out[section][family] = dict(out[section][family], **{kernel: per})
    return out


def split_model(table: Mapping) -> tuple[dict, dict[str, dict]]:
    """The inverse of :func:`merge_model`: ``(shared file, {kernel: forms file})``."""
    shared = {k: v for k, v in table.items() if k not in ("formulas", "form_status", "fits")}
    shared["format"] = FORMAT_SHARED
    shared["family_status"] = {f: per["status"] for f, per in table.get("formulas", {}).items() if "status" in per}
    kernels: dict[str, dict] = {}
    prov = table.get("provenance") or {}
    for section in ("formulas", "form_status", "fits"):
        for family, per in (table.get(section) or {}).items():
            for kernel, value in per.items():
                if kernel == "status":
                    continue
                doc = kernels.setdefault(kernel, {
                    "format": FORMAT_SHARED, "kernel": kernel, "triton_version": table.get("triton_version"),
                    "provenance": {k: prov[k] for k in ("triton", "date", "command") if k in prov},
                    "formulas": {}, "form_status": {}, "fits": {}})
                doc[section][family] = value
    return shared, kernels


def model_table(version: str, prefer: str | None = None) -> dict:
    """The merged model table of Triton ``version`` (``X.Y``): the shared file of
    ``tilefit/data/smem_model`` and the forms of every registered kernel family that has them.
    A family calibrated for the release ``prefer`` (``X.Y``, the installed Triton when no shared
    file exists for it) contributes those forms instead of its ``version`` ones."""
    files = _model_files()
    if version not in files:
        raise ModelError(f"no shared-memory model for Triton {version}; have {', '.join(available_versions())}")
    return merge_model(json.loads(files[version].read_text()), _kernel_docs(version, prefer))


def _kernel_docs(version: str, prefer: str | None = None) -> dict[str, dict]:
    docs = {}
    for family in registry.families():
        path = kernel_forms_path(family, version)
        if prefer and prefer != version and kernel_forms_path(family, prefer).is_file():
            path = kernel_forms_path(family, prefer)
        if path.is_file():
            try:
                docs[family.name] = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ModelError(f"cannot read {path}: {exc}") from None
    return docs


def load_model(triton_version: str | None = None, path: str | None = None) -> AnalyticModel:
    """Load the model for ``triton_version`` (default: the installed Triton, else the newest), or
    the whole model in the file ``path``. Memoised per registered set of kernel families."""
    return _load_model(triton_version, path, registry.names())


def forget_models() -> None:
    """Drop the loaded models (after the calibration wrote new forms)."""
    _load_model.cache_clear()


@lru_cache(maxsize=None)
def _load_model(triton_version: str | None, path: str | None, _families: tuple[str, ...]) -> AnalyticModel:
    if path is not None:
        p = Path(path)
        try:
            table = json.loads(p.read_text())
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read shared-memory model {p}: {exc}") from None
        if isinstance(table, dict) and "formulas" not in table:  # a shared file: add the families' forms
            table = merge_model(table, _kernel_docs(str(table.get("triton_version"))))
        elif isinstance(table, dict) and isinstance(table.get("formulas"), dict):
            # a whole model (the user's calibration): families it lacks (registered later, from
            # outside the package) bring their own forms
            have = {k for per in table["formulas"].values() if isinstance(per, dict) for k in per}
            extra = {k: d for k, d in _kernel_docs(str(table.get("triton_version"))).items() if k not in have}
            if extra:
                table = _with_forms(table, extra)
        return AnalyticModel(table, str(p))
    wanted = triton_version or versions.installed_triton()
    version = pick_version(wanted)
    user = user_model_files().get(version)
    if user is not None:  # the user's calibration of this release replaces the bundled model
        return _load_model(None, str(user), _families)
    prefer = versions.major_minor(wanted) if wanted else None
    return AnalyticModel(model_table(version, prefer), f"tilefit/data/smem_model/triton-{version}.json")
