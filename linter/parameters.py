"""The launch parameters each family's kernel accepts (data: tilefit/data/parameters.json)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def parameter_table() -> dict:
    return json.loads((resources.files("tilefit") / "data" / "parameters.json").read_text())


def family_parameters(family: str) -> dict:
    return parameter_table()["families"].get(family, {})


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0
