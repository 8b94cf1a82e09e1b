"""Remembers which device-file contents already passed schema validation.

Validation needs jsonschema (tens of milliseconds to import) and tilefit runs as a pre-commit
hook, so a successful validation leaves a marker named by the SHA-256 of everything it depended
on (schema bytes, file bytes, :data:`CACHE_VERSION`); the next run finds it and skips jsonschema
entirely. Changed content gets a new digest and is validated again; a failure is never
remembered. The markers live in ``<cache root>/device_db`` (``TILEFIT_CACHE_DIR``; an empty
value turns caching off) through :class:`tilefit.cachedir.ValidityCache`.
"""

from __future__ import annotations

from pathlib import Path

from tilefit.cachedir import ENV_VAR, ValidityCache  # noqa: F401 - ENV_VAR re-exported for tests

# Bump when what "valid" means changes without the schema bytes changing.
CACHE_VERSION = b"tilefit-device-db-1"


def _cache() -> ValidityCache:
    return ValidityCache("device_db", CACHE_VERSION)  # reads the environment each time (tests set it)


def cache_dir() -> Path | None:
    """The marker directory, or None when caching is off."""
    return _cache().directory


def digest(*parts: bytes) -> str:
    """SHA-256 over length-framed parts and :data:`CACHE_VERSION` (hex)."""
    return _cache().digest(*parts)


def is_valid(key: str) -> bool:
    """Whether content with this digest passed validation before."""
    return _cache().is_valid(key)


def remember_valid(key: str) -> None:
    """Record a successful validation; silently does nothing if the cache cannot be written."""
    _cache().remember(key)
