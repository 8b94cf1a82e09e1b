"""Engine modules only one backend imports (``linter/data/platform_modules.json``): a launch in
vLLM's ``v1/attention/ops/rocm_aiter_mla_sparse.py`` is a ROCm launch even though no platform
test guards it in that file (its importers are the ROCm backends), so on NVIDIA targets it is
off-platform, as a launch under ``if is_hip():`` is (issue 18.3). An entry may also name the
compute-capability majors whose GPUs alone run the module (``capability_majors``: vLLM's DeepGEMM
MegaMoE staging runs on the SM100 family only), as a launch under ``if
has_device_capability(100):`` would: on targets of other majors it is off-platform too."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "platform_modules.json"
_SCHEMA = {
    "type": "object", "required": ["version", "modules"], "additionalProperties": False,
    "properties": {
        "$comment": {"type": "string"}, "version": {"const": 1},
        "modules": {"type": "array", "items": {
            "type": "object", "required": ["path", "backend", "evidence"], "additionalProperties": False,
            "properties": {"path": {"type": "string", "pattern": "^([A-Za-z0-9_.-]+/)+[A-Za-z_][A-Za-z0-9_]*$"},
                           "backend": {"enum": ["cuda", "hip", "xpu"]},
                           "capability_majors": {"type": "array", "minItems": 1, "uniqueItems": True,
                                                 "items": {"type": "integer", "minimum": 1}},
                           "evidence": {"type": "string", "minLength": 1}}}}}}
_SCHEMA_TEXT = json.dumps(_SCHEMA).encode()


@lru_cache(maxsize=None)
def _entries() -> tuple[dict, ...]:
    """The table's entries, validated (a malformed shipped file is a bug: it raises)."""
    from tilefit.device_db.validation import first_error  # the compiled test first, jsonschema to word a miss

    data = json.loads(DATA.read_text(encoding="utf-8"))
    error = first_error(_SCHEMA_TEXT, data)
    if error is not None:
        raise ValueError(f"{DATA}: {error[0]}: {error[1]}")
    return tuple(data["modules"])


def table() -> tuple[tuple[str, str], ...]:
    """((module path, backend), ...)."""
    return tuple((m["path"], m["backend"]) for m in _entries())


def _entry_of(path: str) -> dict | None:
    text = str(path).replace("\\", "/")
    text = text[:-3] if text.endswith(".py") else text
    for entry in _entries():
        if text == entry["path"] or text.endswith("/" + entry["path"]):
            return entry
    return None


def backend_of(path: str) -> str | None:
    """The only backend whose code imports the module at ``path``, or None (any backend)."""
    entry = _entry_of(path)
    return None if entry is None else entry["backend"]


def capabilities_running(path: str, capabilities) -> frozenset | None:
    """Those of ``capabilities`` whose GPUs run the module at ``path`` (its ``capability_majors``),
    or None when every one of them does (no listed major, or no capabilities known)."""
    entry = _entry_of(path)
    majors = entry.get("capability_majors") if entry is not None else None
    if not majors or not capabilities:
        return None
    on = frozenset(c for c in capabilities if int(c) // 10 in majors)
    return None if on == frozenset(capabilities) else on


def runs_on_none_of(path: str, capabilities) -> bool:
    """Does the module at ``path`` run only on GPUs of compute-capability majors that none of
    ``capabilities`` (89, 120, ...) has? False without capabilities or without a listed major."""
    entry = _entry_of(path)
    majors = entry.get("capability_majors") if entry is not None else None
    if not majors or not capabilities:
        return False
    return not any(int(c) // 10 in majors for c in capabilities)
