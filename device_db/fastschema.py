"""A fast yes/no JSON Schema (2020-12) validity test for the keywords tilefit's family schemas use.

SCH003 validates the tables of the config families tilefit does not model (LoRA plans, mamba,
Helion, ...) against their schemas, and the device database its bundled device and group files
(a cold run -- nothing in the validity cache -- spent half a second in ``jsonschema`` there). ``jsonschema`` builds a validator object per node and
resolves each ``$ref`` through ``referencing``: on the corpus that was a third of a cold check
(the LoRA plan tables alone, 190 KB, took over a second). Nearly every table is valid, so the
question asked first is only "valid?": :func:`compile_schema` turns a schema into nested
closures that answer it, and only a table they reject goes to ``jsonschema`` for the messages
(SCH003 keeps reporting ``jsonschema``'s errors, word for word).

Only the keywords below are compiled, with their 2020-12 meaning (an integer is any number with
no fraction, ``true`` is not ``1``); a schema with any other keyword raises
:class:`Unsupported` when compiled, and the caller validates with ``jsonschema`` alone. The
tests hold this checker to ``jsonschema``'s verdict on the corpus and on mutated tables.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset({"description", "title", "$comment", "$schema", "$id", "$defs", "examples", "default"})
_TYPES: Mapping[str, Callable[[Any], bool]] = {
    "object": lambda x: isinstance(x, dict),
    "array": lambda x: isinstance(x, list),
    "string": lambda x: isinstance(x, str),
    "boolean": lambda x: isinstance(x, bool),
    "null": lambda x: x is None,
    "number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
    "integer": lambda x: (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, float) and x.is_integer()),
}


class Unsupported(Exception):
    """The schema uses a keyword this checker does not compile."""


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON Schema means it: ``1 == 1.0``, ``true != 1``, containers element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if _number(a) and _number(b):
        return a == b
    return type(a) is type(b) and a == b


def _scalar_key(x: Any) -> tuple:
    """A hashable key under which two JSON scalars are equal exactly when :func:`json_equal` says so."""
    if isinstance(x, bool):
        return ("b", x)
    if _number(x):
        return ("n", int(x)) if isinstance(x, float) and x.is_integer() else ("n", x)
    return (type(x).__name__, x)


def compile_schema(schema: Any) -> Check:
    """A function ``instance -> bool``: whether ``instance`` is valid against ``schema`` (its
    local ``$ref``\\ s resolved against the schema itself)."""
    return _Compiler(schema).compile(schema)


class _Compiler:
    def __init__(self, root: Any):
        self.root = root
        self.refs: dict[str, Check] = {}

    def resolve(self, ref: str) -> Check:
        if ref in self.refs:
            return self.refs[ref]
        if not ref.startswith("#"):
            raise Unsupported(f"$ref {ref!r}: only local references are compiled")
        target: Any = self.root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, list):
                target = target[int(part)]
            elif isinstance(target, dict) and part in target:
                target = target[part]
            else:
                raise Unsupported(f"$ref {ref!r} does not resolve")
        slot: list[Check] = []
        self.refs[ref] = lambda x: slot[0](x)  # recursion-safe: filled in below
        slot.append(self.compile(target))
        return self.refs[ref]

    def compile(self, s: Any) -> Check:
        if s is True:
            return lambda x: True
        if s is False:
            return lambda x: False
        if not isinstance(s, dict):
            raise Unsupported(f"schema of type {type(s).__name__}")
        checks: list[Check] = []
        for key in s:
            if key in _ANNOTATIONS or key in ("then", "else"):
                continue
            checks.append(self.keyword(key, s[key], s))
        if not checks:
            return lambda x: True
        if len(checks) == 1:
            return checks[0]
        if len(checks) == 2:
            first, second = checks
            return lambda x: first(x) and second(x)

        def every(x: Any) -> bool:  # a loop, not all() over a generator: this runs per node of a table
            for c in checks:
                if not c(x):
                    return False
            return True
        return every

    def keyword(self, key: str, v: Any, s: Mapping) -> Check:  # noqa: C901 - one branch per keyword
        if key == "type":
            tests = [_TYPES[t] for t in ([v] if isinstance(v, str) else v)]
            if len(tests) == 1:
                return tests[0]

            def any_type(x: Any) -> bool:
                for t in tests:
                    if t(x):
                        return True
                return False
            return any_type
        if key == "$ref":
            return self.resolve(v)
        if key == "properties":
            props = [(name, self.compile(sub)) for name, sub in v.items()]

            def properties(x: Any) -> bool:
                if type(x) is not dict and not isinstance(x, dict):
                    return True
                for n, c in props:
                    if n in x and not c(x[n]):
                        return False
                return True
            return properties
        if key == "required":
            need = tuple(v)
            return lambda x: not isinstance(x, dict) or all(n in x for n in need)
        if key == "additionalProperties":
            known = set(s.get("properties") or ())
            patterns = [re.compile(p) for p in (s.get("patternProperties") or ())]
            sub = self.compile(v)

            def additional(x: Any) -> bool:
                if type(x) is not dict and not isinstance(x, dict):
                    return True
                for k, val in x.items():
                    if k not in known and not any(p.search(k) for p in patterns) and not sub(val):
                        return False
                return True
            return additional
        if key == "patternProperties":
            pats = [(re.compile(p), self.compile(sub)) for p, sub in v.items()]
            return lambda x: not isinstance(x, dict) or all(
                c(val) for k, val in x.items() for p, c in pats if p.search(k))
        if key == "propertyNames":
            sub = self.compile(v)
            return lambda x: not isinstance(x, dict) or all(sub(k) for k in x)
        if key == "minProperties":
            return lambda x: not isinstance(x, dict) or len(x) >= v
        if key == "items":
            sub = self.compile(v)
            skip = len(s.get("prefixItems") or ())  # 2020-12: items judges what prefixItems leaves

            def items(x: Any) -> bool:
                if type(x) is not list and not isinstance(x, list):
                    return True
                for i in (x[skip:] if skip else x):
                    if not sub(i):
                        return False
                return True
            return items
        if key == "prefixItems":
            subs = [self.compile(i) for i in v]
            return lambda x: not isinstance(x, list) or all(c(i) for c, i in zip(subs, x))
        if key == "maxItems":
            return lambda x: not isinstance(x, list) or len(x) <= v
        if key == "minItems":
            return lambda x: not isinstance(x, list) or len(x) >= v
        if key == "uniqueItems":
            if not v:
                return lambda x: True
            return lambda x: not isinstance(x, list) or all(
                not json_equal(x[i], x[j]) for i in range(len(x)) for j in range(i + 1, len(x)))
        if key == "contains":
            sub = self.compile(v)
            return lambda x: not isinstance(x, list) or any(sub(i) for i in x)
        if key == "const":
            return lambda x: json_equal(x, v)
        if key == "enum":
            scalars = {_scalar_key(e) for e in v if not isinstance(e, (dict, list))}
            containers = [e for e in v if isinstance(e, (dict, list))]

            def enum(x: Any) -> bool:
                t = type(x)
                if t is str:  # the common members first: _scalar_key's keys of a str and an int
                    return ("str", x) in scalars
                if t is int:
                    return ("n", x) in scalars
                if isinstance(x, (dict, list)):
                    return any(json_equal(x, e) for e in containers)
                return _scalar_key(x) in scalars
            return enum
        if key == "minimum":
            return lambda x: not _number(x) or x >= v
        if key == "maximum":
            return lambda x: not _number(x) or x <= v
        if key == "multipleOf":
            def multiple(x: Any) -> bool:
                if not _number(x):
                    return True
                if isinstance(v, float):  # as jsonschema computes it
                    q = x / v
                    try:
                        return int(q) == q
                    except OverflowError:
                        return False
                return x % v == 0
            return multiple
        if key == "pattern":
            rx = re.compile(v)
            return lambda x: not isinstance(x, str) or rx.search(x) is not None
        if key == "minLength":
            return lambda x: not isinstance(x, str) or len(x) >= v
        if key == "maxLength":
            return lambda x: not isinstance(x, str) or len(x) <= v
        if key == "not":
            sub = self.compile(v)
            return lambda x: not sub(x)
        if key == "allOf":
            subs = [self.compile(i) for i in v]
            return lambda x: all(c(x) for c in subs)
        if key == "oneOf":
            subs = [self.compile(i) for i in v]
            return lambda x: sum(1 for c in subs if c(x)) == 1
        if key == "anyOf":
            subs = [self.compile(i) for i in v]
            return lambda x: any(c(x) for c in subs)
        if key == "if":
            cond = self.compile(v)
            then = self.compile(s["then"]) if "then" in s else (lambda x: True)
            other = self.compile(s["else"]) if "else" in s else (lambda x: True)
            return lambda x: then(x) if cond(x) else other(x)
        raise Unsupported(f"keyword {key!r}")
