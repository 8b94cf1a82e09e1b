"""The launch parameters each config family's kernel accepts.

The data is the kernel family's that the config family launches (``tables.parameters`` of its
``family.json``, :func:`tilefit.kernels.table`): ``type`` is the JSON type a value must have;
``engines`` lists the engines whose loader and kernel accept the key (a key another engine's
kernel lacks raises at launch); ``backends`` lists Triton backends that accept a launch option.
"""

from __future__ import annotations

from typing import Any, Mapping

from . import kernels


def family_parameters(family: str) -> Mapping[str, Any]:
    """``{"required": [...], "parameters": {name: rule}}`` of a config family ({} when unknown)."""
    owner = kernels.table(family)
    return (owner.table.get("parameters") or {}) if owner is not None else {}


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def domain_problems(family: str, entry) -> list[tuple[str, str, bool]]:
    """``(parameter, message, hard)`` for each integer value of ``entry`` outside its domain
    (``parameters.json``: power of two, ``minimum``, ``maximum``; ``checked_maximum``, the
    largest value tilefit estimates, is not ``hard``). Non-integers are VAL002's."""
    known = family_parameters(family).get("parameters", {})
    out = []
    for key, value in entry.items():
        spec = known.get(key)
        if spec is None or type(value) is not int:
            continue
        if spec.get("power_of_two") and not is_power_of_two(value):
            out.append((key, f"{key}={_short(value)} is not a power of two", True))
            continue
        lo, hi, checked = spec.get("minimum"), spec.get("maximum"), spec.get("checked_maximum")
        if lo is not None and value < lo:
            out.append((key, f"{key}={_short(value)} is below the minimum {lo}", True))
        elif hi is not None and value > hi:
            out.append((key, f"{key}={_short(value)} is above the maximum {hi}", True))
        elif checked is not None and value > checked:
            out.append((key, f"{key}={_short(value)} is above {checked}, the largest value tilefit checks "
                             "(no shipped config uses more); the entry is not estimated", False))
    return out


def in_domain(family: str, entry) -> bool:
    """Whether every integer launch parameter of ``entry`` is one tilefit estimates and compiles
    (``not domain_problems(family, entry)``, without building the messages: the fix planner asks
    this of every candidate it visits)."""
    known = family_parameters(family).get("parameters", {})
    hit = _BOUNDS.get(family)
    if hit is None or hit[0] is not known:
        hit = _BOUNDS[family] = (known, {key: (bool(spec.get("power_of_two")), spec.get("minimum"), spec.get("maximum"),
                                               spec.get("checked_maximum")) for key, spec in known.items()
                                              if spec is not None})
    bounds = hit[1]
    for key, value in entry.items():
        b = bounds.get(key)
        if b is None or type(value) is not int:
            continue
        pow2, lo, hi, checked = b
        if pow2 and not is_power_of_two(value):
            return False
        if lo is not None and value < lo:
            return False
        if hi is not None and value > hi:
            return False
        if checked is not None and value > checked:
            return False
    return True


# family -> (its parameters' rules, {name: (power of two, minimum, maximum, checked maximum)})
_BOUNDS: dict[str, tuple] = {}


def _short(value: int) -> str:
    """An integer as text, a huge one abbreviated (a 4000-digit number is no message)."""
    if value.bit_length() <= 64:
        return str(value)
    if value > 0 and value & (value - 1) == 0:
        return f"2**{value.bit_length() - 1}"
    return f"an integer of {value.bit_length()} bits"
