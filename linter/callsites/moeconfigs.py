"""The tile configs a fused-MoE launcher gets under a MoE scenario (issue 18).

vLLM's and SGLang's fused-MoE launchers take their tiles from a ``config`` dict read at run
time (``config = get_config_func(M)``; then ``config["BLOCK_SIZE_M"]``, ``config.pop(...)``,
``**config`` at the launch). Nothing static gives it, but the engine's own lookup does: for the
scenario's experts, intermediate size and hidden size on a target device, the engine loads its
table for that device (nearest batch-size key) or falls back to its default-config rule. That is
exactly what ``tilefit doctor`` computes for the JSON checks, so the values come from there
(:meth:`tilefit.doctor.core.Doctor.moe_launch_configs`, through
:func:`tilefit.doctor.moeconfigs.launch_configs`, which the application installs with
:func:`use_engine_lookup`: the same file names, folders, nearest key and default cases; nothing
restated here).

:func:`config_arms` turns them into one :class:`~.values.Arms` branch per distinct config, labelled
``MoE config M=1-32 (default rule of vllm 0.33.0 on rtx4090)``: a finding names the scenario,
the batch sizes and where the config came from. Branches of one config dict exclude each other
(:func:`~.values.consistent`), so ``config["BLOCK_SIZE_M"]`` in one argument and ``**config`` in
the launch stay the same batch size. Which names and modules are bound: names.json
``moe_configs``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable



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


_LOOKUP: Callable[[str, str, tuple, tuple], tuple] | None = None


def use_engine_lookup(lookup: Callable[[str, str, tuple, tuple], tuple] | None) -> None:
    """Install the engine-lookup function :func:`config_arms` asks (``lookup(engine, package
    root, scenario facts, devices) -> ((label, config items), ...)``): the application installs
    :func:`tilefit.doctor.moeconfigs.launch_configs` (``tilefit.cli`` does, at import). It is
    passed in, not imported here, because the doctor sits above the call-site layer (it runs
    checks itself); without one, ``config`` dicts stay unbound (EST002, as before issue 18.3)."""
    global _LOOKUP
    _LOOKUP = lookup


def lookup_name() -> str | None:
    """The installed lookup's qualified name (None without one): results computed with and
    without it differ, so the call-site result cache keys on it."""
    if _LOOKUP is None:
        return None
    return f"{getattr(_LOOKUP, '__module__', '?')}.{getattr(_LOOKUP, '__qualname__', repr(_LOOKUP))}"


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
    if getattr(scenario, "quant", ""):  # the scheme's tables and default rule (names.json quant)
        key = tuple(sorted(dict(key, quant=scenario.quant).items()))
    if _LOOKUP is None:
        return None
    got = _LOOKUP(hit[0], hit[1], key, tuple(devices))
    if not got:
        return None
    via = f"scenario {scenario.name}"
    arms = tuple((label, DictVal(tuple((k, Lit(v, None, f"{via}, {label}")) for k, v in items)))
                 for label, items in got)
    return arms[0][1] if len(arms) == 1 else Arms(arms)
