"""The tile configs a fused-MoE launcher gets under a MoE scenario (issue 18).

vLLM's and SGLang's fused-MoE launchers take their tiles from a ``config`` dict read at run
time (``config = get_config_func(M)``; then ``config["BLOCK_SIZE_M"]``, ``config.pop(...)``,
``**config`` at the launch). Nothing static gives it, but the engine's own lookup does: for the
scenario's experts, intermediate size and hidden size on a target device, the engine loads its
table for that device (nearest batch-size key) or falls back to its default-config rule. That is
exactly what ``tilefit doctor`` computes for the JSON checks, so the values come from there
(:meth:`tilefit.doctor.core.Doctor.moe_launch_configs`: the same file names, folders, nearest key
and default cases; nothing restated here).

:func:`config_arms` turns them into one :class:`~.values.Arms` branch per distinct config, labelled
``MoE config M=1-32 (default rule of vllm 0.33.0 on rtx4090)``: a finding names the scenario,
the batch sizes and where the config came from. Branches of one config dict exclude each other
(:func:`~.values.consistent`), so ``config["BLOCK_SIZE_M"]`` in one argument and ``**config`` in
the launch stay the same batch size. Which names and modules are bound: names.json
``moe_configs``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from .values import MOE_CONFIG_LABEL as LABEL  # a label atom's prefix: two different ones never hold together


@lru_cache(maxsize=None)
def _rules() -> tuple[frozenset, tuple[tuple[str, str], ...]]:
    from .scenarios import names_table

    data = names_table().get("moe_configs") or {}
    paths = tuple((engine, p) for engine, e in data.get("engines", {}).items() for p in e["paths"])
    return frozenset(data.get("names", ())), paths


def engine_of(path: str, name: str) -> tuple[str, str] | None:
    """(engine, package root) when ``name`` is a config name and ``path`` a module under one of the
    engine's MoE paths (names.json ``moe_configs``); else None."""
    names, paths = _rules()
    if name not in names:
        return None
    text = str(path).replace("\\", "/")
    for engine, prefix in paths:
        at = text.find("/" + prefix)
        if at >= 0:
            return engine, text[:at]
    return None


def _model(facts) -> Any:
    from tilefit.doctor.model import ModelShape

    return ModelShape(source="scenario", hidden_size=int(facts["hidden"]), num_experts=int(facts["experts"]),
                      top_k=int(facts["top_k"]), moe_intermediate_size=int(facts["moe_intermediate"]),
                      num_attention_heads=facts.get("heads"), activation_dtype=str(facts.get("activation_dtype",
                                                                                             "bf16")))


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


def config_arms(scenario, path: str, name: str, devices) -> Any:
    """The :class:`~.values.Arms` of the configs ``name`` holds in the fused-MoE module at ``path``
    under ``scenario`` on ``devices``; None when none applies (not a config name or module, no
    device); :class:`~.values.Absent` under a scenario without experts (a dense model)."""
    from .values import Arms, DictVal, Lit

    hit = engine_of(path, name)
    if hit is None or scenario is None or not devices:
        return None
    facts = getattr(scenario, "facts", None) or {}
    if not facts.get("experts"):  # a dense model runs no fused-MoE launch: its instance is not judged
        from .values import Absent

        return Absent(f"scenario {scenario.name} is not a MoE model (no experts for `{name}`)")
    key = tuple(sorted((k, v) for k, v in facts.items() if isinstance(v, (int, float, str, bool))))
    got = launch_configs(hit[0], hit[1], key, tuple(devices))
    if not got:
        return None
    via = f"scenario {scenario.name}"
    arms = tuple((label, DictVal(tuple((k, Lit(v, None, f"{via}, {label}")) for k, v in items)))
                 for label, items in got)
    return arms[0][1] if len(arms) == 1 else Arms(arms)
