"""Where tilefit keeps caches, and a marker cache of contents that passed a validation.

``$TILEFIT_CACHE_DIR`` (an empty value turns caching off), else
``platformdirs.user_cache_dir("tilefit")``. Marker files are named by the SHA-256 of everything
the verdict depends on, so changed content or a changed schema is validated again; failures are
never remembered, and an unwritable cache only costs time.
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
        try:
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{key}.ok").touch()
        except OSError:
            pass
