"""The behaviour GEMM-shaped kernel families share (``class Family(GemmFamily)``).

A GEMM family's tile is ``BLOCK_SIZE_M/N/K`` (and ``GROUP_SIZE_M``), its operands are typed by a
dtype path (tilefit.dtypes), and its closed forms are ``max(loop, epilogue)`` over the variables
of :func:`GemmFamily.tile_variables` and the arch's epilogue scratch ``E``. A new GEMM family
writes only ``launch_plan``; the rest has defaults here, which a family overrides where its
kernel differs (the wNa16 kernel's group size).

Nothing here imports triton or torch.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..dtypes import operand_bytes
from .family import FormVariablesError, KernelFamily
from .spec import KernelSpec, make_spec

# the GEMM tile space the calibration samples (the engines' tuning space, 16..256 in powers of two)
GEMM_BM = (16, 32, 64, 128, 256)
GEMM_BN = (32, 64, 128, 256)
GEMM_BK = (32, 64, 128, 256)
WARPS = (4, 8)
STAGES = (1, 2, 3, 4, 5)

TILE_KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")


def _axis(cal: Mapping[str, Any], key: str, default: Sequence[int]) -> tuple[int, ...]:
    return tuple(cal.get(key, default))


class GemmFamily(KernelFamily):
    """Defaults for kernels tiled ``BLOCK_SIZE_M x BLOCK_SIZE_N x BLOCK_SIZE_K``."""

    def extra_sources(self) -> Sequence[Path]:
        return (Path(__file__).resolve(),)

    # -- the analytic model ----------------------------------------------------------------------
    def form_dtypes(self, spec: KernelSpec) -> tuple[str, ...]:
        return (spec.kv_dtype or spec.dtype, spec.dtype)

    def form_group(self, spec: KernelSpec) -> tuple[int, int, int]:
        """``(GN, GK, G)``: the block-quantisation block and the weight group size of ``spec``."""
        gn, gk = spec.block_shape if spec.block_shape else (0, 0)
        return gn, gk, 0

    def tile_variables(self, spec: KernelSpec, operand_bytes: Mapping) -> tuple[dict[str, float], tuple]:
        tile = spec.tile_dict
        bytes_ = operand_bytes.get(spec.dtype)
        if bytes_ is None:
            raise FormVariablesError(f"no operand sizes for dtype path {spec.dtype!r}")
        gn, gk, group = self.form_group(spec)
        bm, bn, c, w = tile["BLOCK_SIZE_M"], tile["BLOCK_SIZE_N"], bytes_["c"], spec.num_warps
        # a dict display, not dict(**kwargs); E is the epilogue table's answer to (c, bm, bn, w, path)
        return ({"S": spec.num_stages, "W": w, "BM": bm, "BN": bn, "BK": tile["BLOCK_SIZE_K"], "a": bytes_["a"],
                 "b": bytes_["b"], "c": c, "GN": gn, "GK": gk, "SWAP": 1 if spec.swap_ab else 0, "DPE": 0, "G": group,
                 "DV": 0}, (c, bm, bn, w, spec.dtype))

    # -- the calibration ------------------------------------------------------------------------
    def calibration_points(self) -> list[tuple[tuple[int, ...], int, int]]:
        cal = self.calibration
        axes = (_axis(cal, "BM", GEMM_BM), _axis(cal, "BN", GEMM_BN), _axis(cal, "BK", GEMM_BK))
        return [((bm, bn, bk), w, s) for bm, bn, bk, w, s in
                itertools.product(*axes, _axis(cal, "warps", WARPS), _axis(cal, "stages", STAGES))]

    def calibration_strata(self) -> list:
        return [lambda p: p[0][0], lambda p: p[0][1], lambda p: p[0][2], lambda p: p[1], lambda p: p[2]]

    def point_spec(self, path, tile: Sequence[int], num_warps: int, num_stages: int) -> KernelSpec:
        bm, bn, bk = tile
        t = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 1}
        tma = getattr(path, "tma", None)
        return make_spec(self.name, path.dtype, t, num_warps=num_warps, num_stages=num_stages,
                         quant=path.quant, block_shape=path.block_shape, swap_ab=path.swap_ab,
                         extra={"tma": tma} if tma else None)

    def spec_point(self, spec: KernelSpec) -> tuple[dict, tuple[int, ...]] | None:
        extra = dict(spec.extra)
        tma = extra.pop("tma", None)
        if extra or spec.problem:
            return None
        t = spec.tile_dict
        path = {"kernel": self.name, "dtype": spec.dtype, "quant": spec.quant,
                "block_shape": list(spec.block_shape) if spec.block_shape else None, "swap_ab": bool(spec.swap_ab)}
        if tma:
            path["tma"] = tma
        return path, (t["BLOCK_SIZE_M"], t["BLOCK_SIZE_N"], t["BLOCK_SIZE_K"])

    def ring_lower_bound(self, path, tile: Sequence[int], num_stages: int) -> int:
        bm, bn, bk = tile
        a, b, _ = operand_bytes(path.dtype)
        e = max(a, b)  # the wider operand's bytes
        return max(num_stages - 1, 1) * (bm + bn) * bk * e // 2

    # -- the probe ------------------------------------------------------------------------------
    def probe_spec(self, *, dtype: str, kv_dtype: str | None, tile: Mapping[str, int], group: int,
                   num_warps: int, num_stages: int, quant: str | None, block_shape, swap_ab: bool,
                   heads: tuple[int, int]) -> KernelSpec:
        q = self.data.get("quant") or {}
        if quant is None:
            quant, block_shape = self.default_quant(dtype, block_shape)
        elif block_shape is None and quant == "block":
            block_shape = tuple(q["block_shape"]) if q.get("mode") in (None, "block") and q.get("block_shape") \
                else (128, 128)
        elif block_shape is None and quant == "group" and q.get("mode") == "group":
            block_shape = tuple(q["block_shape"])
        return make_spec(self.name, dtype, {**tile, "GROUP_SIZE_M": group}, num_warps=num_warps,
                         num_stages=num_stages, quant=quant,
                         block_shape=block_shape if quant in ("block", "group") else None, swap_ab=swap_ab)

    def title(self, spec: KernelSpec) -> str:
        t = spec.tile_dict
        bs = f" block {spec.block_shape[0]}x{spec.block_shape[1]}" if spec.block_shape and spec.quant == "block" \
            else f" group {spec.block_shape[1]}" if spec.block_shape and spec.quant == "group" else ""
        quant = spec.quant if spec.quant != "none" and not bs else ""  # "block 128x128" names it once
        return (f"{spec.kernel} {spec.dtype}{(' ' + quant) if quant else ''}{bs}"
                f"{' swap_ab' if spec.swap_ab else ''}, BLOCK {t['BLOCK_SIZE_M']}x{t['BLOCK_SIZE_N']}x"
                f"{t['BLOCK_SIZE_K']}")

    def describe(self, spec: KernelSpec) -> str:
        t = spec.tile_dict
        return (f"BLOCK {t['BLOCK_SIZE_M']}x{t['BLOCK_SIZE_N']}x{t['BLOCK_SIZE_K']}, "
                f"num_warps={spec.num_warps}, num_stages={spec.num_stages}")

    def launch_case(self, spec: KernelSpec) -> dict:
        t = spec.tile_dict
        case = {"kernel": spec.kernel, "dtype": spec.dtype, "quant": spec.quant, "BM": t["BLOCK_SIZE_M"],
                "BN": t["BLOCK_SIZE_N"], "BK": t["BLOCK_SIZE_K"], "GROUP_SIZE_M": t.get("GROUP_SIZE_M", 1),
                "num_warps": spec.num_warps, "num_stages": spec.num_stages, "M": 64, "E": 4, "N": 512, "K": 1024,
                "top_k": 2, "swap_ab": spec.swap_ab}
        if spec.block_shape:
            case["block_shape"] = list(spec.block_shape)
        return case

    # -- config tables ---------------------------------------------------------------------------
    def table_variants(self, meta, tile: Mapping[str, int], num_warps: int, num_stages: int, arch: str,
                       engine: str | None):
        """One kernel: the file name's dtype path with its default quantisation."""
        from ..dtypes import path_of_file_dtype
        from .spec import Variant

        path = path_of_file_dtype(meta.dtype)
        if path is None or (self.dtypes and path not in self.dtypes):
            return ()
        quant, block = self.default_quant(path, meta.block_shape)
        return (Variant("", make_spec(self.name, path, tile, num_warps=num_warps, num_stages=num_stages,
                                      quant=quant, block_shape=block if quant in ("block", "group") else None)),)
