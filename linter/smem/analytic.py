"""The analytic shared-memory model: closed forms per (arch family, kernel), stored as data.

The forms live in ``tilefit/data/smem_model/triton-<major>.<minor>.json``, one file per Triton
release, each with its provenance; ``tilefit calibrate smem`` regenerates them from exact
compiles. A form is a formula over these variables:

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
from ..dtypes import element_bytes, triton_type
from ..formula import compile_formula
from .spec import KernelSpec

VARIABLES = ("S", "W", "BM", "BN", "BK", "a", "b", "c", "GN", "GK", "SWAP", "DPE", "G", "DV", "E")

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
                    self._forms[(family, kernel, dtype)] = compile_formula(text, VARIABLES)
                    self.texts[(family, kernel, dtype)] = text
        self._memo: dict[tuple[KernelSpec, str], Estimate] = {}

    def family_of(self, arch: str) -> str | None:
        return self.arch_families.get(arch)

    def covers(self, spec: KernelSpec, arch: str) -> bool:
        family = self.arch_families.get(arch)
        return family is not None and self._form_key(family, spec) is not None

    def _form_key(self, family: str, spec: KernelSpec):
        if spec.kernel == "mla_decode":
            # MLA decode's forms are keyed by the KV cache: fp8 (any fp8 format) or 16-bit
            kv = triton_type(spec.kv_dtype or spec.dtype)
            candidates = ("fp8",) if kv.startswith("fp8") else (kv, "bf16")
            for dtype in candidates + ("default",):
                key = (family, spec.kernel, dtype)
                if key in self._forms:
                    return key
            return None
        for dtype in (spec.kv_dtype or spec.dtype, spec.dtype, "default"):
            key = (family, spec.kernel, dtype)
            if key in self._forms:
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
        value = self._forms[key](**self.variables(spec, family, arch))
        fit = self.fits.get(key[0], {}).get(key[1], {}).get(key[2], {}) if isinstance(self.fits, Mapping) else {}
        max_error = fit.get("max_error") if isinstance(fit, Mapping) else None
        est = Estimate(int(round(value)), "analytic", arch, self.status_of(key), self.texts[key],
                       int(max_error) if isinstance(max_error, (int, float)) else None)
        self._memo[memo_key] = est
        return est

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
        """The formula variables of ``spec`` (``E`` from the epilogue table of ``arch``, else of
        ``family``'s default arch)."""
        tile = spec.tile_dict
        if spec.kernel == "mla_decode":
            from .launch import mla_block_sizes

            kv = element_bytes(spec.kv_dtype or "bf16", 2)
            q = element_bytes(spec.dtype, 2)
            p = spec.problem_dict
            blocks = mla_block_sizes(p.get("Lk", 576), p.get("Lv", 512))
            return dict(S=spec.num_stages, W=spec.num_warps, BM=tile.get("BLOCK_H", 16),
                        BN=tile.get("BLOCK_N", 32), BK=tile.get("BLOCK_DMODEL", blocks["BLOCK_DMODEL"]), a=q,
                        b=kv, c=4, GN=0, GK=0, SWAP=0, DPE=tile.get("BLOCK_DPE", blocks["BLOCK_DPE"]), G=0,
                        DV=tile.get("BLOCK_DV", blocks["BLOCK_DV"]), E=0)
        bytes_ = self.operand_bytes.get(spec.dtype)
        if bytes_ is None:
            raise ModelError(f"no operand sizes for dtype path {spec.dtype!r} in {self.source}")
        gn, gk = spec.block_shape if spec.block_shape else (0, 0)
        group = 0
        if spec.kernel == "fused_moe_wna16":
            group = int(gk) if gk else int(dict(spec.extra).get("group_size", 128))
            if group <= 0:  # channel-wise: one group spans K
                group = spec.problem_dict.get("K", 4096)
            gn, gk = 0, 0
        bm, bn, c = tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"], bytes_["c"]
        return dict(S=spec.num_stages, W=spec.num_warps, BM=bm, BN=bn, BK=tile["BLOCK_SIZE_K"], a=bytes_["a"],
                    b=bytes_["b"], c=c, GN=gn, GK=gk, SWAP=1 if spec.swap_ab else 0, DPE=0, G=group, DV=0,
                    E=self.epilogue.lookup(arch, family, c, bm, bn, spec.num_warps))


class EpilogueTables:
    """The measured ``E`` per arch: ``{"axes": {"BM": [...], "BN": [...], "W": [...]},
    "archs": {arch: {"<c>": [[[bytes per W] per BN] per BM]}}, "family_default": {family:
    arch}}``. An arch without a table uses its family's default arch."""

    def __init__(self, data: Mapping):
        axes = data.get("axes", {})
        self._index = tuple({v: i for i, v in enumerate(axes.get(k, ()))} for k in ("BM", "BN", "W"))
        self._archs: dict[str, dict[int, list]] = {
            arch: {int(c): grid for c, grid in per_c.items()} for arch, per_c in (data.get("archs") or {}).items()}
        self._default: dict[str, str] = dict(data.get("family_default") or {})

    def table_arch(self, arch: str | None, family: str | None) -> str | None:
        if arch in self._archs:
            return arch
        default = self._default.get(family or "")
        return default if default in self._archs else None

    def covers(self, arch: str | None, family: str | None, c: float, bm: int, bn: int, w: int) -> bool:
        t = self.table_arch(arch, family)
        ibm, ibn, iw = self._index
        return t is not None and int(c) in self._archs[t] and bm in ibm and bn in ibn and w in iw

    def lookup(self, arch: str | None, family: str | None, c: float, bm: int, bn: int, w: int) -> int:
        """The table's value, or the full tile ``bm*bn*c`` (an upper bound) outside it."""
        if not self.covers(arch, family, c, bm, bn, w):
            return int(bm * bn * c)
        ibm, ibn, iw = self._index
        grid = self._archs[self.table_arch(arch, family)][int(c)]
        return int(grid[ibm[bm]][ibn[bn]][iw[w]])


def _model_files() -> dict[str, object]:
    folder = resources.files("tilefit") / "data" / "smem_model"
    out = {}
    for entry in folder.iterdir():
        name = entry.name
        if name.startswith("triton-") and name.endswith(".json"):
            out[name[len("triton-"):-len(".json")]] = entry
    return out


def available_versions() -> list[str]:
    return sorted(_model_files(), key=versions.parse)


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


@lru_cache(maxsize=None)
def load_model(triton_version: str | None = None, path: str | None = None) -> AnalyticModel:
    """Load the model for ``triton_version`` (default: the installed Triton, else the newest)."""
    if path is not None:
        p = Path(path)
        try:
            return AnalyticModel(json.loads(p.read_text()), str(p))
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read shared-memory model {p}: {exc}") from None
    version = pick_version(triton_version or versions.installed_triton())
    entry = _model_files()[version]
    return AnalyticModel(json.loads(entry.read_text()), f"tilefit/data/smem_model/triton-{version}.json")
