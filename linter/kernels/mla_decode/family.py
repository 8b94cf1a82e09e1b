"""mla_decode: MLA grouped decode attention, stage 1 (bf16/fp16 or fp8 latent KV cache).

The launch plan follows vLLM's ``_decode_grouped_att_m_fwd``; the engines fix the launch
parameters in code (the engine profiles' ``mla_decode.launch``), so no config table launches it.
A spec's dtype is the query's element type, ``kv_dtype`` the cache's; the closed forms are
keyed by the cache (fp8 or 16-bit) and are sums of the stage's tiles (``family.json``'s
calibration library). Nothing here imports triton.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from tilefit.dtypes import element_bytes, is_fp8, triton_type
from tilefit.kernels.family import KernelFamily
from tilefit.kernels.plan import Arg, LaunchPlan, const, extra_of, int_, next_pow2, options, ptr
from tilefit.kernels.spec import KernelSpec, make_spec


def block_sizes(lk: int, lv: int) -> dict[str, int]:
    """BLOCK_DMODEL / BLOCK_DPE / BLOCK_DV the launcher derives from the head sizes."""
    if lk == 576:
        dmodel, dpe = 512, 64
    elif lk == 288:
        dmodel, dpe = 256, 32
    else:
        dmodel, dpe = next_pow2(lk), 0
    return {"BLOCK_DMODEL": dmodel, "BLOCK_DPE": dpe, "BLOCK_DV": next_pow2(lv)}


class Family(KernelFamily):
    def launch_plan(self, spec: KernelSpec) -> LaunchPlan:
        tile = spec.tile_dict
        p = spec.problem_dict
        lk, lv = p.get("Lk", 576), p.get("Lv", 512)
        blocks = block_sizes(lk, lv)
        for name in ("BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV"):
            blocks[name] = tile.get(name, blocks[name])
        block_n, block_h = tile.get("BLOCK_N", 32), tile.get("BLOCK_H", 16)
        heads = p.get("num_heads", 16)
        kv_heads = p.get("num_kv_heads", 1)
        splits = p.get("NUM_KV_SPLITS", 4)
        page = p.get("PAGE_SIZE", 1)
        max_pages = p.get("max_pages", 512)
        q_ty = triton_type(spec.dtype if spec.dtype in ("bf16", "fp16", "fp32") else "bf16")
        kv_ty = triton_type(spec.kv_dtype or q_ty, auto=q_ty)
        logit_cap = float(extra_of(spec).get("logit_cap", 0.0))
        kv_stride = kv_heads * lk  # K/V buffer (tokens, kv_heads, Lk); V is a view of its first Lv dims
        args = [
            ptr("Q", q_ty), ptr("K_Buffer", kv_ty), ptr("V_Buffer", kv_ty),
            Arg("sm_scale", "float", 1.0 / (lk ** 0.5)),
            ptr("Req_to_tokens", "i32"), ptr("B_Seqlen", "i32"), ptr("Att_Out", "fp32"),
            ptr("K_scale", "fp32"),
            int_("stride_req_to_tokens_b", max_pages),
            int_("stride_qbs", heads * lk), int_("stride_qh", lk),
            int_("stride_buf_kbs", kv_stride), int_("stride_buf_kh", lk),
            int_("stride_buf_vbs", kv_stride), int_("stride_buf_vh", lk),
            # Att_Out (batch, heads, splits, Lv + 1)
            int_("stride_mid_ob", heads * splits * (lv + 1)), int_("stride_mid_oh", splits * (lv + 1)),
            int_("stride_mid_os", lv + 1),
            const("kv_group_num", heads // kv_heads), const("q_head_num", heads),
            const("BLOCK_DMODEL", blocks["BLOCK_DMODEL"]), const("BLOCK_DPE", blocks["BLOCK_DPE"]),
            const("BLOCK_DV", blocks["BLOCK_DV"]), const("BLOCK_N", block_n), const("BLOCK_H", block_h),
            const("NUM_KV_SPLITS", splits), const("PAGE_SIZE", page),
            const("logit_cap", logit_cap), const("Lk", lk), const("Lv", lv),
            const("USE_FP8", kv_ty.startswith("fp8")),
        ]
        mod, fn = self.reference
        return LaunchPlan("mla_decode", mod, fn, tuple(args), spec.num_warps, spec.num_stages, options(spec))

    # -- the analytic model ----------------------------------------------------------------------
    def form_dtypes(self, spec: KernelSpec) -> tuple[str, ...]:
        """Keyed by the KV cache: fp8 (any fp8 format) or its 16-bit type (else bf16's form)."""
        kv = triton_type(spec.kv_dtype or spec.dtype)
        return ("fp8",) if kv.startswith("fp8") else (kv, "bf16")

    def tile_variables(self, spec: KernelSpec, operand_bytes: Mapping) -> tuple[dict[str, float], None]:
        """No arch's epilogue table: ``E`` is 0."""
        tile = spec.tile_dict
        kv = element_bytes(spec.kv_dtype or "bf16", 2)
        q = element_bytes(spec.dtype, 2)
        p = spec.problem_dict
        blocks = block_sizes(p.get("Lk", 576), p.get("Lv", 512))
        return dict(S=spec.num_stages, W=spec.num_warps, BM=tile.get("BLOCK_H", 16),
                    BN=tile.get("BLOCK_N", 32), BK=tile.get("BLOCK_DMODEL", blocks["BLOCK_DMODEL"]), a=q,
                    b=kv, c=4, GN=0, GK=0, SWAP=0, DPE=tile.get("BLOCK_DPE", blocks["BLOCK_DPE"]), G=0,
                    DV=tile.get("BLOCK_DV", blocks["BLOCK_DV"]), E=0), None

    # -- the calibration ------------------------------------------------------------------------
    def calibration_points(self) -> list[tuple[tuple[int, ...], int, int]]:
        cal = self.calibration
        heads = [tuple(h) for h in cal["heads"]]
        out = []
        for (lk, lv), bn, bh, w, s in itertools.product(heads, cal["BLOCK_N"], cal["BLOCK_H"],
                                                        cal.get("warps", (4, 8)), cal["stages"]):
            out.append(((bn, bh, lk, lv), w, s))
        return out

    def engine_calibration_points(self, engine: str | None = None) -> list[tuple[tuple[int, ...], int, int]]:
        """The tiles ``engine`` launches (``calibration.engine_space``): the engines hard-code the
        tile, so the engine calibration proves its forms there."""
        space = (self.calibration.get("engine_space") or {}).get(engine or "")
        if not space:
            return self.calibration_points()
        return [((bn, bh, lk, lv), w, s) for (lk, lv), bn, bh, w, s in itertools.product(
            [tuple(h) for h in space["heads"]], space["BLOCK_N"], space["BLOCK_H"], space["warps"], space["stages"])]

    def calibration_strata(self) -> list:
        return [lambda p: p[0][0], lambda p: p[0][1], lambda p: p[0][2:], lambda p: p[1], lambda p: p[2]]

    def point_spec(self, path, tile: Sequence[int], num_warps: int, num_stages: int) -> KernelSpec:
        block_n, block_h, lk, lv = tile
        blocks = block_sizes(lk, lv)
        t = {"BLOCK_N": block_n, "BLOCK_H": block_h, "BLOCK_DMODEL": blocks["BLOCK_DMODEL"],
             "BLOCK_DPE": blocks["BLOCK_DPE"], "BLOCK_DV": blocks["BLOCK_DV"]}
        return make_spec(self.name, "bf16", t, num_warps=num_warps, num_stages=num_stages,
                         kv_dtype=path.kv_dtype, problem={"Lk": lk, "Lv": lv})

    def spec_point(self, spec: KernelSpec) -> tuple[dict, tuple[int, ...]] | None:
        """The calibration point of a spec (the inverse of :meth:`point_spec`): a bf16 query, the
        head split of ``block_sizes``; None for anything the calibration's points cannot be."""
        t, p = spec.tile_dict, spec.problem_dict
        lk, lv, kv = p.get("Lk"), p.get("Lv"), triton_type(spec.kv_dtype or "bf16")
        kv = "fp8" if kv.startswith("fp8") else kv  # the calibration's fp8 cache (every fp8 format: 1 byte)
        if spec.dtype != "bf16" or lk is None or lv is None or "BLOCK_N" not in t or "BLOCK_H" not in t:
            return None
        blocks = block_sizes(lk, lv)
        if any(k in t and t[k] != v for k, v in blocks.items()):
            return None
        return {"kernel": self.name, "dtype": kv, "kv_dtype": kv}, (t["BLOCK_N"], t["BLOCK_H"], lk, lv)

    def ring_lower_bound(self, path, tile: Sequence[int], num_stages: int) -> int:
        block_n, block_h, lk, _ = tile
        return block_n * lk * 2

    def form_dtype(self, path) -> str:
        return path.kv_dtype

    # -- the probe ------------------------------------------------------------------------------
    def probe_spec(self, *, dtype: str, kv_dtype: str | None, tile: Mapping[str, int], group: int,
                   num_warps: int, num_stages: int, quant: str | None, block_shape, swap_ab: bool,
                   heads: tuple[int, int]) -> KernelSpec:
        blocks = block_sizes(*heads)
        return make_spec(self.name, dtype, {**tile, **blocks}, num_warps=num_warps, num_stages=num_stages,
                         kv_dtype=kv_dtype, problem={"Lk": heads[0], "Lv": heads[1]})

    def title(self, spec: KernelSpec) -> str:
        t = spec.tile_dict
        p = spec.problem_dict
        return (f"mla_decode (query {spec.dtype}), Lk={p.get('Lk', 576)} Lv={p.get('Lv', 512)}, "
                f"BLOCK_N={t.get('BLOCK_N')} BLOCK_H={t.get('BLOCK_H')}")

    def describe(self, spec: KernelSpec) -> str:
        t = spec.tile_dict
        return f"BLOCK_N={t.get('BLOCK_N')} BLOCK_H={t.get('BLOCK_H')} num_stages={spec.num_stages}"

    def launch_case(self, spec: KernelSpec) -> dict:
        t = spec.tile_dict
        p = spec.problem_dict
        return {"kernel": self.name, "dtype": spec.dtype, "kv_dtype": "fp8" if is_fp8(spec.kv_dtype) else "bf16",
                "BLOCK_N": t.get("BLOCK_N", 32), "BLOCK_H": t.get("BLOCK_H", 16),
                "num_stages": spec.num_stages, "num_warps": spec.num_warps, "Lk": p.get("Lk", 576),
                "Lv": p.get("Lv", 512), "heads": 16, "seq_lens": [64, 96]}

    # -- Python call sites -----------------------------------------------------------------------
    def callsite_spec(self, given: Mapping[str, Any], dtype_of, data_pointers: Sequence[str], num_warps: int,
                      num_stages: int) -> KernelSpec | None:
        """A launch of the grouped decode kernel (ours or the engines'): the KV cache's dtype is
        the type of its non-query data pointers."""
        tile = {k: int(given[k]) for k in ("BLOCK_N", "BLOCK_H", "BLOCK_DMODEL", "BLOCK_DPE", "BLOCK_DV")
                if k in given}
        kv = None
        for p in data_pointers:
            if p.lower() not in ("q",):
                kv = dtype_of(p) or kv
        return make_spec(self.name, "bf16", tile, num_warps=num_warps, num_stages=num_stages, kv_dtype=kv)

    # -- GPU validation --------------------------------------------------------------------------
    def validation_specs(self) -> list[KernelSpec]:
        specs = []
        for kv in ("bf16", "fp8e4nv"):
            for stages in (1, 2, 3):
                specs.append(make_spec(self.name, "bf16", dict(BLOCK_N=32, BLOCK_H=16), num_warps=4,
                                       num_stages=stages, kv_dtype=kv,
                                       problem=dict(num_heads=16, Lk=576, Lv=512, PAGE_SIZE=16)))
        return specs
