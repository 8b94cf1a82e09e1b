"""``@triton.autotune(prune_configs_by={"early_config_prune": f})`` evaluated statically.

Triton calls ``f(configs, named_args, **kwargs)`` before it benchmarks a list and compiles only
the configs ``f`` returns. This module interprets ``f`` (and the helpers, closures and factories
it reaches) over the AST, never importing or running it: a small interpreter of an allowlist of
statements (assignments, ``if``/``for``/``while`` with a step budget, ``try`` bodies, nested
``def``, ``return``) and expressions (literals, comprehensions, arithmetic, comparisons, the pure
builtins) over plain Python values that it builds itself. Module-level names come from the call
site evaluator (:meth:`~.values.Evaluator.global_name`: literals, functions of the scanned tree,
``triton``). What a launch knows (the case's parameter values, bound by the scenario) is both
``named_args`` and ``kwargs`` (Triton splits them by how the launch passes them: a prune reads
either). Device queries answer for the target being judged: ``torch.cuda.get_device_properties(d)
.shared_memory_per_block_optin``, ``triton.runtime.driver.active.utils.get_device_properties(d)
["max_shared_mem"]``, ``get_device_capability()``. Anything else (a run-time tensor, an import,
a call outside the allowlist such as ``os.system``) stops the evaluation with its reason, and the
list is judged unpruned, as before.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from typing import Any

from .values import ConfigVal, DictVal, Lit, Ref, Seq, Unknown, Val, _safe_binop, branches

MAX_STEPS = 20000  # statements and expressions per evaluation of one prune
MAX_CALL_DEPTH = 8
MAX_LOOP = 4096  # iterations of one while loop
MAX_ITEMS = 65536  # items of a list or dict the interpreted code builds
_SCALARS = (int, float, bool, str, type(None))


class NotStatic(Exception):
    """The prune cannot be evaluated statically; ``str()`` is the reason."""


class _StaticRaise(Exception):
    """The interpreted code raised (a missing key, a zero division): a ``try`` handler may take it."""


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


@dataclass(frozen=True)
class Opaque:
    """A value nothing static gives (a tensor argument, a run-time shape): reading it stops."""

    reason: str


@dataclass(eq=False)
class StaticConfig:
    """A ``triton.Config`` as the prune sees it (``c.kwargs[...]``, ``c.num_stages``)."""

    index: int
    kwargs: dict
    options: dict

    def attr(self, name: str):
        if name == "kwargs":
            return self.kwargs
        if name in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
            from tilefit.variants import CONFIG_NUM_STAGES, CONFIG_NUM_WARPS

            # triton.Config's own defaults (the same on every backend)
            defaults = {"num_warps": CONFIG_NUM_WARPS, "num_stages": CONFIG_NUM_STAGES, "num_ctas": 1,
                        "maxnreg": None}
            return self.options.get(name, defaults[name])
        if name in ("pre_hook",):
            return None
        raise NotStatic(f"reads `config.{name}`")


@dataclass(eq=False)
class Closure:
    fn: Any  # ast.FunctionDef | ast.Lambda
    module: Any
    env: dict  # the enclosing function's locals (by reference, as Python closes over them)


@dataclass(frozen=True)
class Path:
    """An attribute chain of a module outside the scanned tree (``torch.cuda``, ``triton.runtime``)."""

    text: str


@dataclass(frozen=True)
class ModuleObj:
    module: Any


@dataclass(frozen=True)
class DeviceProps:
    """What ``get_device_properties`` answers on the target being judged."""

    device: Any  # a device class (tilefit.engine.DeviceClass)

    def get(self, name: str):
        dev = self.device.first
        if name in ("shared_memory_per_block_optin", "max_shared_mem", "sharedMemPerBlockOptin"):
            return dev.smem_per_block_optin
        if name in ("shared_memory_per_multiprocessor", "max_shared_mem_per_sm") and dev.smem_per_sm is not None:
            return dev.smem_per_sm
        if name in ("major", "minor") and dev.compute_capability:
            return dev.compute_capability[0 if name == "major" else 1]
        if name in ("multi_processor_count", "multiprocessor_count"):
            counts = {d.sm_count for d in self.device.devices}
            if len(counts) == 1 and None not in counts:
                return counts.pop()
            raise NotStatic(f"reads the device's `{name}`, which differs between the targets of one class")
        if name in ("warp_size", "warpSize") and dev.warp_size:
            return dev.warp_size
        raise NotStatic(f"reads the device property `{name}`")


class Capability(tuple):
    """``get_device_capability()``: a (major, minor) tuple with ``.major`` / ``.minor``."""

    @property
    def major(self):
        return self[0]

    @property
    def minor(self):
        return self[1]

    def to_int(self):
        return self[0] * 10 + self[1]


@dataclass
class PruneResult:
    """What a prune keeps of a list for one launch and target, or why it was not evaluated."""

    name: str  # the prune function's name (``_prune_configs``)
    kept: frozenset | None  # config indices; None: not evaluated
    reason: str | None = None
    device_read: bool = False


@dataclass
class PruneSpec:
    """The ``early_config_prune`` of an autotune decorator: its expression and module."""

    node: ast.expr
    module: Any
    name: str
    extra: str = ""  # e.g. a perf_model that prunes further at run time
    whole: bool = False  # ``node`` is the whole prune_configs_by value, not its early_config_prune


def prune_spec(dec: ast.Call, module) -> PruneSpec | None:
    """The ``early_config_prune`` of ``@triton.autotune(prune_configs_by=...)``, or None. A literal
    dict gives its entry; another expression (``None if _ON_HIP else {...}``) is evaluated whole."""
    for kw in dec.keywords:
        if kw.arg != "prune_configs_by" or isinstance(kw.value, ast.Constant):
            continue
        node = kw.value
        if isinstance(node, ast.Dict):
            entries = {k.value: v for k, v in zip(node.keys, node.values)
                       if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            target = entries.get("early_config_prune")
            extra = "a perf_model ranks the kept configs at run time" if \
                "perf_model" in entries and not (isinstance(entries["perf_model"], ast.Constant)
                                                 and entries["perf_model"].value is None) else ""
            if target is None:
                return None  # no early prune: the list Triton benchmarks is the whole list
            return PruneSpec(target, module, _callable_name(target), extra)
        return PruneSpec(node, module, _callable_name(node), "", whole=True)
    return None


def _callable_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return f"{_callable_name(node.func)}(...)"
    if isinstance(node, ast.IfExp):
        for arm in (node.body, node.orelse):
            if isinstance(arm, ast.Dict):
                entry = next((v for k, v in zip(arm.keys, arm.values)
                              if isinstance(k, ast.Constant) and k.value == "early_config_prune"), None)
                if entry is not None:
                    return _callable_name(entry)
    return "early_config_prune"


class PruneEvaluator:
    """Evaluates the prunes of autotune sites per (launch values, device class), memoised."""

    def __init__(self, evaluator):
        self.evaluator = evaluator
        self._memo: dict[tuple, PruneResult] = {}
        self._specs: dict[int, PruneSpec | None] = {}

    def spec(self, site) -> PruneSpec | None:
        key = id(site)
        if key not in self._specs:
            self._specs[key] = prune_spec(site.kernel.autotune, site.kernel.module) \
                if site.kernel.autotune is not None else None
        return self._specs[key]

    def result(self, site, given: dict, reasons: dict, dclass) -> PruneResult | None:
        """What ``site``'s prune keeps for a launch whose known values are ``given`` (unknown
        ones: ``reasons``) on ``dclass``; None when the site has no prune."""
        spec = self.spec(site)
        if spec is None:
            return None
        key = (id(site), tuple(sorted((k, repr(v)) for k, v in given.items())),
               tuple(sorted(reasons)), id(dclass))
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._evaluate(site, spec, given, reasons, dclass)
        return hit

    def _evaluate(self, site, spec: PruneSpec, given: dict, reasons: dict, dclass) -> PruneResult:
        run = _Interpreter(self.evaluator, dclass)
        try:
            configs = [StaticConfig(c.index, _py_dict(c.kwargs), _py_dict(c.options)) for c in site.configs]
            own = {k for c in site.configs for k in c.kwargs}
            launch = _LaunchArgs({k: v for k, v in given.items() if k not in own})
            for name, why in reasons.items():
                if name not in own and name not in launch:
                    launch[name] = Opaque(why)
            fn = run.eval(spec.node, {}, spec.module)
            if spec.whole:
                if fn is not None and not isinstance(fn, dict):
                    raise NotStatic("prune_configs_by is not a static dict")
                fn = (fn or {}).get("early_config_prune")
                if fn is None:  # `None if _ON_HIP else {...}` on the other platform: no prune there
                    return PruneResult(spec.name, frozenset(c.index for c in configs))
            out = run.call(fn, [configs, launch], dict(launch), spec.name)
            if not isinstance(out, (list, tuple)) or not out:
                raise NotStatic(f"{spec.name}() does not return a non-empty list")
            kept = set()
            for c in out:
                if not isinstance(c, StaticConfig):
                    raise NotStatic(f"{spec.name}() returns configs of its own")
                kept.add(c.index)
            return PruneResult(spec.name, frozenset(kept), spec.extra or None, run.device_read)
        except NotStatic as e:
            return PruneResult(spec.name, None, str(e), run.device_read)
        except (_StaticRaise, _Return, _Break, _Continue) as e:
            return PruneResult(spec.name, None, f"{spec.name}() raises ({e})" if str(e) else f"{spec.name}() raises")
        except RecursionError:
            return PruneResult(spec.name, None, f"{spec.name}() nests too deeply")
        except Exception as e:  # noqa: BLE001  (an operation of the interpreted code on odd values: never a traceback)
            return PruneResult(spec.name, None, f"{spec.name}() is not evaluated statically ({type(e).__name__})")


class _LaunchArgs(dict):
    """``named_args``: reading a value the launch computes at run time stops with its reason."""


def _py_dict(items: dict) -> dict:
    return {k: _py(v, k) for k, v in items.items()}


def _py(v: Val, what: str = "a value") -> Any:
    arms = list(branches(v))
    if len(arms) != 1:
        return Opaque(f"`{what}` has {len(arms)} branches")
    v = arms[0][1]
    if isinstance(v, Lit):
        return v.value if isinstance(v.value, _SCALARS) else Opaque(f"`{what}` is not a plain value")
    if isinstance(v, Seq):
        return [_py(x, what) for x in v.items]
    if isinstance(v, DictVal):
        return {k: _py(x, k) for k, x in v.items}
    if isinstance(v, Unknown):
        return Opaque(v.reason)
    if isinstance(v, ConfigVal):
        return Opaque(f"`{what}` is a config built outside the list")
    return Opaque(f"`{what}` is not a static value")


def _check(v: Any) -> Any:
    if isinstance(v, Opaque):
        raise NotStatic(v.reason)
    return v


_BINOPS = {ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
           ast.BitOr, ast.BitAnd, ast.BitXor}
_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
        ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}
# methods of the interpreter's own containers that only read them or change them in place
_METHODS = {
    dict: frozenset({"get", "items", "keys", "values", "copy", "setdefault", "update", "pop"}),
    _LaunchArgs: frozenset({"get", "items", "keys", "values", "copy"}),
    list: frozenset({"append", "extend", "copy", "index", "count", "pop", "insert", "sort"}),
    tuple: frozenset({"index", "count"}),
    set: frozenset({"add", "copy"}),
    str: frozenset({"startswith", "endswith", "lower", "upper"}),
    int: frozenset({"bit_length"}),
}
_BUILTINS = frozenset({"len", "min", "max", "sum", "any", "all", "sorted", "list", "tuple", "dict", "set", "range",
                       "int", "float", "bool", "abs", "enumerate", "zip", "reversed", "isinstance"})
_EXTERNAL_ROOTS = frozenset({"torch", "triton", "tl"})
_DEVICE_INDEX_CALLS = frozenset({"current_device", "get_current_device"})


def _bounded(container):
    """``container``, unless it grew past what a prune of a config list needs (``x.extend(x)`` in a loop)."""
    if isinstance(container, (list, tuple, dict, set)) and len(container) > MAX_ITEMS:
        raise NotStatic(f"a container of more than {MAX_ITEMS} items")
    return container


def _safe_call(fn, *a, **k):
    try:
        return fn(*a, **k)
    except NotStatic:
        raise
    except Exception as e:  # noqa: BLE001  (a static raise of the interpreted code: KeyError, ValueError)
        raise _StaticRaise(f"{type(e).__name__}: {e}") from None


class _Interpreter:
    def __init__(self, evaluator, dclass):
        self.evaluator = evaluator
        self.dclass = dclass
        self.steps = 0
        self.depth = 0
        self.device_read = False

    def _spend(self):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise NotStatic(f"evaluation stopped after {MAX_STEPS} steps")

    # -- calls ---------------------------------------------------------------------------------
    def call(self, fn, args: list, kwargs: dict, what: str = "a function"):
        if isinstance(fn, Closure):
            return self._call_closure(fn, args, kwargs)
        if isinstance(fn, tuple) and fn and fn[0] == "builtin":
            return self._builtin(fn[1], args, kwargs)
        if isinstance(fn, tuple) and fn and fn[0] == "method":
            _, obj, name = fn
            return _safe_call(getattr(obj, name), *args, **kwargs)
        if isinstance(fn, Path):
            return self._external(fn, args, kwargs)
        raise NotStatic(f"`{what}` is not a function of the scanned tree")

    def _call_closure(self, clo: Closure, args: list, kwargs: dict):
        self.depth += 1
        if self.depth > MAX_CALL_DEPTH:
            raise NotStatic("calls nest too deeply")
        try:
            fn = clo.fn
            env = dict(clo.env)
            a = fn.args
            positional = a.posonlyargs + a.args
            defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
            rest = list(args)
            for p, d in zip(positional, defaults):
                if rest:
                    env[p.arg] = rest.pop(0)
                elif p.arg in kwargs:
                    env[p.arg] = kwargs.pop(p.arg)
                elif d is not None:
                    env[p.arg] = self.eval(d, clo.env, clo.module)
                else:
                    raise NotStatic(f"`{getattr(fn, 'name', 'lambda')}()` is called without `{p.arg}`")
            if a.vararg is not None:
                env[a.vararg.arg] = tuple(rest)
            elif rest:
                raise NotStatic(f"`{getattr(fn, 'name', 'lambda')}()` is called with too many arguments")
            for p, d in zip(a.kwonlyargs, a.kw_defaults):
                if p.arg in kwargs:
                    env[p.arg] = kwargs.pop(p.arg)
                elif d is not None:
                    env[p.arg] = self.eval(d, clo.env, clo.module)
                else:
                    raise NotStatic(f"`{getattr(fn, 'name', 'lambda')}()` is called without `{p.arg}`")
            if a.kwarg is not None:
                env[a.kwarg.arg] = dict(kwargs)
            elif kwargs:
                raise NotStatic(f"`{getattr(fn, 'name', 'lambda')}()` gets keywords it does not take")
            if isinstance(fn, ast.Lambda):
                return self.eval(fn.body, env, clo.module)
            try:
                self.run(fn.body, env, clo.module)
            except _Return as r:
                return r.value
            return None
        finally:
            self.depth -= 1

    def _builtin(self, name: str, args: list, kwargs: dict):
        for x in list(args) + list(kwargs.values()):
            _check(x)
        if name in ("min", "max", "sorted") and "key" in kwargs:
            key = kwargs.pop("key")
            items = list(args[0]) if len(args) == 1 else list(args)
            if not items and "default" in kwargs:
                return kwargs["default"]
            scored = [(self.call(key, [x], {}, "key"), i, x) for i, x in enumerate(items)]
            if name == "sorted":
                scored.sort(key=lambda t: (t[0], t[1]), reverse=bool(kwargs.get("reverse")))
                return [x for _, _, x in scored]
            pick = (min if name == "min" else max)(scored, key=lambda t: t[0]) if scored else None
            if pick is None:
                raise _StaticRaise(f"{name}() of an empty sequence")
            return pick[2]
        if name in ("any", "all", "sum", "min", "max", "sorted", "list", "tuple", "set", "enumerate", "zip",
                    "reversed"):
            args = [list(a) if isinstance(a, (list, tuple, set, dict, range)) else a for a in args]
        if name == "range":
            r = _safe_call(range, *args)
            if len(r) > MAX_LOOP:
                raise NotStatic("range too long")
            return list(r)
        if name == "isinstance":
            raise NotStatic("isinstance() of an interpreted value")
        fn = {"len": len, "min": min, "max": max, "sum": sum, "any": any, "all": all, "sorted": sorted,
              "list": list, "tuple": tuple, "dict": dict, "set": set, "int": int, "float": float, "bool": bool,
              "abs": abs, "enumerate": lambda *a: list(enumerate(*a)), "zip": lambda *a: list(zip(*a)),
              "reversed": lambda a: list(reversed(a))}[name]
        return _safe_call(fn, *args, **kwargs)

    def _external(self, path: Path, args: list, kwargs: dict):
        last = path.text.rsplit(".", 1)[-1]
        if last == "get_device_properties":
            self.device_read = True
            return DeviceProps(self.dclass)
        if last == "get_device_capability":
            self.device_read = True
            cc = self.dclass.first.compute_capability
            if not cc:
                raise NotStatic("the target has no compute capability")
            return Capability(cc)
        if last in _DEVICE_INDEX_CALLS:
            return 0
        if last == "next_power_of_2" and path.text.startswith("triton") and len(args) == 1:
            x = int(_check(args[0]))
            return 1 if x <= 1 else 1 << (x - 1).bit_length()
        if last == "cdiv" and path.text.startswith("triton") and len(args) == 2:
            return -(-_check(args[0]) // _check(args[1]))
        raise NotStatic(f"calls `{path.text}()`")

    # -- statements ----------------------------------------------------------------------------
    def run(self, body: list, env: dict, module) -> None:
        for stmt in body:
            self._spend()
            self._stmt(stmt, env, module)

    def _stmt(self, s: ast.stmt, env: dict, module) -> None:
        if isinstance(s, ast.Return):
            raise _Return(self.eval(s.value, env, module) if s.value is not None else None)
        if isinstance(s, ast.Assign):
            value = self.eval(s.value, env, module)
            for t in s.targets:
                self._assign(t, value, env, module)
            return
        if isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self._assign(s.target, self.eval(s.value, env, module), env, module)
            return
        if isinstance(s, ast.AugAssign):
            if not isinstance(s.target, ast.Name):
                raise NotStatic("an augmented assignment to an attribute or item")
            cur = _check(self._name(s.target.id, env, module))
            self._assign(s.target, self._binop(s.op, cur, _check(self.eval(s.value, env, module))), env, module)
            return
        if isinstance(s, ast.Expr):
            if isinstance(s.value, ast.Constant):
                return  # a docstring
            self.eval(s.value, env, module)
            return
        if isinstance(s, ast.If):
            self.run(s.body if self._truth(self.eval(s.test, env, module)) else s.orelse, env, module)
            return
        if isinstance(s, ast.For):
            items = _check(self.eval(s.iter, env, module))
            if not isinstance(items, (list, tuple, dict, set)):
                raise NotStatic("a loop over a value that is not a static sequence")
            for item in list(items):
                self._assign(s.target, item, env, module)
                try:
                    self.run(s.body, env, module)
                except _Break:
                    break
                except _Continue:
                    continue
            else:
                self.run(s.orelse, env, module)
            return
        if isinstance(s, ast.While):
            n = 0
            while self._truth(self.eval(s.test, env, module)):
                n += 1
                if n > MAX_LOOP:
                    raise NotStatic("a loop that runs too long")
                try:
                    self.run(s.body, env, module)
                except _Break:
                    break
                except _Continue:
                    continue
            return
        if isinstance(s, ast.Break):
            raise _Break()
        if isinstance(s, ast.Continue):
            raise _Continue()
        if isinstance(s, ast.Pass):
            return
        if isinstance(s, (ast.FunctionDef,)):
            if s.decorator_list:
                raise NotStatic(f"a decorated local function `{s.name}`")
            env[s.name] = Closure(s, module, env)
            return
        if isinstance(s, ast.Try):
            try:
                self.run(s.body, env, module)
            except _StaticRaise:
                if not s.handlers:
                    raise
                self.run(s.handlers[0].body, env, module)
            else:
                self.run(s.orelse, env, module)
            self.run(s.finalbody, env, module)
            return
        if isinstance(s, ast.Assert):
            if not self._truth(self.eval(s.test, env, module)):
                raise _StaticRaise("assertion")
            return
        if isinstance(s, ast.Raise):
            raise _StaticRaise("raise")
        raise NotStatic(f"a `{type(s).__name__}` statement (line {s.lineno}) is not evaluated statically")

    def _assign(self, t: ast.expr, value, env: dict, module) -> None:
        if isinstance(t, ast.Name):
            env[t.id] = value
        elif isinstance(t, (ast.Tuple, ast.List)):
            items = list(_check(value)) if isinstance(_check(value), (list, tuple)) else None
            if items is None or len(items) != len(t.elts):
                raise NotStatic("an unpacking of a value that is not a static tuple")
            for sub, v in zip(t.elts, items):
                self._assign(sub, v, env, module)
        elif isinstance(t, ast.Subscript):
            base = _check(self.eval(t.value, env, module))
            if not isinstance(base, (dict, list)) or isinstance(base, _LaunchArgs):
                raise NotStatic("an item assignment into a value that is not the function's own")
            _safe_call(operator.setitem, base, _check(self.eval(t.slice, env, module)), value)
        else:
            raise NotStatic("an assignment to an attribute")

    def _truth(self, v) -> bool:
        v = _check(v)
        if not isinstance(v, (*_SCALARS, list, tuple, dict, set, StaticConfig, DeviceProps)):
            raise NotStatic("a test of a value that is not static")
        return bool(v)

    # -- expressions ---------------------------------------------------------------------------
    def eval(self, node: ast.expr, env: dict, module):
        self._spend()
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id, env, module)
        if isinstance(node, ast.Attribute):
            return self._attribute(_check(self.eval(node.value, env, module)), node.attr)
        if isinstance(node, ast.Subscript):
            base = _check(self.eval(node.value, env, module))
            if isinstance(node.slice, ast.Slice):
                parts = [None if x is None else _check(self.eval(x, env, module))
                         for x in (node.slice.lower, node.slice.upper, node.slice.step)]
                if not isinstance(base, (list, tuple, str)):
                    raise NotStatic("a slice of a value that is not static")
                return base[slice(*parts)]
            index = _check(self.eval(node.slice, env, module))
            if isinstance(base, DeviceProps):
                return base.get(index)
            if not isinstance(base, (dict, list, tuple, str)):
                raise NotStatic("an item of a value that is not static")
            if isinstance(base, _LaunchArgs) and index not in base:
                raise NotStatic(f"the launch does not pass `{index}`")
            got = _safe_call(operator.getitem, base, index)
            if isinstance(got, Opaque):
                raise NotStatic(f"`{index}`: {got.reason}" if isinstance(index, str) else got.reason)
            return got
        if isinstance(node, ast.BinOp):
            return self._binop(node.op, _check(self.eval(node.left, env, module)),
                               _check(self.eval(node.right, env, module)))
        if isinstance(node, ast.UnaryOp):
            v = _check(self.eval(node.operand, env, module))
            if isinstance(node.op, ast.Not):
                return not self._truth(v)
            if not isinstance(v, (int, float)):
                raise NotStatic("a unary operator on a value that is not a number")
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)](v)
        if isinstance(node, ast.BoolOp):
            is_and = isinstance(node.op, ast.And)
            v = None
            for sub in node.values:
                v = _check(self.eval(sub, env, module))
                if self._truth(v) != is_and:
                    return v
            return v
        if isinstance(node, ast.Compare):
            left = _check(self.eval(node.left, env, module))
            for op, comp in zip(node.ops, node.comparators):
                right = _check(self.eval(comp, env, module))
                self._comparable(left, right, op)
                if not _safe_call(_CMP[type(op)], left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self.eval(node.body if self._truth(self.eval(node.test, env, module)) else node.orelse, env, module)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    inner = _check(self.eval(e.value, env, module))
                    if not isinstance(inner, (list, tuple)):
                        raise NotStatic("an unpacking of a value that is not a static sequence")
                    out.extend(inner)
                else:
                    out.append(self.eval(e, env, module))
            return tuple(out) if isinstance(node, ast.Tuple) else out
        if isinstance(node, ast.Dict):
            d: dict = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    inner = _check(self.eval(v, env, module))
                    if not isinstance(inner, dict):
                        raise NotStatic("`**` of a value that is not a static dict")
                    d.update(inner)
                else:
                    key = _check(self.eval(k, env, module))
                    if not isinstance(key, _SCALARS + (tuple,)):
                        raise NotStatic("a dict key that is not a plain value")
                    d[key] = self.eval(v, env, module)
            return d
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            return self._comprehension(node, env, module)
        if isinstance(node, ast.Lambda):
            return Closure(node, module, env)
        if isinstance(node, ast.Call):
            return self._call_node(node, env, module)
        raise NotStatic(f"`{type(node).__name__}` expressions are not evaluated statically")

    def _comparable(self, a, b, op) -> None:
        ok = (*_SCALARS, list, tuple, dict, set, StaticConfig)
        if isinstance(op, (ast.Is, ast.IsNot)):
            if a is not None and b is not None and not isinstance(a, bool) and not isinstance(b, bool):
                raise NotStatic("an `is` test of values that are not None")
            return
        if not isinstance(a, ok) or not isinstance(b, ok):
            raise NotStatic("a comparison of values that are not static")

    def _binop(self, op: ast.operator, a, b):
        if type(op) not in _BINOPS:
            raise NotStatic("an operator that is not evaluated statically")
        if isinstance(a, (list, tuple)) and isinstance(b, type(a)) and isinstance(op, ast.Add):
            return _bounded(a + b)
        try:
            return _safe_binop(op, a, b)
        except (TypeError, ValueError) as e:
            raise NotStatic(f"an operation that is not folded ({e})") from None
        except ArithmeticError as e:
            raise _StaticRaise(str(e)) from None

    def _comprehension(self, node, env: dict, module):
        envs = [dict(env)]
        for gen in node.generators:
            nxt = []
            for e in envs:
                items = _check(self.eval(gen.iter, e, module))
                if not isinstance(items, (list, tuple, dict, set)):
                    raise NotStatic("a comprehension over a value that is not a static sequence")
                for item in list(items):
                    e2 = dict(e)
                    self._assign(gen.target, item, e2, module)
                    if all(self._truth(self.eval(c, e2, module)) for c in gen.ifs):
                        nxt.append(e2)
                if len(nxt) > MAX_LOOP:
                    raise NotStatic("a comprehension that yields too many items")
            envs = nxt
        if isinstance(node, ast.DictComp):
            return {_check(self.eval(node.key, e, module)): self.eval(node.value, e, module) for e in envs}
        out = [self.eval(node.elt, e, module) for e in envs]
        return out

    def _call_node(self, node: ast.Call, env: dict, module):
        args: list = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                inner = _check(self.eval(a.value, env, module))
                if not isinstance(inner, (list, tuple)):
                    raise NotStatic("`*` of a value that is not a static sequence")
                args.extend(inner)
            else:
                args.append(self.eval(a, env, module))
        kwargs: dict = {}
        for kw in node.keywords:
            if kw.arg is None:
                inner = _check(self.eval(kw.value, env, module))
                if not isinstance(inner, dict) or not all(isinstance(k, str) for k in inner):
                    raise NotStatic("`**` of a value that is not a static dict")
                kwargs.update(inner)
            else:
                kwargs[kw.arg] = self.eval(kw.value, env, module)
        if isinstance(node.func, ast.Attribute):
            base = _check(self.eval(node.func.value, env, module))
            name = node.func.attr
            if isinstance(base, StaticConfig) and name == "all_kwargs" and not args:
                return {**base.kwargs, **base.options}
            if isinstance(base, (Path, ModuleObj)):
                fn = self._attribute(base, name)
            else:
                kind = next((t for t in _METHODS if type(base) is t), None)
                if kind is None or name not in _METHODS[kind]:
                    raise NotStatic(f"calls `.{name}()` of a {type(base).__name__}")
                if isinstance(base, _LaunchArgs) and name == "get" and args and isinstance(base.get(args[0]), Opaque):
                    raise NotStatic(f"`{args[0]}`: {base[args[0]].reason}")
                if name == "sort" and "key" in kwargs:
                    base[:] = self._builtin("sorted", [base], kwargs)
                    return None
                got = self.call(("method", base, name), args, kwargs)
                _bounded(base)
                return list(got) if name in ("items", "keys", "values") else got
            return self.call(fn, args, kwargs, ast.unparse(node.func))
        fn = self.eval(node.func, env, module)
        return self.call(_check(fn), args, kwargs, ast.unparse(node.func))

    def _attribute(self, base, name: str):
        if isinstance(base, StaticConfig):
            return base.attr(name)
        if isinstance(base, DeviceProps):
            return base.get(name)
        if isinstance(base, Capability) and name in ("major", "minor"):
            return getattr(base, name)
        if isinstance(base, Path):
            if name.startswith("_"):
                raise NotStatic(f"reads `{base.text}.{name}`")
            return Path(f"{base.text}.{name}")
        if isinstance(base, ModuleObj):
            return self._global(base.module, name)
        raise NotStatic(f"reads `.{name}` of a {type(base).__name__}")

    def _name(self, name: str, env: dict, module):
        if name in env:
            return env[name]
        if name in _BUILTINS and module.binding(name) is None:
            return ("builtin", name)
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        return self._global(module, name)

    def _global(self, module, name: str):
        val = self.evaluator.global_name(module, name)
        if isinstance(val, Ref):
            if val.kind == "function":
                return Closure(val.target, val.module or module, {})
            if val.kind == "triton":
                return Path(str(val.target))
            if val.kind == "module":
                return ModuleObj(val.target)
            raise NotStatic(f"`{name}` is a {val.kind}")
        if isinstance(val, Unknown):
            b = module.binding(name)
            if b is not None and b.kind == "import" and name in _EXTERNAL_ROOTS or \
                    b is not None and b.kind == "import" and name == "current_platform":
                return Path(name)
            raise NotStatic(f"`{name}`: {val.reason}")
        got = _py(val, name)
        return _check(got)


@dataclass
class PruneVerdicts:
    """The verdicts of an autotune list that its prune keeps, and what the prune did."""

    name: str | None = None  # the prune function; None: the list has none
    dropped: set = field(default_factory=set)  # ids of the verdicts of configs the prune drops
    kept: dict = field(default_factory=dict)  # id(device class) -> (configs kept, configs) per evaluation
    reason: str | None = None  # why it was not evaluated (for some launch or target)

    def summary(self, dclass) -> str:
        """``"2 of 6 configs kept by _prune_configs"`` for ``dclass`` (each count it gave)."""
        counts = sorted(self.kept.get(id(dclass), set()))
        if not counts or self.name is None:
            return ""
        total = counts[0][1]
        kept = "/".join(str(k) for k in sorted({k for k, _ in counts}))
        return f"{kept} of {total} configs kept by {self.name}"

    def data(self, dclasses) -> dict | None:
        if self.name is None:
            return None
        counts = sorted({k for d in dclasses for k, _ in self.kept.get(id(d), set())})
        out: dict = {"function": self.name, "evaluated": bool(counts)}
        if counts:
            out["kept"] = counts
        if self.reason:
            out["reason"] = self.reason
        return out


def judge_prune(prunes: PruneEvaluator, site, per_config: dict) -> PruneVerdicts:
    """Which verdicts of ``per_config`` ({config index: verdicts}) the site's prune drops:
    evaluated per launch values (each verdict's case, the scenario's) and target."""
    spec = prunes.spec(site)
    out = PruneVerdicts()
    if spec is None:
        return out
    out.name = spec.name
    for index, verdicts in per_config.items():
        for v in verdicts:
            res = prunes.result(site, v.case.given, v.case.reasons, v.dclass)
            if res is None:
                continue
            if res.kept is None:
                out.reason = out.reason or res.reason
                continue
            out.kept.setdefault(id(v.dclass), set()).add((len(res.kept), len(site.configs)))
            if index not in res.kept:
                out.dropped.add(id(v))
    return out
