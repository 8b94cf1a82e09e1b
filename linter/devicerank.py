"""The order people know devices in: the best-known cards first (``data/well_known_devices.json``),
then the rest by segment (consumer before workstation, datacenter and embedded parts) and the
fastest first. One fact, read by the audit's column labels and probe's device lists; it imports
nothing of tilefit, so any layer may use it."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Iterable

SEGMENT_ORDER = {"consumer": 0, "workstation": 1, "datacenter": 2, "embedded": 3}


@functools.lru_cache(maxsize=1)
def well_known() -> dict[str, int]:
    """Device key -> rank in ``data/well_known_devices.json``."""
    data = json.loads(resources.files("tilefit").joinpath("data/well_known_devices.json").read_text("utf-8"))
    keys = data["devices"]
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise ValueError("well_known_devices.json: 'devices' must be a list of device keys")
    return {k: i for i, k in enumerate(keys)}


def known_first(devices: Iterable) -> list:
    """``devices`` with the best-known cards first: the listed ones in their order, then the
    rest by segment (consumer first) and bandwidth (fastest first)."""
    rank = well_known()
    return sorted(devices, key=lambda d: (rank.get(d.key, len(rank)), SEGMENT_ORDER.get(d.segment or "", 9),
                                          d.kind != "card", -(d.memory_bandwidth_gbps or 0), d.key))
