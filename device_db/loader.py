"""Reads device files (bundled and the user's), validates them and builds a :class:`DeviceDB`.

Bundled data: ``devices/*.json`` (one device per file), ``groups.json`` and the two schemas,
read through :mod:`importlib.resources`. User files (``extra_files``) hold one device object or a
list of them and are validated against the same ``schema.json``.

Precedence: a user device whose ``key`` equals a bundled device's key **replaces** the bundled
device entirely (no field merge). Two user devices with one key, or any clash of aliases, file
names or torch names between the resulting devices, is a :class:`DeviceDBError`.

Inheritance: a card that omits (leaves out, not ``null``) a per-architecture field
(:data:`~.model.ARCH_FIELDS`: shared memory, registers, threads, blocks, warp size, Triton FP8
dtypes, MMA, features) takes it from the arch entry named by its ``arch``, with status ``I``.

Speed: the bundled database is read and built once per process. Schema validation is skipped
when the content digest is in the validation cache (:mod:`.cache`), so a warm start never
imports jsonschema; for the bundled files it is skipped too when their digest is the one
shipped in ``validated.sha256`` (:data:`VALIDATED`): the bytes the test suite validated in full
(tests/test_device_db.py checks that the file names the current bundle), so a cold start -- a
fresh cache, as in CI -- does not validate our own data again. Changed bundled bytes miss it and
are validated as before; a user's file is always validated (or found in the cache).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from . import cache, validation
from .database import DeviceDB
from .errors import DeviceDBError
from .groups import GroupRule, parse_groups
from .model import ARCH_FIELDS, Device

_PACKAGE = __package__ or "tilefit.device_db"
# the digest (cache.digest of bundle_parts()) of the bundled files the test suite validated
VALIDATED = "validated.sha256"


@dataclass(frozen=True)
class _Record:
    """One device object as read from a file, before it becomes a :class:`Device`."""

    data: Mapping[str, Any]
    label: str  # the file
    path: str  # JSON path of the object in the file: "$" or "$[3]"

    @property
    def origin(self) -> str:
        return self.label if self.path == "$" else f"{self.label}: {self.path}"


@dataclass(frozen=True)
class _Bundle:
    schema: bytes
    records: tuple[_Record, ...]
    groups: tuple[GroupRule, ...]


def load_database(extra_files: Sequence[str | Path] = ()) -> DeviceDB:
    """Load the bundled device database plus the devices of ``extra_files``.

    Each extra file holds one device object or a list of device objects (``schema.json``); a
    device with the key of a bundled one replaces it. Raises :class:`DeviceDBError` with a
    one-line ``<file>: <json path>: <problem>`` message for unreadable, non-JSON or invalid
    files and for clashing keys, aliases or names. Without extra files the same immutable
    :class:`DeviceDB` is returned on every call.
    """
    if not extra_files:
        return _bundled_database()
    bundle = _bundled()
    user: list[_Record] = []
    seen: set[Path] = set()
    for entry in extra_files:
        path = Path(entry)
        resolved = path.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        user.extend(_read_user_file(path, bundle.schema))
    return _build(_merge(bundle.records, user), bundle.groups)


# ---------------------------------------------------------------------------- bundled data


@lru_cache(maxsize=1)
def _bundled_database() -> DeviceDB:
    bundle = _bundled()
    return _build(list(bundle.records), bundle.groups)


@lru_cache(maxsize=1)
def _bundled() -> _Bundle:
    root = resources.files(_PACKAGE)
    schema, groups_schema, groups_text, files = _bundle_files(root)
    records = [
        rec for label, _, data in files for rec in _records(label, _parse_json(label, data))
    ]
    groups_label = str(root / "groups.json")
    groups_data = _parse_json(groups_label, groups_text)
    key = _bundle_digest(schema, groups_schema, groups_text, files)
    if key != shipped_digest() and not cache.is_valid(key):
        for rec in records:
            validation.validate(schema, rec.label, [(rec.path, rec.data)])
        validation.validate(groups_schema, groups_label, [("$", groups_data)])
        cache.remember_valid(key)
    for rec in records:
        _check_record(rec)
    return _Bundle(schema, tuple(records), parse_groups(groups_data))


def _bundle_files(root) -> tuple[bytes, bytes, bytes, list[tuple[str, str, bytes]]]:
    """The bundled schema, groups schema and groups file, and each device file as ``(label,
    name, bytes)`` in name order."""
    entries = sorted(
        (e for e in (root / "devices").iterdir() if e.name.endswith(".json")), key=lambda e: e.name
    )
    return ((root / "schema.json").read_bytes(), (root / "groups.schema.json").read_bytes(),
            (root / "groups.json").read_bytes(), [(str(e), e.name, e.read_bytes()) for e in entries])


def _bundle_digest(schema: bytes, groups_schema: bytes, groups_text: bytes, files) -> str:
    """What the validity of the bundled files depends on: every byte of them and of both schemas."""
    return cache.digest(
        schema, groups_schema, groups_text, *(name.encode() + b"\0" + data for _, name, data in files)
    )


def bundle_digest() -> str:
    """The digest of the bundled files as they are now (what :data:`VALIDATED` must hold)."""
    return _bundle_digest(*_bundle_files(resources.files(_PACKAGE)))


def shipped_digest() -> str:
    """The digest :data:`VALIDATED` holds ("" when it is missing or unreadable: then the bundled
    files are validated as a user's are)."""
    try:
        return (resources.files(_PACKAGE) / VALIDATED).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""


# ---------------------------------------------------------------------------- user files


# A user's device file is a few KB; anything larger is no device file.
MAX_DEVICE_FILE = 16 * 1024 * 1024


def _read_bytes(path: Path) -> bytes:
    """The bytes of a regular file of at most MAX_DEVICE_FILE bytes, opened without blocking (a
    FIFO or a device named as a device file would hang or read forever): tilefit.readfile's
    guard, kept here because the device database imports nothing of the rest of tilefit."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, "not a regular file", str(path))
        if st.st_size > MAX_DEVICE_FILE:
            raise OSError(0, f"{st.st_size} bytes, over the {MAX_DEVICE_FILE} limit", str(path))
        if hasattr(os, "O_NONBLOCK"):
            os.set_blocking(fd, True)
        data = os.read(fd, MAX_DEVICE_FILE + 1)
        while data and len(data) <= MAX_DEVICE_FILE:
            more = os.read(fd, MAX_DEVICE_FILE + 1 - len(data))
            if not more:
                break
            data += more
        if len(data) > MAX_DEVICE_FILE:
            raise OSError(0, f"over the {MAX_DEVICE_FILE} byte limit", str(path))
        return data
    finally:
        os.close(fd)


def _read_user_file(path: Path, schema: bytes) -> list[_Record]:
    label = str(path)
    try:
        data = _read_bytes(path)
    except OSError as exc:
        raise DeviceDBError(f"{label}: cannot read device file: {exc.strerror or exc}") from None
    records = _records(label, _parse_json(label, data))
    key = cache.digest(schema, b"user-file", data)
    if not cache.is_valid(key):
        for rec in records:
            validation.validate(schema, label, [(rec.path, rec.data)])
        cache.remember_valid(key)
    for rec in records:
        _check_record(rec)
    return records


# ---------------------------------------------------------------------------- parsing


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return obj


def _parse_json(label: str, data: bytes) -> Any:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DeviceDBError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise DeviceDBError(f"{label}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except _DuplicateKey as exc:
        raise DeviceDBError(f"{label}: duplicate JSON object key {exc.key!r}") from None
    except RecursionError:
        raise DeviceDBError(f"{label}: invalid JSON: nesting too deep") from None
    except ValueError as exc:  # a number of more than 4300 digits
        raise DeviceDBError(f"{label}: invalid JSON: {exc}") from None


_JSON_TYPES = {bool: "a boolean", int: "a number", float: "a number", str: "a string", type(None): "null"}


def _records(label: str, obj: Any) -> list[_Record]:
    if isinstance(obj, dict):
        return [_Record(obj, label, "$")]
    if isinstance(obj, list):
        return [_Record(item, label, f"$[{i}]") for i, item in enumerate(obj)]
    raise DeviceDBError(
        f"{label}: $: expected a device object or a list of device objects, got {_JSON_TYPES.get(type(obj), 'a value')}"
    )


def _check_record(rec: _Record) -> None:
    """Rules the schema cannot express."""
    data = rec.data
    cc = data.get("compute_capability")
    if cc is not None and data["arch"] != f"sm_{cc[0]}{cc[1]}":
        raise DeviceDBError(
            f"{rec.label}: {rec.path}.compute_capability: {cc} does not match arch {data['arch']!r}"
        )


# ---------------------------------------------------------------------------- assembly


def _merge(bundled: Iterable[_Record], user: Iterable[_Record]) -> list[_Record]:
    by_key: dict[str, _Record] = {rec.data["key"]: rec for rec in bundled}
    user_keys: dict[str, _Record] = {}
    for rec in user:
        key = rec.data["key"]
        first = user_keys.get(key)
        if first is not None:
            raise DeviceDBError(
                f"{rec.label}: {rec.path}.key: duplicate device key {key!r} (also defined in {first.origin})"
            )
        user_keys[key] = rec
        by_key[key] = rec
    return list(by_key.values())


def _inherit(records: list[_Record]) -> list[_Record]:
    arch = {rec.data["arch"]: rec.data for rec in records if rec.data["kind"] == "arch"}
    out = []
    for rec in records:
        data = rec.data
        base = arch.get(data["arch"]) if data["kind"] == "card" else None
        missing = [f for f in ARCH_FIELDS if base is not None and f not in data and f in base]
        if missing:
            data = dict(data)
            status = dict(data.get("status", {}))
            for f in missing:
                data[f] = base[f]
                if base[f] not in (None, []):
                    status.setdefault(f, "I")
            data["status"] = status
            rec = _Record(data, rec.label, rec.path)
        out.append(rec)
    return out


def _build(records: list[_Record], groups: Sequence[GroupRule]) -> DeviceDB:
    devices = [Device.from_dict(rec.data, rec.origin) for rec in _inherit(records)]
    return DeviceDB(devices, groups)
