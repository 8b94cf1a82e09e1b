"""The rule registry: one module per rule, listed here explicitly (yamllint's style).

``RULES`` maps each code to its class. Import-time checks keep the registry honest: codes are
unique and well-formed, every rule has a docstring, a name and a scope, and a rule has a fix
planner exactly when it says it is fixable. :func:`fixable_codes` is where the fixer, ``tune`` and
the CLI learn which codes a fix clears; :func:`validate_rule_options` checks
``[tool.tilefit.rules]``.
"""

from __future__ import annotations

import re

from .base import Example, FixAvailability, Finding, Option, Planner, Rule, Scope
from .cmp001_kernel_does_not_compile import CMP001
from .dev001_unknown_device import DEV001
from .dev002_dtype_unsupported import DEV002
from .est001_no_estimate import EST001
from .est002_callsite_not_evaluated import EST002
from .io001_unreadable_file import IO001
from .key001_batch_key_not_integer import KEY001
from .key002_duplicate_key import KEY002
from .name001_never_loaded import NAME001
from .name002_name_grammar import NAME002
from .occ001_one_block_per_sm import OCC001
from .sch001_invalid_json import SCH001
from .sch002_table_structure import SCH002
from .sch003_family_schema import SCH003
from .smem001_shared_memory_per_block import SMEM001
from .smem002_launch_shared_memory import SMEM002
from .smem003_autotune_shared_memory import SMEM003
from .thr001_threads_per_block import THR001
from .val001_missing_parameter import VAL001
from .val002_parameter_type import VAL002
from .val003_value_domain import VAL003
from .val004_unknown_parameter import VAL004
from .val005_foreign_launch_option import VAL005

_ALL: tuple[type[Rule], ...] = (
    IO001, SCH001, SCH002, SCH003, KEY001, KEY002, NAME001, NAME002, DEV001, DEV002,
    VAL001, VAL002, VAL003, VAL004, VAL005, SMEM001, CMP001, OCC001, THR001, EST001,
    # kernel call sites in Python sources (scope CALLSITE)
    SMEM002, SMEM003, EST002,
)

_CODE = re.compile(r"^[A-Z]{2,5}\d{3}$")


def _registry(rules) -> dict[str, type[Rule]]:
    out: dict[str, type[Rule]] = {}
    for rule in rules:
        if not _CODE.match(rule.code):
            raise RuntimeError(f"rule code {rule.code!r} does not match {_CODE.pattern}")
        if rule.code in out:
            raise RuntimeError(f"rule code {rule.code} registered twice")
        if not rule.__doc__ or not rule.name or not isinstance(rule.scope, Scope):
            raise RuntimeError(f"rule {rule.code} lacks a docstring, name or scope")
        if rule.fixable() != (rule.fix_planner is not None):
            raise RuntimeError(f"rule {rule.code}: a fixable rule names its fix planner, and only a fixable one")
        out[rule.code] = rule
    return out


RULES: dict[str, type[Rule]] = _registry(_ALL)


def fixable_codes(planner: Planner | None = None) -> tuple[str, ...]:
    """Codes of the rules whose findings a fix clears, in registry order; with ``planner``,
    only those it fixes (``Planner.ENTRY``: the table fixer's, which ``tune`` re-tunes too)."""
    return tuple(code for code, rule in RULES.items()
                 if rule.fixable() and (planner is None or rule.fix_planner is planner))


def validate_rule_options(table, source: str) -> dict[str, dict]:
    """``[tool.tilefit.rules]``: {code: {option: value}}, each checked against the rule's
    declared options. Raises ValueError with the place and the reason."""
    import difflib

    if not isinstance(table, dict):
        raise ValueError(f"{source}: [tool.tilefit.rules] must be a table of rule codes")
    out: dict[str, dict] = {}
    for code, options in table.items():
        rule = RULES.get(code)
        if rule is None:
            close = difflib.get_close_matches(code.upper(), RULES, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"{source}: [tool.tilefit.rules.{code}]: no rule {code!r}{hint}")
        if not isinstance(options, dict):
            raise ValueError(f"{source}: [tool.tilefit.rules.{code}] must be a table of options")
        try:
            out[code] = rule.validate_options(options)
        except ValueError as exc:
            raise ValueError(f"{source}: [tool.tilefit.rules.{code}] {exc}") from None
    return out


__all__ = ["RULES", "Rule", "Finding", "Example", "FixAvailability", "Option", "Planner", "Scope",
           "fixable_codes", "validate_rule_options"]
