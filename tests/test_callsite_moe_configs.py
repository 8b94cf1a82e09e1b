"""A fused-MoE launcher's ``config`` dict bound from the engine's own lookup (issue 18.3):
under a MoE scenario, every batch size's entry of the engine's table for the target device, or
its default-config rule where no table exists; the instances name the scenario, the batch sizes
and where the config came from, and read it the way the engine does (``config["BLOCK_SIZE_M"]``,
``.copy()``, ``d["SPLIT_K"] = 1``, ``.pop("BLOCK_SIZE_K")``, ``**config``).

The fixture ``callsites/moe`` is our own code in the shape of vLLM 0.33.0's fused_moe.py, laid
out as the package (``vllm/model_executor/layers/fused_moe/``) with one tuned table of our own
for the RTX 4090 (mixtral-8x7b's E=8, N=14336); no engine code.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefit.api import load_devices, resolve_targets
from tilefit.callsites.project import Project
from tilefit.callsites.scenarios import resolve
from tilefit.callsites.sites import build_scenario_sites
from tilefit.callsites.values import Lit, branches
from tilefit.config import Settings
from tilefit.fix.defaults import vllm_default_config

ROOT = Path(__file__).parent / "fixtures" / "callsites" / "moe"
LAUNCHER = ROOT / "vllm" / "model_executor" / "layers" / "fused_moe" / "fused_moe.py"
TILES = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "SPLIT_K")


@pytest.fixture(autouse=True)
def _engine_lookup():
    """The doctor's lookup wired in as ``tilefit.cli`` wires it (this module calls the layer directly)."""
    from tilefit.callsites.moeconfigs import use_engine_lookup
    from tilefit.doctor.moeconfigs import install

    install()
    yield
    use_engine_lookup(None)
    install()


def test_without_a_lookup_config_dicts_stay_unbound():
    from tilefit.callsites.moeconfigs import use_engine_lookup

    use_engine_lookup(None)
    devices = tuple(resolve_targets(load_devices(Settings(), ()), ["rtx4090"]))
    sites = build_scenario_sites(Project.scan([str(LAUNCHER)]), resolve(["mixtral-8x7b"]), "cuda",
                                 frozenset({89}), devices)
    found = [s for s in sites.launches if s.kernel.name == "moe_gemm_kernel"]
    assert found and not any("MoE config" in str(i) for s in found for i in s.instances)


def _instances(scenario, target):
    devices = tuple(resolve_targets(load_devices(Settings(), ()), [target]))
    caps = frozenset(int(d.arch.split("_")[1]) for d in devices)
    sites = build_scenario_sites(Project.scan([str(LAUNCHER)]), resolve([scenario]), "cuda", caps, devices)
    found = [s for s in sites.launches if s.kernel.name == "moe_gemm_kernel"]
    assert found, [s.kernel.name for s in sites.launches]
    # the unquantised experts (the scenario itself; its quantisation variants: test_callsite_quant)
    return [i for s in found for i in s.instances if "(quant " not in i.label]


def _lit(v):
    arms = list(branches(v))
    assert len(arms) == 1 and isinstance(arms[0][1], Lit), v
    return arms[0][1].value


def _tiles(inst):
    return {k: _lit(inst.args[k]) for k in TILES} | {k: _lit(inst.options[k]) for k in ("num_warps", "num_stages")}


def test_without_a_table_each_batch_size_gets_the_engines_default_rule():
    insts = _instances("qwen3-moe-30b", "h100")  # vLLM ships no E=128,N=768 table for the H100 in our fixture
    assert insts
    seen = {}
    for inst in insts:
        assert "scenario qwen3-moe-30b" in inst.label and "MoE config M=" in inst.label, inst.label
        assert "default rule of vllm 0.33.0" in inst.label
        first_m = int(inst.label.split("MoE config M=")[1].split("-")[0].split(" ")[0].split("+")[0])
        seen[first_m] = _tiles(inst)
    # the doctor's default cases (the profile) agree with our restatement of get_default_config
    for m, tiles in seen.items():
        want = vllm_default_config(m, 128, 768, 2048, 8, None)
        assert {k: tiles[k] for k in want} == want, (m, tiles, want)
        assert tiles["SPLIT_K"] == 1  # set in the launcher before the splat
    assert sorted(seen) == [1, 33, 65, 97, 129, 513]


def test_a_table_for_the_target_device_is_read_per_batch_size():
    insts = _instances("mixtral-8x7b", "rtx4090")
    by_key = {}
    for inst in insts:
        assert "E=8,N=14336,device_name=NVIDIA_GeForce_RTX_4090.json key" in inst.label.replace(" key", " key"), \
            inst.label
        key = int(inst.label.split(" key ")[1].split(" ")[0])
        by_key[key] = (inst.label, _tiles(inst))
    assert sorted(by_key) == [1, 256]
    assert by_key[1][1] == {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1,
                            "SPLIT_K": 1, "num_warps": 4, "num_stages": 5}
    assert by_key[256][1]["BLOCK_SIZE_N"] == 256 and by_key[256][1]["num_stages"] == 4
    # nearest key: M=1..128 take key 1, M=129.. take 256 (ties to the first key in the file)
    assert "M=1-128 " in by_key[1][0] and "M=129-4096 " in by_key[256][0]


def test_values_read_from_the_config_stay_with_its_batch_size():
    for inst in _instances("mixtral-8x7b", "rtx4090"):
        bk = _lit(inst.args["BLOCK_SIZE_K"])
        # EVEN_K = hidden % config["BLOCK_SIZE_K"] == 0 of the same entry (hidden 4096)
        assert _lit(inst.args["EVEN_K"]) is (4096 % bk == 0)
        assert _lit(inst.args["top_k"]) == 2
        # the launcher's B is the caller's w1: B.size(1) is the scenario's w1.shape[1] (2 x 14336)
        assert _lit(inst.args["N"]) == 2 * 14336


def test_a_dense_scenario_does_not_judge_the_moe_launch():
    # llama has no experts: its instance of the launch is not judged (another scenario's is)
    insts = _instances("all", "h100")
    assert insts and not any("llama-gqa-128" in i.label for i in insts)
    assert all("MoE config M=" in i.label for i in insts)


def test_the_call_site_result_cache_keys_on_the_installed_lookup():
    """A run without the lookup (a direct api user who did not install it) leaves ``config``
    unbound; it must not be served the record of a run with it, nor the other way round."""
    from tilefit import callsiteresults
    from tilefit.callsites.moeconfigs import lookup_name, use_engine_lookup
    from tilefit.callsites.options import CallsiteOptions

    options = CallsiteOptions(scenarios=resolve(["mixtral-8x7b"]))
    with_lookup = callsiteresults.config_key("run", options)
    assert lookup_name() == "tilefit.doctor.moeconfigs.launch_configs"
    use_engine_lookup(None)
    assert lookup_name() is None
    assert callsiteresults.config_key("run", options) != with_lookup
