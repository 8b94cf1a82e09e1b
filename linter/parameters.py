"""The launch parameters each config family's kernel accepts.

The data is the kernel family's that the config family launches (``tables.parameters`` of its
``family.json``, :func:`tilefit.kernels.table`): ``type`` is the JSON type a value must have;
``engines`` lists the engines whose loader and kernel accept the key (a key another engine's
kernel lacks raises at launch); ``backends`` lists Triton backends that accept a launch option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import kernels


def family_parameters(family: str) -> Mapping[str, Any]:
    """``{"required": [...], "parameters": {name: rule}}`` of a config family ({} when unknown)."""
    owner = kernels.table(family)
    return (owner.table.get("parameters") or {}) if owner is not None else {}


def required_parameters(family: str, channelwise: bool = False) -> tuple[str, ...]:
    """The parameters an entry of ``family`` must set (``required``, and for a table that is not
    channel-wise fp8 ``required_unless_channelwise``), found once per family: VAL001 asks of
    every entry."""
    params = family_parameters(family)
    hit = _REQUIRED.get(family)
    if hit is None or hit[0] is not params:
        required = tuple(params.get("required", ()))
        hit = _REQUIRED[family] = (params, (required + tuple(params.get("required_unless_channelwise", ())),
                                            required))
    return hit[1][channelwise]


# config family -> (its parameters table, (required of other tables, required of channel-wise ones))
_REQUIRED: dict[str, tuple] = {}


def is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def domain_problems(family: str, entry) -> list[tuple[str, str, bool]]:
    """``(parameter, message, hard)`` for each integer value of ``entry`` outside its domain
    (``parameters.json``: power of two, ``minimum``, ``maximum``; ``checked_maximum``, the
    largest value tilefit estimates, is not ``hard``). Non-integers are VAL002's."""
    return list(entry_problems(family, None, entry).out_of_domain)


@dataclass(frozen=True)
class EntryProblems:
    """What the entry rules report of one entry's items (VAL002, VAL003, VAL004) and the launch
    options VAL005 judges per backend, each in the entry's key order."""

    wrong_types: tuple[tuple[str, str, Any], ...] = ()  # (parameter, the type it must have, its value)
    out_of_domain: tuple[tuple[str, str, bool], ...] = ()  # as domain_problems gives them
    # (key, None) for a key no parameter of the kernel; (key, engine) for one that engine's kernel lacks
    unknown: tuple[tuple[str, str | None], ...] = ()
    backend_options: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (launch option, the backends that take it)


NO_PROBLEMS = EntryProblems()


def entry_problems(family: str, engine: str | None, entry: Mapping[str, Any]) -> EntryProblems:
    """The problems of ``entry`` (a table entry of config family ``family`` that ``engine`` reads;
    None: any engine), judged in one pass over its items. An item's verdict depends only on the
    family's parameters, the engine and the item, so the verdicts of integer and string values are
    memoised per (family, engine): real tables repeat a few values thousands of times."""
    judge = _judge(family, engine)
    memo = judge.memo
    verdict = judge.verdict
    found = None
    for item in entry.items():
        kind = type(item[1])
        if kind is int or kind is str:  # hashable, and never equal to a value of another type here
            v = memo.get(item, _UNSEEN)
            if v is _UNSEEN:
                v = memo[item] = verdict(*item)
        else:
            v = verdict(*item)
        if v is not None:
            if found is None:
                found = []
            found.append((item, v))
    if found is None:
        return NO_PROBLEMS
    return EntryProblems(
        wrong_types=tuple((key, v[1], value) for (key, value), v in found if v[1] is not None),
        out_of_domain=tuple((key, *v[2]) for (key, _), v in found if v[2] is not None),
        unknown=tuple((key, v[0][0]) for (key, _), v in found if v[0] is not None),
        backend_options=tuple((key, v[3]) for (key, _), v in found if v[3] is not None))


_UNSEEN = object()


class _Judge:
    """The verdicts on single items of one family's entries read by one engine."""

    def __init__(self, known: Mapping[str, Any], engine: str | None):
        self.known = known
        self.engine = engine
        # (key, value) -> None (nothing to say) or (unknown, wrong type, out of domain, backends)
        self.memo: dict[tuple[str, Any], tuple | None] = {}

    def verdict(self, key: str, value: Any) -> tuple | None:
        spec = self.known.get(key)
        if spec is None:
            return ((None,), None, None, None)
        engines = spec.get("engines")
        unknown = (self.engine,) if engines and self.engine and self.engine not in engines else None
        wrong_type = None if _type_ok(value, spec["type"]) else spec["type"]
        domain = _domain_problem(key, value, spec) if type(value) is int else None
        backends = tuple(spec["backends"]) if spec.get("backends") else None
        if unknown is None and wrong_type is None and domain is None and backends is None:
            return None
        return (unknown, wrong_type, domain, backends)


def _judge(family: str, engine: str | None) -> _Judge:
    known = family_parameters(family).get("parameters", {})
    hit = _JUDGES.get((family, engine))
    if hit is None or hit.known is not known:  # a family registered anew since: judged anew
        hit = _JUDGES[(family, engine)] = _Judge(known, engine)
    return hit


# (config family, engine) -> its judge
_JUDGES: dict[tuple[str, str | None], _Judge] = {}


def _type_ok(value: Any, wanted: str) -> bool:
    """Whether ``value`` has the JSON type a parameter's ``type`` names (an integer is no boolean)."""
    if wanted == "int":
        return type(value) is int
    if wanted == "bool":
        return type(value) is bool
    return isinstance(value, str)


def _domain_problem(key: str, value: int, spec: Mapping[str, Any]) -> tuple[str, bool] | None:
    """``(message, hard)`` when the integer ``value`` of parameter ``key`` is outside its domain."""
    if spec.get("power_of_two") and not is_power_of_two(value):
        return (f"{key}={_short(value)} is not a power of two", True)
    lo, hi, checked = spec.get("minimum"), spec.get("maximum"), spec.get("checked_maximum")
    if lo is not None and value < lo:
        return (f"{key}={_short(value)} is below the minimum {lo}", True)
    if hi is not None and value > hi:
        return (f"{key}={_short(value)} is above the maximum {hi}", True)
    if checked is not None and value > checked:
        return (f"{key}={_short(value)} is above {checked}, the largest value tilefit checks "
                "(no shipped config uses more); the entry is not estimated", False)
    return None


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
