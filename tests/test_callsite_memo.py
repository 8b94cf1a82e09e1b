"""A launcher's layout memo (issue 18.3): ``cfg = _CACHE.get(key)`` on a module dict that starts
empty and that the same function fills at that key (``_CACHE[key] = cfg`` after ``if cfg is
None: cfg = {...}``) holds only what the miss branch builds, so the launch is judged with that
value. vLLM 0.33.0's TurboQuant decode (``_get_layout``) reads BLOCK_D this way. A registry the
function does not fill at the key it reads stays a run-time value. The fixtures are our own code
in that shape."""

from __future__ import annotations

from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, Unknown, branches

KERNEL = ("import math\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
          "def stage2(x_ptr, BLOCK_DV: tl.constexpr, Lv: tl.constexpr):\n"
          "    tl.store(x_ptr + tl.arange(0, BLOCK_DV), 0)\n\n\n")
MEMO = ("_layout_cache: dict = {}\n\n\n"
        "def _get_layout(D, bits):\n"
        "    key = (D, bits)\n"
        "    cfg = _layout_cache.get(key)\n"
        "    if cfg is None:\n"
        "        cfg = {\"data_bytes\": math.ceil(D * bits / 8), \"BLOCK_D\": triton.next_power_of_2(D)}\n"
        "        _layout_cache[key] = cfg\n"
        "    return cfg\n\n\n")
LAUNCH = ("def decode(query, out, bits):\n"
          "    B, Hq, D = query.shape\n"
          "    cfg = {getter}(D, bits)\n"
          "    stage2[(B, Hq)](out, BLOCK_DV=cfg[\"BLOCK_D\"], Lv=D, num_warps=4, num_stages=2)\n")


def _block_dv(tmp_path, text):
    path = tmp_path / "tq.py"
    path.write_text(text)
    sites = build_scenario_sites(Project.scan([str(path)]), resolve(["gemma-gqa-256"]), "cuda", frozenset({120}))
    (site,) = [s for s in sites.launches if s.kernel.name == "stage2"]
    return [v for inst in site.instances for _, v in branches(inst.value("BLOCK_DV"))]


def test_a_layout_memo_is_judged_with_the_value_its_miss_builds(tmp_path):
    got = _block_dv(tmp_path, KERNEL + MEMO + LAUNCH.format(getter="_get_layout"))
    assert got and all(isinstance(v, Lit) for v in got), got
    assert {v.value for v in got} == {256}, got  # next_power_of_2 of Gemma's head size 256


def test_a_registry_the_function_does_not_fill_stays_a_run_time_value(tmp_path):
    registry = ("_layouts: dict = {}\n\n\n"
                "def _get_layout(D, bits):\n"
                "    cfg = _layouts.get((D, bits))\n"
                "    if cfg is None:\n"
                "        cfg = {\"BLOCK_D\": triton.next_power_of_2(D)}\n"
                "    return cfg\n\n\n")
    got = _block_dv(tmp_path, KERNEL + registry + LAUNCH.format(getter="_get_layout"))
    assert got and all(isinstance(v, Unknown) for v in got), got
