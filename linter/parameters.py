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
