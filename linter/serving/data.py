"""The engine profiles' JSON (``data/engine_profiles/<engine>-<version>.json``), read once.

What the naming rules (:mod:`.naming`) and the launch rules (:mod:`.launch`) need on the check
path: the raw data, sorted by engine and version, no formula compiled. :mod:`.profiles` builds
the doctor's :class:`~.profiles.Profile` objects from the same data.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

from tilefit import versions

ENGINES = ("sglang", "vllm")


class ProfileError(ValueError):
    """A profile is missing, unknown or malformed."""


@lru_cache(maxsize=None)
def raw_profiles() -> tuple[tuple[str, Mapping[str, Any]], ...]:
    """``(source, data)`` of every profile file, newest last per engine."""
    folder = resources.files("tilefit") / "data" / "engine_profiles"
    out = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        name = entry.name
        if not name.endswith(".json") or name.endswith(".shipped.json"):
            continue
        source = f"tilefit/data/engine_profiles/{name}"
        try:
            data = json.loads(entry.read_text())
        except ValueError as exc:
            raise ProfileError(f"{source}: not valid JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("engine") not in ENGINES:
            raise ProfileError(f"{source}: unknown engine {data.get('engine') if isinstance(data, dict) else data!r}")
        out.append((source, data))
    return tuple(sorted(out, key=lambda sd: (sd[1]["engine"], versions.parse(str(sd[1].get("version", "0"))))))
