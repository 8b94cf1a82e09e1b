"""Remembers which device-file contents already passed schema validation.

Validation needs jsonschema (tens of milliseconds to import) and tilefit runs as a pre-commit
hook, so a successful validation leaves an empty marker file named by the SHA-256 of everything
it depended on (schema bytes, file bytes, :data:`CACHE_VERSION`). The next run finds the marker
and skips jsonschema entirely. Changed content gets a new digest, so it is validated again; a
failed validation is never remembered.

Location: ``$TILEFIT_CACHE_DIR/device_db`` when ``TILEFIT_CACHE_DIR`` is set (an empty value
turns the cache off), else ``platformdirs.user_cache_dir("tilefit")/device_db``. An unwritable
cache directory only costs the validation time.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

# Bump when what "valid" means changes without the schema bytes changing.
CACHE_VERSION = b"tilefit-device-db-1"
ENV_VAR = "TILEFIT_CACHE_DIR"


def cache_dir() -> Path | None:
    """The marker directory, or None when caching is off."""
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return Path(env) / "device_db" if env.strip() else None
    try:
        import platformdirs
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        return None
    return Path(platformdirs.user_cache_dir("tilefit")) / "device_db"


def digest(*parts: bytes) -> str:
    """SHA-256 over length-framed parts and :data:`CACHE_VERSION` (hex)."""
    h = hashlib.sha256(CACHE_VERSION)
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def is_valid(key: str) -> bool:
    """Whether content with this digest passed validation before."""
    directory = cache_dir()
    return directory is not None and (directory / f"{key}.ok").is_file()


def remember_valid(key: str) -> None:
    """Record a successful validation; silently does nothing if the cache cannot be written."""
    directory = cache_dir()
    if directory is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{key}.ok").touch()
    except OSError:
        pass
