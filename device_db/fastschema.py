"""A fast yes/no JSON Schema (2020-12) validity test for the keywords tilefit's family schemas use.

SCH003 validates the tables of the config families tilefit does not model (LoRA plans, mamba,
Helion, ...) against their schemas, and the device database its bundled device and group files
(a cold run -- nothing in the validity cache -- spent half a second in ``jsonschema`` there). ``jsonschema`` builds a validator object per node and
resolves each ``$ref`` through ``referencing``: on the corpus that was a third of a cold check
(the LoRA plan tables alone, 190 KB, took over a second). Nearly every table is valid, so the
question asked first is only "valid?": :func:`compile_schema` turns a schema into nested
closures that answer it, or (for a schema that checks much more than its own size: SCH003's
Helion tables) into the source of a Python function (one block of statements per subschema,
inlined where it can be: no call and no closure per node of a table), and only a table they
reject goes to ``jsonschema`` for the messages (SCH003 keeps reporting ``jsonschema``'s errors, word for word).

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

_MISSING = object()  # a property the instance lacks


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


def compile_schema(schema: Any, as_source: bool = False) -> Check:
    """A function ``instance -> bool``: whether ``instance`` is valid against ``schema`` (its
    local ``$ref``\\ s resolved against the schema itself). Nested closures, made in a tenth of
    the time; ``as_source``: compiled Python source, which checks a large instance about twice
    as fast (Python compiles some 20 lines of it a millisecond: it pays only for a schema that
    checks many times its own size)."""
    if as_source:
        return _Generator(schema).build()
    return _Closures(schema).compile(schema)


# The source of a compiled schema is Python: each subschema becomes a block of statements that
# ``return False`` where the instance fails it. A block is inlined wherever its failure fails the
# whole instance (properties, items, allOf, a $ref that does not recurse, then/else); a subschema
# whose failure does not (not, anyOf, oneOf, contains, if) or a $ref back into itself becomes a
# function of its own, called there.

_IS_NUMBER = "(isinstance({v}, (int, float)) and not isinstance({v}, bool))"
_TYPE_TESTS: Mapping[str, str] = {
    "object": "isinstance({v}, dict)",
    "array": "isinstance({v}, list)",
    "string": "isinstance({v}, str)",
    "boolean": "isinstance({v}, bool)",
    "null": "{v} is None",
    "number": _IS_NUMBER,
    "integer": "((isinstance({v}, int) and not isinstance({v}, bool)) or (isinstance({v}, float) and {v}.is_integer()))",
}


def _all_distinct(x: list) -> bool:
    return all(not json_equal(x[i], x[j]) for i in range(len(x)) for j in range(i + 1, len(x)))


def _multiple_of(v: int | float) -> Check:
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


def _enum_rest(scalars: set, containers: list) -> Check:
    """An enum's test of a value that is neither a str nor an int."""
    def rest(x: Any) -> bool:
        if isinstance(x, (dict, list)):
            return any(json_equal(x, e) for e in containers)
        return _scalar_key(x) in scalars
    return rest


def _target(root: Any, ref: str) -> Any:
    """The subschema of ``root`` a local ``$ref`` names."""
    if not ref.startswith("#"):
        raise Unsupported(f"$ref {ref!r}: only local references are compiled")
    target: Any = root
    for part in [p for p in ref[1:].split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, list):
            target = target[int(part)]
        elif isinstance(target, dict) and part in target:
            target = target[part]
        else:
            raise Unsupported(f"$ref {ref!r} does not resolve")
    return target


_INLINE_LINES = 12  # a $ref named more than once is inlined only when its block is this short
_MAX_INDENT = 4 * 24  # deeper blocks are functions: at most 8 nested loops (Python allows 20)


def _ref_uses(s: Any, uses: dict[str, int]) -> dict[str, int]:
    if isinstance(s, dict):
        ref = s.get("$ref")
        if isinstance(ref, str):
            uses[ref] = uses.get(ref, 0) + 1
        for sub in s.values():
            _ref_uses(sub, uses)
    elif isinstance(s, list):
        for sub in s:
            _ref_uses(sub, uses)
    return uses


class _Generator:
    def __init__(self, root: Any):
        self.root = root
        self.names: dict[str, Any] = {"_MISSING": _MISSING, "json_equal": json_equal, "_all_distinct": _all_distinct}
        self.functions: list[list[str]] = []
        self.ref_functions: dict[str, str] = {}  # $ref -> its function's name
        self.uses = _ref_uses(root, {})  # $ref -> how often the schema names it
        self.count = 0

    def build(self) -> Check:
        top = self.function(self.root, ())
        source = "\n".join(line for lines in self.functions for line in lines)
        exec(compile(source, "<tilefit.fastschema>", "exec"), self.names)
        return self.names[top]

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, value: Any) -> str:
        name = self.fresh("_c")
        self.names[name] = value
        return name

    def function(self, s: Any, inlining: tuple, name: str | None = None) -> str:
        name = name or self.fresh("_f")
        var = self.fresh("x")
        body: list[str] = []
        lines = [f"def {name}({var}):"]
        self.functions.append(lines)  # before the body: the functions it needs are defined after it
        self.block(s, var, body, "    ", inlining)
        lines.extend(body)
        lines.append("    return True")
        return name


    def block(self, s: Any, v: str, out: list[str], ind: str, inlining: tuple) -> None:
        """Statements (indented by ``ind``) that return False when the value named ``v`` fails ``s``."""
        if s is True:
            return
        if s is False:
            out.append(f"{ind}return False")
            return
        if not isinstance(s, dict):
            raise Unsupported(f"schema of type {type(s).__name__}")
        if len(ind) > _MAX_INDENT:  # a function of its own: Python's parser allows 20 nested loops
            out.append(f"{ind}if not {self.function(s, inlining)}({v}):")
            out.append(f"{ind}    return False")
            return
        for key in s:
            if key in _ANNOTATIONS or key in ("then", "else"):
                continue
            self.keyword(key, s[key], s, v, out, ind, inlining)

    def nested(self, s: Any, v: str, out: list[str], ind: str, inlining: tuple, head: str) -> None:
        """``head`` (an ``if``/``for`` line) and the block of ``s`` under it, or nothing when the block is empty."""
        body: list[str] = []
        self.block(s, v, body, ind + "    ", inlining)
        if body:
            out.append(f"{ind}{head}")
            out.extend(body)

    def keyword(self, key: str, val: Any, s: Mapping, v: str, out: list[str], ind: str,  # noqa: C901
                inlining: tuple) -> None:
        i2 = ind + "    "
        if key == "type":
            tests = [_TYPE_TESTS[t].format(v=v) for t in ([val] if isinstance(val, str) else val)]
            out.append(f"{ind}if not ({' or '.join(tests) or 'False'}):")
            out.append(f"{i2}return False")
        elif key == "$ref":
            target = _target(self.root, val)
            inline: list[str] = []
            if val not in inlining and len(ind) <= _MAX_INDENT:
                self.block(target, v, inline, ind, inlining + (val,))
            # inlined unless it recurses, nests too deep for Python's parser, or is long and used
            # again (the Helion and LoRA plan schemas share their definitions)
            if val in inlining or len(ind) > _MAX_INDENT or (len(inline) > _INLINE_LINES and self.uses[val] > 1):
                fn = self.ref_functions.get(val)
                if fn is None:
                    fn = self.ref_functions[val] = self.fresh("_ref")
                    self.function(target, (), fn)
                out.append(f"{ind}if not {fn}({v}):")
                out.append(f"{i2}return False")
            else:
                out.extend(inline)
        elif key == "properties":
            body: list[str] = []
            for name, sub in val.items():
                y = self.fresh("y")
                inner: list[str] = []
                self.block(sub, y, inner, i2 + "    ", inlining)
                if inner:
                    body.append(f"{i2}{y} = {v}.get({self.const(name)}, _MISSING)")
                    body.append(f"{i2}if {y} is not _MISSING:")
                    body.extend(inner)
            if body:
                out.append(f"{ind}if isinstance({v}, dict):")
                out.extend(body)
        elif key == "required":
            need = self.const(tuple(val))
            n = self.fresh("n")
            out.append(f"{ind}if isinstance({v}, dict):")
            out.append(f"{i2}for {n} in {need}:")
            out.append(f"{i2}    if {n} not in {v}:")
            out.append(f"{i2}        return False")
        elif key == "additionalProperties":
            known = self.const(set(s.get("properties") or ()))
            patterns = [self.const(re.compile(p)) for p in (s.get("patternProperties") or ())]
            k, y = self.fresh("k"), self.fresh("y")
            matched = "".join(f" and not {p}.search({k})" for p in patterns)
            inner: list[str] = []
            self.block(val, y, inner, i2 + "        ", inlining)
            if inner:
                out.append(f"{ind}if isinstance({v}, dict):")
                out.append(f"{i2}for {k}, {y} in {v}.items():")
                out.append(f"{i2}    if {k} not in {known}{matched}:")
                out.extend(inner)
        elif key == "patternProperties":
            k, y = self.fresh("k"), self.fresh("y")
            body = []
            for p, sub in val.items():
                self.nested(sub, y, body, i2 + "    ", inlining, f"if {self.const(re.compile(p))}.search({k}):")
            if body:
                out.append(f"{ind}if isinstance({v}, dict):")
                out.append(f"{i2}for {k}, {y} in {v}.items():")
                out.extend(body)
        elif key == "propertyNames":
            k = self.fresh("k")
            inner = []
            self.block(val, k, inner, i2 + "    ", inlining)
            if inner:
                out.append(f"{ind}if isinstance({v}, dict):")
                out.append(f"{i2}for {k} in {v}:")
                out.extend(inner)
        elif key == "minProperties":
            out.append(f"{ind}if isinstance({v}, dict) and not len({v}) >= {self.const(val)}:")
            out.append(f"{i2}return False")
        elif key == "items":
            skip = len(s.get("prefixItems") or ())  # 2020-12: items judges what prefixItems leaves
            y = self.fresh("y")
            inner = []
            self.block(val, y, inner, i2 + "    ", inlining)
            if inner:
                out.append(f"{ind}if isinstance({v}, list):")
                out.append(f"{i2}for {y} in {f'{v}[{skip}:]' if skip else v}:")
                out.extend(inner)
        elif key == "prefixItems":
            body = []
            for index, sub in enumerate(val):
                y = self.fresh("y")
                inner = []
                self.block(sub, y, inner, i2 + "    ", inlining)
                if inner:
                    body.append(f"{i2}if len({v}) > {index}:")
                    body.append(f"{i2}    {y} = {v}[{index}]")
                    body.extend(inner)
            if body:
                out.append(f"{ind}if isinstance({v}, list):")
                out.extend(body)
        elif key == "maxItems":
            out.append(f"{ind}if isinstance({v}, list) and not len({v}) <= {self.const(val)}:")
            out.append(f"{i2}return False")
        elif key == "minItems":
            out.append(f"{ind}if isinstance({v}, list) and not len({v}) >= {self.const(val)}:")
            out.append(f"{i2}return False")
        elif key == "uniqueItems":
            if val:
                out.append(f"{ind}if isinstance({v}, list) and not _all_distinct({v}):")
                out.append(f"{i2}return False")
        elif key == "contains":
            fn, y = self.function(val, inlining), self.fresh("y")
            out.append(f"{ind}if isinstance({v}, list) and not any({fn}({y}) for {y} in {v}):")
            out.append(f"{i2}return False")
        elif key == "const":
            out.append(f"{ind}if not json_equal({v}, {self.const(val)}):")
            out.append(f"{i2}return False")
        elif key == "enum":
            scalars = {_scalar_key(e) for e in val if not isinstance(e, (dict, list))}
            containers = [e for e in val if isinstance(e, (dict, list))]
            t = self.fresh("t")
            # the common members first: _scalar_key's keys of a str and an int
            strs = self.const({k[1] for k in scalars if k[0] == "str"})
            numbers = self.const({k[1] for k in scalars if k[0] == "n"})
            rest = self.const(_enum_rest(scalars, containers))
            out.append(f"{ind}{t} = type({v})")
            out.append(f"{ind}if {t} is str:")
            out.append(f"{i2}if {v} not in {strs}:")
            out.append(f"{i2}    return False")
            out.append(f"{ind}elif {t} is int:")
            out.append(f"{i2}if {v} not in {numbers}:")
            out.append(f"{i2}    return False")
            out.append(f"{ind}elif not {rest}({v}):")
            out.append(f"{i2}return False")
        elif key in ("minimum", "maximum"):
            op = ">=" if key == "minimum" else "<="
            out.append(f"{ind}if {_IS_NUMBER.format(v=v)} and not {v} {op} {self.const(val)}:")
            out.append(f"{i2}return False")
        elif key == "multipleOf":
            out.append(f"{ind}if not {self.const(_multiple_of(val))}({v}):")
            out.append(f"{i2}return False")
        elif key == "pattern":
            out.append(f"{ind}if isinstance({v}, str) and {self.const(re.compile(val))}.search({v}) is None:")
            out.append(f"{i2}return False")
        elif key in ("minLength", "maxLength"):
            op = ">=" if key == "minLength" else "<="
            out.append(f"{ind}if isinstance({v}, str) and not len({v}) {op} {self.const(val)}:")
            out.append(f"{i2}return False")
        elif key == "not":
            out.append(f"{ind}if {self.function(val, inlining)}({v}):")
            out.append(f"{i2}return False")
        elif key == "allOf":
            for sub in val:
                self.block(sub, v, out, ind, inlining)
        elif key == "oneOf":
            subs = " + ".join(f"bool({self.function(sub, inlining)}({v}))" for sub in val) or "0"
            out.append(f"{ind}if ({subs}) != 1:")
            out.append(f"{i2}return False")
        elif key == "anyOf":
            subs = " or ".join(f"{self.function(sub, inlining)}({v})" for sub in val) or "False"
            out.append(f"{ind}if not ({subs}):")
            out.append(f"{i2}return False")
        elif key == "if":
            cond = self.function(val, inlining)
            then: list[str] = []
            other: list[str] = []
            self.block(s.get("then", True), v, then, i2, inlining)
            self.block(s.get("else", True), v, other, i2, inlining)
            if then or other:
                out.append(f"{ind}if {cond}({v}):")
                out.extend(then or [f"{i2}pass"])
                if other:
                    out.append(f"{ind}else:")
                    out.extend(other)
        else:
            raise Unsupported(f"keyword {key!r}")


class _Closures:
    """The schema as nested closures, one per subschema."""

    def __init__(self, root: Any):
        self.root = root
        self.refs: dict[str, Check] = {}

    def resolve(self, ref: str) -> Check:
        if ref in self.refs:
            return self.refs[ref]
        target = _target(self.root, ref)
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
            return lambda x: not isinstance(x, list) or _all_distinct(x)
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
                return rest(x)
            rest = _enum_rest(scalars, containers)
            return enum
        if key == "minimum":
            return lambda x: not _number(x) or x >= v
        if key == "maximum":
            return lambda x: not _number(x) or x <= v
        if key == "multipleOf":
            return _multiple_of(v)
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
