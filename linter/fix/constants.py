"""The fixer's ranking constants, as data (``tilefit/data/perf_model/fixer.json``).

The fix planner (:mod:`tilefit.fix.planner`) and the tuner's search order
(:func:`tilefit.tune.runner.model_order`) read these; the numbers live in one data file with
their provenance (which bench run and data chose them, and when), not in code. File format
(``format`` 1)::

    {
      "format": 1,
      "kind": "fixer_constants",
      "provenance": {"method": "...", "date": "YYYY-MM-DD", "data": ["bench/data/..."], "run": "..."},
      "constants": {"default_trust": 0.03, "anchor_margin": 0.01, ...},   # every name below, no other
      "sources": {"default_trust": "why this value", ...}                 # one per constant
    }

Every constant is a fraction in ``[0, 1]`` (``named_weight`` in ``(0, 1]``); a missing or unknown
name, a value out of range, or provenance without its method, date and data is an error
(:class:`FixerConstantsError`): a typo must not silently keep an old value.

The constants (see the planner for how each is used):

* ``default_trust``: cost per edit step away from the engine's default, scaled by its DRAM share;
* ``anchor_margin``: how much faster (log time) a searched config must be predicted than the
  anchors (the engine's default, the naive fix) to replace them;
* ``tuned_prior``: the share of a predicted gain over the tuned original entry that counts on
  the file's own device;
* ``named_weight``: the weight of the file's own device in the ranking;
* ``edit_penalty``: relative cost of each edit beyond the nearest fitting layer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Mapping

FORMAT = 1
KIND = "fixer_constants"
FILE = "fixer.json"
NAMES = ("default_trust", "anchor_margin", "tuned_prior", "named_weight", "edit_penalty")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class FixerConstantsError(ValueError):
    """The fixer-constants file is malformed."""


@dataclass(frozen=True)
class FixerConstants:
    default_trust: float
    anchor_margin: float
    tuned_prior: float
    named_weight: float
    edit_penalty: float
    provenance: Mapping[str, object]
    source: str


def parse(data: object, source: str) -> FixerConstants:
    """Validate a fixer-constants document; raise :class:`FixerConstantsError` naming ``source``."""
    if not isinstance(data, Mapping):
        raise FixerConstantsError(f"{source}: expected a JSON object")
    if data.get("format") != FORMAT:
        raise FixerConstantsError(f"{source}: unsupported format {data.get('format')!r} (expected {FORMAT})")
    if data.get("kind") != KIND:
        raise FixerConstantsError(f"{source}: kind must be {KIND!r}, not {data.get('kind')!r}")
    values = data.get("constants")
    if not isinstance(values, Mapping):
        raise FixerConstantsError(f"{source}: 'constants' must be an object")
    missing = [n for n in NAMES if n not in values]
    unknown = sorted(set(values) - set(NAMES))
    if missing or unknown:
        raise FixerConstantsError(f"{source}: constants missing: {', '.join(missing) or '-'}; "
                                  f"unknown: {', '.join(unknown) or '-'}")
    out = {}
    for name in NAMES:
        v = values[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            raise FixerConstantsError(f"{source}: {name} must be a number, not {v!r}")
        low_ok = v > 0 if name == "named_weight" else v >= 0
        if not (low_ok and v <= 1):
            raise FixerConstantsError(f"{source}: {name} = {v} is outside its range "
                                      f"({'(0, 1]' if name == 'named_weight' else '[0, 1]'})")
        out[name] = float(v)
    prov = data.get("provenance")
    if not isinstance(prov, Mapping):
        raise FixerConstantsError(f"{source}: 'provenance' must be an object")
    for key in ("method", "date", "data"):
        if not prov.get(key):
            raise FixerConstantsError(f"{source}: provenance needs {key!r}")
    if not isinstance(prov["date"], str) or not _DATE.match(prov["date"]):
        raise FixerConstantsError(f"{source}: provenance date must be YYYY-MM-DD, not {prov['date']!r}")
    if not isinstance(prov["data"], list) or not all(isinstance(p, str) and p for p in prov["data"]):
        raise FixerConstantsError(f"{source}: provenance data must list the bench data files that chose the values")
    sources = data.get("sources")
    if not isinstance(sources, Mapping) or any(not isinstance(sources.get(n), str) or not sources[n].strip()
                                               for n in NAMES):
        raise FixerConstantsError(f"{source}: 'sources' must say, per constant, why it has its value")
    return FixerConstants(**out, provenance=dict(prov), source=source)


@lru_cache(maxsize=None)
def load() -> FixerConstants:
    """The bundled constants (read and validated once)."""
    entry = resources.files("tilefit") / "data" / "perf_model" / FILE
    source = f"tilefit/data/perf_model/{FILE}"
    try:
        data = json.loads(entry.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FixerConstantsError(f"cannot read {source}: {exc}") from None
    return parse(data, source)
