"""Remembers which device-file contents already passed schema validation.

Validation needs jsonschema (tens of milliseconds to import) and tilefit runs as a pre-commit
hook, so a successful validation remembers the SHA-256 of everything it depended on (schema
bytes, file bytes, :data:`CACHE_VERSION`); the next run finds it and skips jsonschema entirely.
Changed content gets a new digest and is validated again; a failure is never remembered. The
digests live in ``<cache root>/device_db/passed.log``.

The cache root is ``$TILEFIT_CACHE_DIR`` (an empty value turns caching off), else
``platformdirs.user_cache_dir("tilefit")``: :func:`cache_root` is the one definition (the device
database depends on nothing else of tilefit, so it owns it; ``tilefit.cachedir`` hands it to the
rest of the app). :class:`ValidityCache` is that cache itself, a log of the SHA-256 digests of
everything each verdict depended on, so changed content or a changed schema is validated
again; failures are never remembered, and an unwritable cache only costs time.
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
    """Digests of contents that passed a check, one a line in ``<cache root>/<namespace>/passed.log``.

    One append-only log instead of a marker file per digest: a cold check remembers a digest per
    table, and creating ~100 files cost tens of milliseconds where appending a line costs tens of
    microseconds. The log is read once (the first :meth:`is_valid`); each :meth:`remember`
    appends ``<digest>\\n`` in one ``O_APPEND`` write, so concurrent runs and forked workers
    only add whole lines. A line torn by a crash joins the next one into a string that is no
    digest, so it can only cost a validation, never vouch for content. Marker files (``*.ok``)
    of older versions in the same folder are ignored.
    """

    LOG = "passed.log"

    def __init__(self, namespace: str, version: bytes):
        self.namespace = namespace
        self.version = version
        self._dir: Path | None | bool = False
        self._passed: set[bytes] | None = None  # the log's digests, read once, plus those remembered since

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

    def _read(self, d: Path) -> set[bytes]:
        if self._passed is None:
            try:
                self._passed = set((d / self.LOG).read_bytes().split(b"\n"))
            except OSError:  # no log yet, or an unreadable one: every digest is new
                self._passed = set()
        return self._passed

    def is_valid(self, key: str) -> bool:
        d = self.directory
        return d is not None and key.encode() in self._read(d)

    def remember(self, key: str) -> None:
        d = self.directory
        if d is None:
            return
        line = key.encode()
        self._read(d).add(line)
        try:
            self._append(d, line + b"\n")
        except FileNotFoundError:  # no folder yet (or it went away): made, then appended to
            try:
                d.mkdir(parents=True, exist_ok=True)
                self._append(d, line + b"\n")
            except OSError:
                pass
        except OSError:
            pass

    def _append(self, d: Path, line: bytes) -> None:
        fd = os.open(d / self.LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


# Bump when what "valid" means changes without the schema bytes changing.
CACHE_VERSION = b"tilefit-device-db-1"


def _cache() -> ValidityCache:
    return ValidityCache("device_db", CACHE_VERSION)  # reads the environment each time (tests set it)


def cache_dir() -> Path | None:
    """The folder of the validity log, or None when caching is off."""
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
