"""The data every stage passes on: positions, edits, fixes and diagnostics (frozen dataclasses)."""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Any, Mapping


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Applicability(enum.IntEnum):
    """How safe a fix is. A fix applies when its applicability is at least the required one."""

    DISPLAY_ONLY = 0
    UNSAFE = 1
    SAFE = 2

    @property
    def label(self) -> str:
        return {0: "display-only", 1: "unsafe", 2: "safe"}[int(self)]


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    column: int  # 1-based, in characters


@dataclass(frozen=True)
class Span:
    start: Position
    end: Position
    start_offset: int  # byte offsets into the file
    end_offset: int


FILE_START = Span(Position(1, 1), Position(1, 1), 0, 0)


@dataclass(frozen=True)
class Edit:
    """Replace the bytes ``[start_offset, end_offset)`` of the original file by ``content``."""

    start_offset: int
    end_offset: int
    content: str
    start: Position | None = None
    end: Position | None = None


@dataclass(frozen=True)
class Fix:
    title: str
    edits: tuple[Edit, ...]
    applicability: Applicability
    # What the entry becomes (JSON pointer -> value); the fixer re-parses and checks it.
    expected: Mapping[str, Any] = field(default_factory=dict)

    def applies(self, required: Applicability) -> bool:
        return self.applicability >= required


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    path: str  # as given on the command line, POSIX separators
    span: Span
    severity: Severity
    pointer: str | None = None  # RFC 6901 pointer into the JSON file; None for Python files
    target: str | None = None  # device key the verdict is for; None when device-independent
    fix: Fix | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    # A stable identity that survives reformatting (no line numbers): see ``fingerprint_of``.
    fingerprint: str = ""

    @property
    def sort_key(self):
        return (self.path, self.span.start.line, self.span.start.column, self.code, self.target or "")


def build_frozen(cls, fields: dict):
    """An instance of the frozen dataclass ``cls`` with ``fields`` (every field, none left to its
    default; no ``__post_init__``), without its ``__init__``, which sets each field through
    ``object.__setattr__``: the same object (equality, hash, repr, pickle), its dict filled in C.
    For the objects a check builds by the tens of thousands (diagnostics, their spans, estimates,
    answers): the engine builds a diagnostic per finding, a warm run one per stored row, each from
    a dict of its fields in the class's order."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def fingerprint_of(code: str, path: str, anchor: str | None, target: str | None, content: str) -> str:
    """sha256 over what identifies a finding, not where it is printed: each part, UTF-8, then a
    NUL byte."""
    text = f"{code}\0{path}\0{anchor or ''}\0{target or ''}\0{content}\0"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
