"""The rule interface: every rule is a class in a module of its own.

A rule declares its code, name, severity and the *scope* it visits; the engine walks the
files and calls :meth:`Rule.check` with a context of that scope:

=========  ===============================================  ================================
scope      called for                                       context
=========  ===============================================  ================================
FILE       every file, once                                 :class:`FileContext`
ENTRY      every batch entry of a Triton launch table       :class:`EntryContext`
TARGET     every entry x every class of target devices      :class:`TargetContext`
CALLSITE   every kernel call site of the scanned .py files  :class:`CallsiteContext`
=========  ===============================================  ================================

A rule yields :class:`Finding` objects: position-free results (a message, where in the file or
entry they point, data, an optional value fix). The engine turns them into diagnostics with
line, column and byte offsets, so rules never handle offsets (CALLSITE rules, which see Python
source, give the span of the site and may attach a :class:`~tilefit.model.Fix` of byte edits). Findings of ENTRY and TARGET rules
depend only on the entry's values and the context's ``memo_key``, so the engine computes them
once per distinct entry and reuses them (real tables repeat the same configs many times).

The class docstring is the rule's documentation (``tilefit rule CODE``, SARIF
``fullDescription``); its first line is the summary. ``examples`` are checked by the test suite:
each example is a small file and whether the rule fires on it.
"""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping

from tilefit.model import Applicability, Severity


class Scope(enum.Enum):
    FILE = "file"
    ENTRY = "entry"
    TARGET = "target"
    CALLSITE = "callsite"  # launches and autotune lists in Python sources


@dataclass(frozen=True)
class Finding:
    message: str
    at: tuple = ()  # pointer relative to the scope: file root (FILE) or the entry (ENTRY, TARGET)
    at_key: bool = False  # point at the member's key instead of its value
    severity: Severity | None = None  # overrides the rule's severity for this finding
    data: Mapping[str, Any] = field(default_factory=dict)
    # A fix that sets entry values: {parameter: new value}. Only for ENTRY/TARGET rules.
    replace: Mapping[str, Any] | None = None
    fix_title: str | None = None
    applicability: Applicability = Applicability.SAFE
    # What identifies this finding across reformatting (defaults to the entry's content).
    identity: str | None = None
    # A byte offset to point at when the file has no parsed document (invalid JSON).
    offset: int | None = None
    # CALLSITE rules: where in the .py file (default: the site's anchor) and a fix of byte edits.
    span: Any = None  # tilefit.model.Span
    fix: Any = None  # tilefit.model.Fix


@dataclass(frozen=True)
class Example:
    """A file name and its content; ``fails`` says whether the rule must fire on it."""

    file_name: str
    content: str
    fails: bool
    targets: tuple[str, ...] = ()
    note: str = ""


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    scope: ClassVar[Scope]
    # Families the rule applies to; None means every recognised file.
    families: ClassVar[tuple[str, ...] | None] = ("fused_moe", "w8a8_gemm")
    # Selected unless the user's selection leaves it out (ruff's preview rules are not).
    default_enabled: ClassVar[bool] = True
    fixable: ClassVar[bool] = False
    examples: ClassVar[tuple[Example, ...]] = ()

    def check(self, ctx) -> Iterable[Finding]:  # pragma: no cover - interface
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        return (inspect.getdoc(cls) or "").strip().splitlines()[0]

    @classmethod
    def documentation(cls) -> str:
        return inspect.getdoc(cls) or ""


# -- contexts ----------------------------------------------------------------------------------

@dataclass
class FileContext:
    table: Any  # tilefit.tables.ConfigTable
    db: Any  # tilefit.device_db.DeviceDB
    named_device: Any  # the Device the file name names, or None
    engine: str | None
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def meta(self):
        return self.table.meta


@dataclass
class EntryContext:
    file: FileContext
    key: str
    entry: Any

    @property
    def meta(self):
        return self.file.table.meta


@dataclass
class TargetContext:
    entry_ctx: EntryContext
    device: Any  # the first device of the class
    devices: tuple  # every device of the class (same limits, same arch)
    variants: tuple  # tilefit.variants.Variant
    estimator: Any  # tilefit.estimate.Estimator

    @property
    def entry(self):
        return self.entry_ctx.entry

    @property
    def meta(self):
        return self.entry_ctx.file.table.meta

    @staticmethod
    def target_names() -> str:
        """A placeholder the engine replaces with the devices a finding applies to: findings
        of device classes that come out equal are merged into one diagnostic."""
        return TARGETS


@dataclass
class CallsiteContext:
    """One call site of a Python file: a launch or an autotune list (``site.kind``), the device
    classes to judge it for, and the evaluator that compiles it (memoised across rules)."""

    site: Any  # tilefit.callsites.sites.LaunchSite | AutotuneSite
    classes: tuple  # tilefit.engine.DeviceClass, devices with equal limits and arch
    evaluator: Any  # tilefit.callsites.evaluate.CallsiteEvaluator
    checks: Any = None  # tilefit.callsites.checks.SiteChecks: the shared per-site results

    @property
    def path(self) -> str:
        return self.site.path


# Placeholders in TARGET findings' messages, filled in by the engine after merging classes.
TARGETS = "{targets}"
ARCH = "{arch}"


def format_targets(devices) -> str:
    names = [d.key for d in devices]
    if len(names) <= 3:
        return ", ".join(names)
    return f"{', '.join(names[:3])} and {len(names) - 3} more"
