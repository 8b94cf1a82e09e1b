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
``fullDescription``, ``docs/rules.md``); its first line is the summary. ``examples`` are checked
by the test suite: each example is a small file, whether the rule fires on it and, for a fixable
rule, the text ``tilefit check --fix`` makes of it (Fixit's ``expected_replacement``).

The class also says how the rest of tilefit treats the rule, so nothing else lists codes:

* ``fix_availability`` (ruff's: never, sometimes, always) and ``fix_planner``, what makes the
  fix: :attr:`Planner.ENTRY`, the fixer's search over a table entry's configs
  (:mod:`tilefit.fix.planner`; the fixer, ``tune`` and the CLI's hints take their codes from
  here), or :attr:`Planner.CALLSITE`, byte edits of literals the rule attaches to its own
  findings (:mod:`tilefit.fix.python` applies them);
* ``options``: per-rule settings read from ``[tool.tilefit.rules.CODE]``, validated when the
  configuration loads (an unknown option or a wrong type is a configuration error, exit 2),
  and read by the rule with ``self.option(name)``.
"""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass, field
from typing import Any, ClassVar, Collection, Iterable, Iterator, Mapping

from tilefit.model import Severity


def _kernels():
    """:mod:`tilefit.kernels`, imported on first use (it imports the rules' families) and kept:
    a rule's family test runs once per table and rule."""
    global _KERNELS
    if _KERNELS is None:
        from tilefit import kernels

        _KERNELS = kernels
    return _KERNELS


_KERNELS = None


class TableFamilies(Collection[str]):
    """The config families whose entries launch a registered kernel (``tilefit.kernels.
    table_names()``, read when asked, so a family registered later counts), plus ``extra``."""

    def __init__(self, extra: Iterable[str] = ()):
        self.extra = tuple(extra)

    def _names(self) -> tuple[str, ...]:
        from tilefit import kernels

        return tuple(dict.fromkeys((*kernels.table_names(), *self.extra)))

    def __contains__(self, family: object) -> bool:
        return family in self.extra or (isinstance(family, str) and _kernels().table(family) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return f"TableFamilies({', '.join(self._names())})"


LINTED_TABLES = TableFamilies()


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
    # What identifies this finding across reformatting (defaults to the entry's content).
    identity: str | None = None
    # A byte offset to point at when the file has no parsed document (invalid JSON).
    offset: int | None = None
    # CALLSITE rules: where in the .py file (default: the site's anchor) and a fix of byte edits.
    span: Any = None  # tilefit.model.Span
    fix: Any = None  # tilefit.model.Fix; only rules whose fix_planner is Planner.CALLSITE


@dataclass(frozen=True)
class Example:
    """A file name and its content; ``fails`` says whether the rule must fire on it, ``fixed``
    what ``tilefit check --fix`` (``--unsafe-fixes`` with ``unsafe``) makes of the file."""

    file_name: str
    content: str
    fails: bool
    targets: tuple[str, ...] = ()
    note: str = ""
    fixed: str | None = None
    unsafe: bool = False


class FixAvailability(enum.Enum):
    """Whether a rule's findings come with a fix (ruff's ``FixAvailability``)."""

    NONE = "none"
    SOMETIMES = "sometimes"
    ALWAYS = "always"


class Planner(enum.Enum):
    """What makes a rule's fixes."""

    ENTRY = "entry"  # tilefit.fix.planner: the fastest config that fits, searched per table entry
    CALLSITE = "callsite"  # the rule's own findings carry byte edits of a Python literal


_KIND_NAMES = {int: "an integer", float: "a number", bool: "a boolean", str: "a string", list: "a list of strings"}


@dataclass(frozen=True)
class Option:
    """A per-rule setting: ``[tool.tilefit.rules.CODE] name = value``."""

    name: str  # kebab-case, as written in TOML
    type: type  # int, float, bool, str or list (of strings)
    default: Any
    help: str
    minimum: int | float | None = None
    choices: tuple | None = None

    def validate(self, value: Any) -> Any:
        """The value, or a ValueError that says what was expected."""
        kind = self.type
        ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok = float(value), True
        if kind is list and ok and not all(isinstance(v, str) for v in value):
            ok = False
        if not ok:
            raise ValueError(f"must be {_KIND_NAMES.get(kind, kind.__name__)}, got {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"must be at least {self.minimum}, got {value!r}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
        return value


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    scope: ClassVar[Scope]
    # Families the rule applies to; None means every recognised file. LINTED_TABLES: the config
    # families whose entries launch a registered kernel (tilefit.kernels), looked up when asked.
    families: ClassVar[Collection[str] | None] = LINTED_TABLES
    # Selected unless the user's selection leaves it out (ruff's preview rules are not).
    default_enabled: ClassVar[bool] = True
    fix_availability: ClassVar[FixAvailability] = FixAvailability.NONE
    fix_planner: ClassVar[Planner | None] = None
    options: ClassVar[tuple[Option, ...]] = ()
    examples: ClassVar[tuple[Example, ...]] = ()
    # TARGET rules: also called for extra targets that cannot run the table's kernel on Triton
    # (``TargetContext.extra_unrunnable``); the others never see those devices.
    judges_unrunnable_targets: ClassVar[bool] = False
    # TARGET rules: True when the rule finds nothing for an entry and device class whose every variant
    # has an estimate (``estimator.estimate(spec, arch, limit)``, ``limit`` the class's per-block
    # opt-in limit, known) that is usable and certainly fits it (``Estimate.usable``,
    # ``certainly_fits``, not ``certainly_over``), and none of which is a known compile failure
    # (``estimator.compile_failure``). The engine looks at the variants once
    # (:func:`tilefit.engine.variants_fit`) and skips every such rule where they fit, instead of
    # calling each (most entries fit most targets).
    silent_when_variants_fit: ClassVar[bool] = False
    # TARGET rules: False when ``check`` never reads ``TargetContext.variants``; where every rule
    # the engine still calls on a fitting entry says so, it need not build them (its screen already
    # knows they fit: see ``Engine._merged_findings``)
    reads_variants: ClassVar[bool] = True
    # TARGET rules: False when ``check`` reads nothing of the entry's launch-order group (its kernel
    # family's ``group_name``, GROUP_SIZE_M): neither its value nor whether the entry sets it. Where
    # every rule that judged an entry on a file's device classes says so (and the variants screen
    # was shared by the group-free entry), the engine shares the entry's merged findings with the
    # entries that differ from it only in the group (see ``Engine._merged_findings``). A rule that
    # reads the variants (``reads_variants``) reads the group only through what the estimator says of
    # their specs, which carry it: the engine shares its findings only where the estimator says that
    # holds for every group (``Estimator.group_free``)
    reads_launch_group: ClassVar[bool] = True
    # TARGET rules: False when ``check`` reads nothing of the entry at all (only the table's kernel:
    # its family, dtype, quantisation, engine and folder; the device facts of ``device_facts``;
    # ``TargetContext.extra_unrunnable``): the engine then asks it once per (kernel, those facts),
    # not once per entry
    reads_entry: ClassVar[bool] = True

    def __init__(self, options: Mapping[str, Any] | None = None):
        """``options``: validated values of ``[tool.tilefit.rules.CODE]``; the rest default."""
        values = {o.name: o.default for o in type(self).options}
        values.update(options or {})
        self.option_values = values

    def option(self, name: str) -> Any:
        return self.option_values[name]

    def check(self, ctx) -> Iterable[Finding]:  # pragma: no cover - interface
        raise NotImplementedError

    def device_facts(self, device) -> tuple | None:
        """TARGET rules: the facts of a target device that this rule's findings depend on (besides
        the entry and ``TargetContext.extra_unrunnable``), when they are fewer than a device
        class's (the vendor alone, the thread limits, the fp8 types): device classes with equal
        facts then share the rule's findings for an entry (the engine checks the entry once, not
        once per class). None: the whole class."""
        return None

    @classmethod
    def fixable(cls) -> bool:
        return cls.fix_availability is not FixAvailability.NONE

    @classmethod
    def validate_options(cls, table: Mapping[str, Any]) -> dict[str, Any]:
        """``[tool.tilefit.rules.CODE]`` checked against the declared options (ValueError)."""
        known = {o.name: o for o in cls.options}
        out = {}
        for name, value in table.items():
            opt = known.get(name) or known.get(name.replace("_", "-"))
            if opt is None:
                listed = ", ".join(known) if known else "none"
                raise ValueError(f"unknown option {name!r} (options of {cls.code}: {listed})")
            try:
                out[opt.name] = opt.validate(value)
            except ValueError as exc:
                raise ValueError(f"{opt.name} {exc}") from None
        return out

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

    @property
    def meta(self):
        return self.table.meta


@dataclass
class EntryContext:
    file: FileContext
    key: str
    entry: Any
    _problems: Any = field(default=None, repr=False, compare=False)

    @property
    def meta(self):
        return self.file.table.meta

    @property
    def parameter_problems(self):
        """:func:`tilefit.parameters.entry_problems` of the entry (a dict), found on first use and
        kept: the rules that judge its items (VAL002-VAL005) share the one pass."""
        found = self._problems
        if found is None:
            from tilefit.parameters import entry_problems

            found = self._problems = entry_problems(self.file.table.meta.family, self.file.engine, self.entry)
        return found


@dataclass
class TargetContext:
    entry_ctx: EntryContext
    device: Any  # the first device of the class
    devices: tuple  # every device of the class (same limits, same arch)
    variants: tuple  # tilefit.variants.Variant
    estimator: Any  # tilefit.estimate.Estimator
    # True: extra targets (not the device the file names) on which Triton cannot run the table's
    # dtype, so the engine does not run this kernel there (fp8 e4m3 before sm_89)
    extra_unrunnable: bool = False

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
