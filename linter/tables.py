"""A config file as tilefit sees it: its name's metadata, its JSON, and its batch entries."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Iterator

from .families import TableMeta, classify
from .jsonpos import JsonDocument, JsonError
from .readfile import DEFAULT_LIMIT, read_bytes

# Top-level keys that are not batch sizes but that an engine knowingly accepts.
METADATA_KEYS = {"triton_version"}


class ReadError(Exception):
    """A file could not be read at all (permissions, a folder, vanished)."""


@dataclass
class ConfigTable:
    path: str  # as shown in diagnostics
    meta: TableMeta
    data: bytes = b""
    doc: JsonDocument | None = None
    error: JsonError | None = None
    read_error: str | None = None
    _entries: list | None = field(default=None, repr=False)

    @property
    def value(self) -> Any:
        return self.doc.value if self.doc is not None else None

    def entries(self) -> list[tuple[str, Any]]:
        """(batch key, entry) pairs of a flat batch-size table, in file order.

        Duplicate keys are kept (the engine keeps the last one); metadata keys are left out.
        """
        if self._entries is None:
            value = self.value
            if not isinstance(value, dict):
                self._entries = []
            else:
                pairs = getattr(value, "pairs", None) or value.items()
                self._entries = [(k, v) for k, v in pairs if k not in METADATA_KEYS]
        return self._entries

    def live_entries(self) -> list[tuple[str, Any]]:
        """The entries ``json.load`` keeps: of a duplicated batch key only the last one (the
        earlier ones are dead text, reported by KEY002, never launched, never fixed)."""
        entries = self.entries()
        if self.doc is None or not self.doc.has_duplicates or not getattr(self.value, "pairs", None):
            return entries
        last = {k: i for i, (k, _) in enumerate(entries)}
        return [pair for i, pair in enumerate(entries) if last[pair[0]] == i]

    def iter_entries(self) -> Iterator[tuple[str, Any]]:
        return iter(self.entries())


# int() refuses longer digit strings (sys.get_int_max_str_digits(); the engines' int(key) too)
MAX_KEY_DIGITS = 4300


def batch_size_of(key: str) -> int | None:
    """The batch size a key names, as the engines read it with ``int(key)``: decimal ASCII digits
    only (None for anything else, and for more digits than ``int()`` converts)."""
    if key.isascii() and key.isdigit() and len(key) <= MAX_KEY_DIGITS:
        return int(key)
    return None


def read_table(path: str, display_path: str | None = None, meta: TableMeta | None = None,
               data: bytes | None = None, limit: int | None = DEFAULT_LIMIT) -> ConfigTable:
    """Read (unless ``data`` is given; only a regular file of at most ``limit`` bytes, see
    :mod:`tilefit.readfile`) and parse one file. Never raises for bad content: the table
    carries the error."""
    meta = meta or classify(path)
    if meta is None:
        raise ValueError(f"{path} is not a recognised tuning-config file name")
    table = ConfigTable(display_path or path, meta)
    try:
        if data is not None:
            table.data = data
        else:
            table.data = read_bytes(path, limit)
    except OSError as exc:
        table.read_error = exc.strerror or str(exc)
        return table
    try:
        table.doc = JsonDocument.parse(table.data)
    except JsonError as exc:
        table.error = exc
    return table


def display_path(path: str) -> str:
    """Paths are shown as given, with POSIX separators."""
    return path.replace(os.sep, "/") if os.sep != "/" else path
