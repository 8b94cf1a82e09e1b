"""A bool computed at run time and passed as a constexpr is judged at both values (issue 18.4).

``FP8_KV_CACHE=get_mode(kv_cache_dtype) != Mode.NONE`` (vLLM 0.33.0's reshape-and-cache),
``HAS_VL=bias is not None and lo > 0`` (its dsv4 top-k router), ``USE_5D=cache.ndim == 5``: nothing
static says which, but a comparison, a ``not`` and an ``and``/``or`` of bools is True or False,
so both compiles exist, as both arms of ``x if cond else y`` do. Each instance is labelled
``if TEXT`` / ``if not TEXT`` and its literal says why (``both values of ...``). What is not a
bool (a shape, ``a and b`` of unknown values) stays unknown with its reason, as does a model
dimension the scenario lacks. The fixture is our own code in the shape of those launchers."""

from __future__ import annotations

from tilefit.callsites.project import Project
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, RunTimeBool, Unknown, branches, both_values, consistent

SOURCE = '''import triton
import triton.language as tl

from .modes import Mode, get_mode


@triton.jit
def store_kernel(src_ptr, dst_ptr, n, FP8: tl.constexpr, HAS_VL: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(src_ptr + offs, mask=offs < n)
    if FP8:
        v = v * 2
    if HAS_VL:
        v = v + 1
    tl.store(dst_ptr + offs, v, mask=offs < n)


def store(src, dst, cache, kv_cache_dtype: str, lo: int, bias):
    fp8 = get_mode(kv_cache_dtype) != Mode.NONE
    has_vl = bias is not None and lo > 0
    store_kernel[(1,)](src, dst, src.numel(), FP8=fp8, HAS_VL=has_vl, BLOCK=1024)


def store_sized(src, dst, cache):
    store_kernel[(1,)](src, dst, src.numel(), FP8=not cache.is_fp8, HAS_VL=False, BLOCK=cache.shape[-1])


def store_opaque(src, dst, cache, flag):
    store_kernel[(1,)](src, dst, src.numel(), FP8=cache.flag and flag, HAS_VL=False, BLOCK=256)
'''


def _sites(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "modes.py").write_text("import enum\n\n\nclass Mode(enum.Enum):\n    NONE = 0\n    FP8 = 1\n\n\n"
                                       "def get_mode(name):\n    return MODES[name]\n")
    (tmp_path / "store.py").write_text(SOURCE)
    project = Project.scan([str(p) for p in sorted(tmp_path.glob("*.py"))])
    sites = build_scenario_sites(project, [], "cuda", frozenset({89}))
    return {s.where.split(" in ")[-1]: s for s in sites.launches if s.caller is None}


def test_a_run_time_comparison_passed_as_a_constexpr_is_judged_at_both_values(tmp_path):
    site = _sites(tmp_path)["store()"]
    got = sorted((i.label, i.value("FP8").value, i.value("HAS_VL").value) for i in site.instances)
    fp8 = "get_mode(kv_cache_dtype) != Mode.NONE"
    vl = "bias is not None and lo > 0"
    assert got == sorted((f"{a}{fp8}, {b}{vl}", x, y) for a, x in (("if ", True), ("if not ", False))
                         for b, y in (("if ", True), ("if not ", False)))
    lit = site.instances[0].value("FP8")
    assert isinstance(lit, Lit) and lit.via.startswith(f"both values of `{fp8}`")


def test_not_of_anything_is_a_bool_but_a_shape_stays_unknown(tmp_path):
    site = _sites(tmp_path)["store_sized()"]
    assert sorted(i.value("FP8").value for i in site.instances) == [False, True]
    for inst in site.instances:  # BLOCK is a shape: no value is guessed for it
        assert isinstance(inst.value("BLOCK"), Unknown) and "cache.shape" in inst.value("BLOCK").reason


def test_and_of_values_that_are_not_bools_stays_unknown(tmp_path):
    site = _sites(tmp_path)["store_opaque()"]
    (inst,) = site.instances
    v = inst.value("FP8")
    assert isinstance(v, Unknown) and not isinstance(v, RunTimeBool)


def test_both_values_keeps_the_arms_that_hold_beside_an_arm_label():
    rb = RunTimeBool("`x.ndim` is computed at run time", "x.ndim == 5")
    (t, f) = branches(both_values(rb))
    assert (t[0], t[1].value, f[0], f[1].value) == ("if x.ndim == 5", True, "if not x.ndim == 5", False)
    assert not consistent([t[0], f[0]])  # the two answers never hold together
    assert both_values(Lit(3)).value == 3
    neg = [lab for lab, _ in branches(both_values(RunTimeBool("r", "not hooked")))]
    assert neg == ["if not hooked", "if hooked"] and not consistent(neg)


DIFFKV = '''import triton
import triton.language as tl


@triton.jit
def cache_kernel(k_ptr, v_ptr, cache_ptr, HEAD_K: tl.constexpr, HEAD_V: tl.constexpr, FP8: tl.constexpr,
                 TILE: tl.constexpr):
    offs = tl.arange(0, TILE)
    k = tl.load(k_ptr + offs, mask=offs < HEAD_K)
    v = tl.load(v_ptr + offs, mask=offs < HEAD_V)
    if FP8:
        k = k * 0.5
    tl.store(cache_ptr + offs, k + v, mask=offs < HEAD_K)


def cache_diffkv(key, value, kv_cache, kv_cache_dtype: str):
    head_size_k = key.shape[2]
    head_size_v = value.shape[2]
    tile = triton.next_power_of_2(max(head_size_k, head_size_v))
    cache_kernel[(1,)](key, value, kv_cache, HEAD_K=head_size_k, HEAD_V=head_size_v,
                       FP8=kv_cache_dtype != "auto", TILE=tile)
'''


def test_a_diffkv_launcher_gets_the_key_head_size_by_its_name(tmp_path):
    """vLLM 0.33.0's ``triton_reshape_and_cache_flash_diffkv`` names the key's head size
    ``head_size_k`` (names.json head_dim), the value's ``head_size_v`` (v_head_dim)."""
    from tilefit.callsites.scenarios import resolve

    (tmp_path / "cache_ops.py").write_text(DIFFKV)
    project = Project.scan([str(tmp_path / "cache_ops.py")])
    sites = build_scenario_sites(project, resolve(["llama-gqa-128"]), "cuda", frozenset({89}))
    (site,) = sites.launches
    got = sorted((i.value("HEAD_K").value, i.value("HEAD_V").value, i.value("TILE").value, i.value("FP8").value)
                 for i in site.instances)
    assert got == [(128, 128, 128, False), (128, 128, 128, True)], [i.label for i in site.instances]
