"""JSON Schema validation of device and group files, with one-line error messages.

Each instance is first put to the compiled yes/no test of :mod:`.fastschema`; only one it
rejects (or a schema it cannot compile) goes to jsonschema, for the message. jsonschema is
imported on first use only, so loading a valid database -- cached (see :mod:`.cache`) or not --
never pays for it. Validators are compiled once per schema per process.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Iterable

from .errors import DeviceDBError

_MAX_MESSAGE = 240


@lru_cache(maxsize=8)
def _validator(schema_text: bytes) -> Any:
    from jsonschema import Draft202012Validator

    schema = json.loads(schema_text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@lru_cache(maxsize=8)
def _fast(schema_text: bytes) -> Any:
    """The schema's compiled validity test, None when it uses a keyword :mod:`.fastschema` lacks."""
    from .fastschema import Unsupported, compile_schema

    try:
        return compile_schema(json.loads(schema_text))
    except Unsupported:
        return None


def first_error(schema_text: bytes, instance: Any) -> tuple[str, str] | None:
    """The most relevant violation as ``(json_path, message)``, or None if ``instance`` is valid."""
    fast = _fast(schema_text)
    if fast is not None and fast(instance):
        return None
    from jsonschema.exceptions import best_match

    error = best_match(_validator(schema_text).iter_errors(instance))
    if error is None:
        return None
    message = " ".join(error.message.split())
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 3] + "..."
    return error.json_path, message


def validate(schema_text: bytes, label: str, instances: Iterable[tuple[str, Any]]) -> None:
    """Validate ``(json_path_prefix, instance)`` pairs of one file; raise on the first violation.

    The message reads ``<label>: <json path>: <problem>``, e.g.
    ``my_gpus.json: $[1].sm_count: 'many' is not of type 'integer', 'null'``.
    """
    for prefix, instance in instances:
        found = first_error(schema_text, instance)
        if found is not None:
            path, message = found
            raise DeviceDBError(f"{label}: {join_path(prefix, path)}: {message}")


def join_path(prefix: str, path: str) -> str:
    """Append a JSON path relative to ``$`` to a prefix: ``$[1]`` + ``$.aliases[0]``."""
    return prefix + path[1:] if path.startswith("$") else prefix + path
