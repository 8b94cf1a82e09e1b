"""Engine modules only one backend imports (``linter/data/platform_modules.json``): a launch in
vLLM's ``v1/attention/ops/rocm_aiter_mla_sparse.py`` is a ROCm launch even though no platform
test guards it in that file (its importers are the ROCm backends), so on NVIDIA targets it is
off-platform, as a launch under ``if is_hip():`` is (issue 18.3)."""

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
                           "evidence": {"type": "string", "minLength": 1}}}}}}
_SCHEMA_TEXT = json.dumps(_SCHEMA).encode()


@lru_cache(maxsize=None)
def table() -> tuple[tuple[str, str], ...]:
    """((module path, backend), ...), validated (a malformed shipped file is a bug: it raises)."""
    from tilefit.device_db.validation import first_error  # the compiled test first, jsonschema to word a miss

    data = json.loads(DATA.read_text(encoding="utf-8"))
    error = first_error(_SCHEMA_TEXT, data)
    if error is not None:
        raise ValueError(f"{DATA}: {error[0]}: {error[1]}")
    return tuple((m["path"], m["backend"]) for m in data["modules"])


def backend_of(path: str) -> str | None:
    """The only backend whose code imports the module at ``path``, or None (any backend)."""
    text = str(path).replace("\\", "/")
    text = text[:-3] if text.endswith(".py") else text
    for entry, backend in table():
        if text == entry or text.endswith("/" + entry):
            return backend
    return None
