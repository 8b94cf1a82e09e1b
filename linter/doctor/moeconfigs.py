"""The fused-MoE configs an engine launches under a call-site scenario, from the doctor's own
lookup (issue 18.3): :func:`launch_configs` is what :mod:`tilefit.callsites.moeconfigs` asks
once the application installs it (``use_engine_lookup``; the doctor sits above the call-site
layer, so the call-site code never imports it)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from tilefit.callsites.labels import MOE_CONFIG_LABEL as LABEL  # a label atom's prefix: two different ones never hold together


def _model(facts) -> Any:
    from tilefit.doctor.model import ModelShape

    act = str(facts.get("activation_dtype", "bf16"))
    return ModelShape(source="scenario", hidden_size=int(facts["hidden"]), num_experts=int(facts["experts"]),
                      top_k=int(facts["top_k"]), moe_intermediate_size=int(facts["moe_intermediate"]),
                      num_attention_heads=facts.get("heads"), activation_dtype=act,
                      quant=_quant(facts.get("quant"), act))


def _quant(scheme: str | None, act: str) -> Any:
    """The scenario's quantisation scheme (names.json ``quant``) as the doctor's Quant."""
    from tilefit.callsites.scenarios import quant_scheme
    from tilefit.doctor.model import Quant

    if not scheme:
        return Quant(act)
    d = quant_scheme(scheme)["doctor"]
    block = tuple(d["block_shape"]) if d.get("block_shape") else None
    return Quant(d["dtype"] or act, d["scheme"], block, d.get("method"), bool(d.get("weight_only", False)))


def _ranges(ms: list[int]) -> str:
    from tilefit.doctor.core import batch_ranges

    return "+".join(f"{a}" if a == b else f"{a}-{b}" for a, b in batch_ranges(sorted(ms)))


@lru_cache(maxsize=256)
def launch_configs(engine: str, root: str, facts_key: tuple, devices: tuple) -> tuple[tuple[str, tuple], ...]:
    """((label, config items), ...) of the distinct gate/up configs the engine launches on the
    ``devices`` (device-database records of the targets) for the scenario's MoE facts; () when
    the facts are not a MoE model's or the engine does not run its Triton MoE there."""
    from tilefit.doctor.core import Doctor, Options
    from tilefit.doctor.targets import runtime_name
    from tilefit.serving.profiles import find_profile
    from tilefit.doctor.core import Target

    facts = dict(facts_key)
    if not all(facts.get(k) for k in ("experts", "moe_intermediate", "hidden", "top_k")):
        return ()
    profile, _ = find_profile(engine)
    engine_path = root if root and (Path(root) / engine).is_dir() else None
    doctor = Doctor(_model(facts), None, Options(env={}, engine_path=engine_path, auto_detect_engine=False))
    grouped: dict[tuple, list[int]] = {}  # (config, where it comes from) -> batch sizes
    on: dict[tuple, list[str]] = {}  # -> the devices that launch it
    for device in devices:
        target = Target(device, runtime_name(device))
        try:
            name, picks = doctor.moe_launch_configs(profile, target)
        except Exception:  # noqa: BLE001 - a shape the doctor refuses: no binding, the launch stays unknown
            return ()
        for m, (src, key, case, cfg) in picks:
            if not isinstance(cfg, dict):
                continue
            k = (tuple(sorted(cfg.items())), f"{name} key {key}" if src == "file" else
                 f"default rule of {profile.label}")
            ms = grouped.setdefault(k, [])
            if not ms or ms[-1] != m:
                ms.append(m)
            if device.key not in on.setdefault(k, []):
                on[k].append(device.key)
    out = []
    for k, ms in grouped.items():
        devs = on[k]
        where = devs[0] if len(devs) == 1 else f"{len(devs)} target devices"
        label = f"{LABEL}M={_ranges(sorted(set(ms)))} ({k[1]} on {where})".replace(", ", " ")
        out.append((label, k[0]))
    return tuple(out)


def install() -> None:
    """Make the call-site evaluation bind MoE ``config`` dicts with :func:`launch_configs`."""
    from tilefit.callsites.moeconfigs import use_engine_lookup

    use_engine_lookup(launch_configs)
