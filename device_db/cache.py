"""Remembers which device-file contents already passed schema validation.

Validation needs jsonschema (tens of milliseconds to import) and tilefit runs as a pre-commit
hook, so a successful validation leaves a marker named by the SHA-256 of everything it depended
on (schema bytes, file bytes, :data:`CACHE_VERSION`); the next run finds it and skips jsonschema
entirely. Changed content gets a new digest and is validated again; a failure is never
remembered. The markers live in ``<cache root>/device_db``.

The cache root is ``$TILEFIT_CACHE_DIR`` (an empty value turns caching off), else
``platformdirs.user_cache_dir("tilefit")``: :func:`cache_root` is the one definition (the device
database depends on nothing else of tilefit, so it owns it; ``tilefit.cachedir`` hands it to the
rest of the app). :class:`ValidityCache` is the marker cache itself; marker files are named by
the SHA-256 of everything the verdict depends on, so changed content or a changed schema is
validated again; failures are never remembered, and an unwritable cache only costs time.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

ENV_VAR = "TILEFIT_CACHE_DIR"


def cache_root() -> Path | None:
    env = os.environ.get(ENV_VAR)
    if env is not None:
        return Path(env) if env.strip() else None
    try:
        import platformdirs
    except ImportError:  # pragma: no cover - platformdirs is a dependency
        return None
    return Path(platformdirs.user_cache_dir("tilefit"))


class ValidityCache:
    """Markers of contents that passed a check, in ``<cache root>/<namespace>``."""

    def __init__(self, namespace: str, version: bytes):
        self.namespace = namespace
        self.version = version
        self._dir: Path | None | bool = False
        self._made: Path | None = None  # the directory remember() made (or found)

    @property
    def directory(self) -> Path | None:
        if self._dir is False:
            root = cache_root()
            self._dir = root / self.namespace if root is not None else None
        return self._dir  # type: ignore[return-value]

    def digest(self, *parts: bytes) -> str:
        h = hashlib.sha256(self.version)
        for part in parts:
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        return h.hexdigest()

    def is_valid(self, key: str) -> bool:
        d = self.directory
        return d is not None and (d / f"{key}.ok").is_file()

    def remember(self, key: str) -> None:
        d = self.directory
        if d is None:
            return
        marker = d / f"{key}.ok"
        try:
            if self._made is not d:  # the folder made once (a cold check remembers a marker per table)
                d.mkdir(parents=True, exist_ok=True)
                self._made = d
            marker.touch()
        except FileNotFoundError:  # the folder went away since it was made: made again
            try:
                d.mkdir(parents=True, exist_ok=True)
                marker.touch()
            except OSError:
                pass
        except OSError:
            pass


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
