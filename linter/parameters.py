"""The launch parameters each config family's kernel accepts.

The data is the kernel family's that the config family launches (``tables.parameters`` of its
``family.json``, :func:`tilefit.kernels.table`): ``type`` is the JSON type a value must have;
``engines`` lists the engines whose loader and kernel accept the key (a key another engine's
kernel lacks raises at launch); ``backends`` lists Triton backends that accept a launch option.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from . import kernels


def family_parameters(family: str) -> Mapping[str, Any]:
    """``{"required": [...], "parameters": {name: rule}}`` of a config family ({} when unknown)."""
    owner = kernels.table(family)
    return (owner.table.get("parameters") or {}) if owner is not None else {}


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def domain_problems(family: str, entry) -> list[tuple[str, str, bool]]:
    """``(parameter, message, hard)`` for each integer value of ``entry`` outside its domain
    (``parameters.json``: power of two, ``minimum``, ``maximum``; ``checked_maximum``, the
    largest value tilefit estimates, is not ``hard``). Non-integers are VAL002's."""
    known = family_parameters(family).get("parameters", {})
    out = []
    for key, value in entry.items():
        spec = known.get(key)
        if spec is None or type(value) is not int:
            continue
        if spec.get("power_of_two") and not is_power_of_two(value):
            out.append((key, f"{key}={_short(value)} is not a power of two", True))
            continue
        lo, hi, checked = spec.get("minimum"), spec.get("maximum"), spec.get("checked_maximum")
        if lo is not None and value < lo:
            out.append((key, f"{key}={_short(value)} is below the minimum {lo}", True))
        elif hi is not None and value > hi:
            out.append((key, f"{key}={_short(value)} is above the maximum {hi}", True))
        elif checked is not None and value > checked:
            out.append((key, f"{key}={_short(value)} is above {checked}, the largest value tilefit checks "
                             "(no shipped config uses more); the entry is not estimated", False))
    return out


def in_domain(family: str, entry) -> bool:
    """Whether every integer launch parameter of ``entry`` is one tilefit estimates and compiles
    (``not domain_problems(family, entry)``, without building the messages: the fix planner asks
    this of every candidate it visits)."""
    return domain_test(family)(entry)


def domain_test(family: str) -> Callable[[Mapping], bool]:
    """:func:`in_domain` of the config family ``family``, its parameters' rules read once: each
    bounded integer's values as one container (:func:`_values`)."""
    known = family_parameters(family).get("parameters", {})
    hit = _TESTS.get(family)
    if hit is None or hit[0] is not known:
        values = {key: _values(spec) for key, spec in known.items() if spec is not None}
        hit = _TESTS[family] = (known, _values_test({k: v for k, v in values.items() if v is not None}))
    return hit[1]


def _values(spec: Mapping):
    """The integers a parameter's rule lets tilefit estimate, as a container (None: any): the
    powers of two up to its maximum, a ``range``, or :class:`_AtLeast` a minimum."""
    lo, hi, checked = spec.get("minimum"), spec.get("maximum"), spec.get("checked_maximum")
    highs = [h for h in (hi, checked) if h is not None]
    top = min(highs) if highs else None
    if spec.get("power_of_two"):
        if top is None:
            return _PowerOfTwo(lo)
        return frozenset(1 << b for b in range(max(top, 0).bit_length()) if lo is None or 1 << b >= lo)
    if top is not None:
        return range(lo, top + 1) if lo is not None else _AtMost(top)
    return _AtLeast(lo) if lo is not None else None


class _AtLeast:
    __slots__ = ("lo",)

    def __init__(self, lo):
        self.lo = lo

    def __contains__(self, value: int) -> bool:
        return value >= self.lo


class _AtMost:
    __slots__ = ("hi",)

    def __init__(self, hi):
        self.hi = hi

    def __contains__(self, value: int) -> bool:
        return value <= self.hi


class _PowerOfTwo:
    __slots__ = ("lo",)

    def __init__(self, lo):
        self.lo = lo

    def __contains__(self, value: int) -> bool:
        return is_power_of_two(value) and (self.lo is None or value >= self.lo)


def _values_test(values: dict[str, object]) -> Callable[[Mapping], bool]:
    get = values.get

    def test(entry) -> bool:
        for key, value in entry.items():
            allowed = get(key)
            if allowed is not None and type(value) is int and value not in allowed:
                return False
        return True

    return test


# family -> (its parameters' rules, domain_test's function of them)
_TESTS: dict[str, tuple] = {}


def _short(value: int) -> str:
    """An integer as text, a huge one abbreviated (a 4000-digit number is no message)."""
    if value.bit_length() <= 64:
        return str(value)
    if value > 0 and value & (value - 1) == 0:
        return f"2**{value.bit_length() - 1}"
    return f"an integer of {value.bit_length()} bits"
