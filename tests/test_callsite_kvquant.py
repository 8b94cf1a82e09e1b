"""Quantised KV-cache presets as scenario variants (issue 18.4): vLLM 0.33.0's TurboQuant
launchers (``--kv-cache-dtype turboquant_*``) take the preset's bit widths as parameters without
defaults (``mse_bits``, ``key_packed_size``, ``value_quant_bits``) and the fp8-key flag as a
parameter defaulting to False. A scenario with fact ``kv_quant`` judges them once per preset
(labelled ``kv cache NAME``), with what TurboQuantConfig derives for the scenario's head size; a
scenario without presets has none of those values (the plain cache never runs these kernels).
The fixture is our own code in the shape of those launchers."""

from __future__ import annotations

import pytest

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import ScenarioError, from_facts, kv_quant_values, resolve, with_roles
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, branches

SOURCE = '''import math
import triton
import triton.language as tl


@triton.jit
def tq_decode(q_ptr, kv_ptr, out_ptr, HEAD_DIM: tl.constexpr, MSE_BITS: tl.constexpr, MSE_BYTES: tl.constexpr,
              KPS: tl.constexpr, VQB: tl.constexpr, N_CENTROIDS: tl.constexpr, KEY_FP8: tl.constexpr,
              NORM_CORRECTION: tl.constexpr, ATTN_SCALE: tl.constexpr, BLOCK_D: tl.constexpr):
    offs = tl.arange(0, BLOCK_D)
    tl.store(out_ptr + offs, tl.load(q_ptr + offs) * ATTN_SCALE)


@triton.jit
def tq_store_mse(kv_ptr, MSE_BITS: tl.constexpr, KPS: tl.constexpr, BLOCK_D: tl.constexpr):
    tl.store(kv_ptr + tl.arange(0, BLOCK_D), 0)


@triton.jit
def plain_copy(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), 0)


def tq_decode_attention(query, kv_cache, centroids, out, scale: float, mse_bits: int, key_packed_size: int,
                        value_quant_bits: int, key_fp8: bool = False, norm_correction: bool = False):
    B, Hq, D = query.shape
    tq_decode[(B, Hq)](query, kv_cache, out, HEAD_DIM=D, MSE_BITS=mse_bits, MSE_BYTES=math.ceil(D * mse_bits / 8),
                       KPS=key_packed_size, VQB=value_quant_bits, N_CENTROIDS=int(centroids.numel()),
                       KEY_FP8=1 if key_fp8 else 0, NORM_CORRECTION=1 if norm_correction else 0,
                       ATTN_SCALE=scale, BLOCK_D=triton.next_power_of_2(D), num_warps=1, num_stages=1)


def tq_store(key, kv_cache, mse_bits: int, key_packed_size: int, key_fp8: bool = False):
    D = key.shape[-1]
    if not key_fp8:
        tq_store_mse[(1,)](kv_cache, MSE_BITS=mse_bits, KPS=key_packed_size, BLOCK_D=triton.next_power_of_2(D))


def copy(x):
    plain_copy[(1,)](x, BLOCK=128)
'''


def _sites(tmp_path, names):
    path = tmp_path / "tq_attention.py"
    path.write_text(SOURCE)
    return build_scenario_sites(Project.scan([str(path)]), resolve(names), "cuda", frozenset({120}))


def _values(site, name):
    return {(inst.label, v.value if isinstance(v, Lit) else None)
            for inst in site.instances for _, v in branches(inst.value(name))}


def test_each_preset_is_a_labelled_variant_with_the_configs_widths(tmp_path):
    sites = _sites(tmp_path, ["llama-gqa-128"])
    (decode,) = [s for s in sites.launches if s.kernel.name == "tq_decode"]
    presets = {"turboquant_k8v4": (0, 128, 4, 16, 1, 0), "turboquant_4bit_nc": (4, 66, 4, 16, 0, 1),
               "turboquant_k3v4_nc": (3, 50, 4, 8, 0, 1), "turboquant_3bit_nc": (3, 50, 3, 8, 0, 1)}
    for preset, (mse, kps, vqb, cents, fp8, nc) in presets.items():
        mine = [i for i in decode.instances if f"(kv cache {preset})" in i.label]
        assert mine, (preset, [i.label for i in decode.instances])
        for inst in mine:
            got = tuple(inst.value(n).value for n in ("MSE_BITS", "KPS", "VQB", "N_CENTROIDS", "KEY_FP8",
                                                      "NORM_CORRECTION"))
            assert got == (mse, kps, vqb, cents, fp8, nc), (preset, got)
            assert inst.value("MSE_BYTES").value == -(-128 * mse // 8)
            assert inst.value("ATTN_SCALE").value == pytest.approx(128 ** -0.5)
            assert inst.value("BLOCK_D").value == 128
    # the plain cache gives none of the preset's values: every instance is a preset's
    assert all("kv cache turboquant_" in i.label for i in decode.instances)


def test_the_fp8_key_preset_does_not_take_the_mse_store(tmp_path):
    sites = _sites(tmp_path, ["qwen-gqa-64"])
    (store,) = [s for s in sites.launches if s.kernel.name == "tq_store_mse"]
    labels = {i.label for i in store.instances}
    assert not any("turboquant_k8v4" in lab for lab in labels), labels
    assert _values(store, "KPS") == {(lab, 34) for lab in labels if "4bit" in lab} | \
        {(lab, 26) for lab in labels if "k3v4" in lab or "3bit" in lab}  # ceil(64 * bits / 8) + 2


def test_a_launch_that_reads_no_preset_value_is_judged_once(tmp_path):
    sites = _sites(tmp_path, ["llama-gqa-128"])
    (copy,) = [s for s in sites.launches if s.kernel.name == "plain_copy"]
    assert [i.label for i in copy.instances] == [""]


def test_a_scenario_without_presets_has_no_preset_values(tmp_path):
    sites = _sites(tmp_path, ["mixtral-8x7b"])
    (decode,) = [s for s in sites.launches if s.kernel.name == "tq_decode"]
    kps = [v for i in decode.instances for _, v in branches(i.value("KPS"))]
    assert kps and not any(isinstance(v, Lit) for v in kps)
    assert all("no model dimension key_packed_size" in v.reason for v in kps), kps


def test_presets_are_checked_and_follow_the_head_size():
    with pytest.raises(ScenarioError, match="unknown KV-cache preset 'turboquant_9bit'"):
        with_roles([from_facts("x", {"heads": 8, "kv_heads": 8, "head_dim": 128, "kv_quant": ["turboquant_9bit"]})])
    values, dims = kv_quant_values("turboquant_k3v4_nc", 256)  # ceil(256 * 3 / 8) + 2, ceil(256 * 4 / 8) + 4
    assert dims["key_packed_size"] == 98 and dims["value_packed_size"] == 132 and dims["mse_bits"] == 3
    assert values == {"key_fp8": False, "norm_correction": True, "centroids.numel()": 8}


def test_a_preset_rebuilds_only_the_launches_that_read_its_values(tmp_path, monkeypatch):
    """A MoE launch reading its quantisation scheme (``self.quant_config.use_fp8_w8a8``) is not
    built again for each KV-cache preset: only launches reading a preset's launch names are."""
    from tilefit.callsites import sites as sites_module
    from tilefit.callsites.scenarios import from_table

    moe = ('\n\n@triton.jit\ndef moe_kernel(a_ptr, use_fp8_w8a8: tl.constexpr, BLOCK: tl.constexpr):\n'
           '    tl.store(a_ptr + tl.arange(0, BLOCK), 0)\n\n\n'
           'class Experts:\n    def apply(self, a):\n'
           '        moe_kernel[(1,)](a, use_fp8_w8a8=self.quant_config.use_fp8_w8a8, BLOCK=64)\n')
    path = tmp_path / "tq_attention.py"
    path.write_text(SOURCE + moe)
    project = Project.scan([str(path)])
    scenario = from_table("tq-moe", {"facts": {"heads": 32, "kv_heads": 8, "head_dim": 128, "experts": 8,
                                                "moe_intermediate": 1024, "hidden": 4096, "top_k": 2,
                                                "quant": ["none", "fp8-tensor"],
                                                "kv_quant": ["turboquant_k8v4", "turboquant_3bit_nc"]}})
    names = {id(launch): launch.node.func.value.id for m in project.primary_modules() for launch in m.launches}
    built: list[tuple[str, set]] = []
    real = sites_module.build_sites

    def spy(project, only=None, **kw):
        variant = project.evaluator.scenario.variant if project.evaluator.scenario is not None else ""
        if only is not None and variant:
            built.append((variant, {names[i] for i in only}))
        return real(project, only=only, **kw)

    monkeypatch.setattr(sites_module, "build_sites", spy)
    out = build_scenario_sites(project, [scenario], "cuda", frozenset({120}))
    kv_passes = [got for variant, got in built if variant == "kv_quant"]
    assert len(kv_passes) == 2 and all(got == {"tq_decode", "tq_store_mse"} for got in kv_passes), built
    assert any(variant == "quant" and "moe_kernel" in got for variant, got in built), built
    (moe_site,) = [s for s in out.launches if s.kernel.name == "moe_kernel"]
    assert {i.value("use_fp8_w8a8").value for i in moe_site.instances} == {False, True}
