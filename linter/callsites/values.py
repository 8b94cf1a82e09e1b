"""Static values of Python expressions: literals, followed names, branches, config lists.

The evaluator never runs user code. It folds what a reader would: literals, arithmetic on
literals, module-level constants (across imports), default arguments of the enclosing function,
locals assigned from such expressions, ``x if cond else y`` (each arm kept, labelled by its
condition), ``min``/``max``/``triton.next_power_of_2``/``triton.cdiv``, list and tuple
displays, comprehensions over literal lists or ``range``, dict displays, ``triton.Config(...)``
and zero-argument helper functions that ``return`` such expressions. Anything else is
:class:`Unknown`, with the reason.

Every literal remembers where it is written (:class:`Loc`), so a fix can edit it, and how it
was reached (``via``), so a message can say "num_stages=2 (default of num_stages in launch())".
"""

from __future__ import annotations

import ast
import itertools
import operator
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from tilefit.model import Span
from tilefit.pysource.scan import Binding

from .asserted import asserted_value
from .labels import (CAPABILITY_LABEL, DTYPE_LABEL, EMPTY, MOE_CONFIG_LABEL, Atoms,  # noqa: F401 (re-exported)
                     consistent, label_capabilities, label_dtypes)
from .scenarios import GivenTensor, PerDtype

MAX_ARMS = 16
ALIAS = "\0tensor name of "  # Frame.bindings key: the caller's name of a tensor parameter (sites._alias)
_TOKENS = itertools.count(1)
OUTER_STRIDE = 4096  # a constexpr outer stride nothing static gives: launch-like, 16-divisible
MAX_ITEMS = 4096
MAX_DEPTH = 12
MAX_STEPS = 50_000  # expressions folded for one launch site (bounded evaluation)
# and CPU seconds of the evaluating thread spent on it (not wall-clock seconds: on a loaded machine
# the clock ran out on sites an idle one finishes, and such a run's results cannot be stored)
MAX_SECONDS = 2.0


@dataclass(frozen=True)
class Loc:
    path: str
    span: Span

    def __str__(self) -> str:
        return f"{self.path}:{self.span.start.line}:{self.span.start.column}"


class Val:
    """Base class of static values."""


@dataclass(frozen=True, eq=False)
class Lit(Val):
    value: Any
    loc: Loc | None = None  # where the literal is written; None when computed
    via: str = ""  # how it was reached: "module constant BLOCK_N", "default of s in f()"

    def __repr__(self) -> str:
        return f"Lit({self.value!r})"


@dataclass(frozen=True, eq=False)
class Arms(Val):
    """One value per branch: ``x if cond else y``, or a local assigned in several places."""

    arms: tuple[tuple[str, Val], ...]


@dataclass(frozen=True, eq=False)
class Unknown(Val):
    reason: str

    def __repr__(self) -> str:
        return f"Unknown({self.reason!r})"


@dataclass(frozen=True, eq=False)
class RunTimeBool(Unknown):
    """A comparison whose operands are computed at run time (``key_cache.ndim == 5``), or a
    ``not`` / ``and`` / ``or`` of such and of literal booleans: a bool nothing static decides.
    Everywhere it is an :class:`Unknown` with its operand's reason; a launch that passes it as a
    constexpr is judged at both values, as ``x if cond else y`` keeps both arms
    (:func:`both_values`). ``text``: the expression's source."""

    text: str = ""


def both_values(val: Val) -> Val:
    """``val`` with each :class:`RunTimeBool` (alone or an arm) replaced by its two values, labelled
    ``if TEXT`` / ``if not TEXT`` as a conditional's arms are (so :func:`consistent` pairs them with
    the same test elsewhere); other values unchanged."""
    def two(v: RunTimeBool) -> list[tuple[str, Val]]:
        text = v.text.replace(", ", ",")  # one label atom
        via = f"both values of `{v.text}` ({v.reason})"
        if text.startswith("not ") and " " not in text[4:]:  # `not hooked`: "if not hooked" / "if hooked"
            return [(f"if {text}", Lit(True, None, via)), (f"if {text[4:]}", Lit(False, None, via))]
        return [(f"if {text}", Lit(True, None, via)), (f"if not {text}", Lit(False, None, via))]

    if isinstance(val, RunTimeBool):
        return Arms(tuple(two(val)))
    if isinstance(val, Arms) and any(isinstance(v, RunTimeBool) for _, v in val.arms):
        out: list[tuple[str, Val]] = []
        for lab, v in val.arms:
            if not isinstance(v, RunTimeBool):
                out.append((lab, v))
                continue
            for lab2, x in two(v):
                labs = [x for x in (lab, lab2) if x]
                if consistent(labs):
                    out.append((", ".join(labs), x))
        return Arms(tuple(out))
    return val


def _bool_typed(v: Val) -> bool:
    """A literal bool, a :class:`RunTimeBool`, or arms of only those."""
    if isinstance(v, Arms):
        return all(_bool_typed(x) for _, x in v.arms)
    return isinstance(v, RunTimeBool) or isinstance(v, Lit) and isinstance(v.value, bool)


_PER_TARGET = object()  # a test answered differently on some targets (Evaluator._test_every_target)
_UNDECIDED = ("evaluation stopped", "too many branches", "nests too deeply")


def _absent_in(vals) -> bool:
    """A model dimension the scenario lacks, or a budget that ran out, among ``vals``' branches:
    not a run-time bool (the launch does not serve the model / was not evaluated)."""
    return any(isinstance(x, Absent) or isinstance(x, Unknown) and any(w in x.reason for w in _UNDECIDED)
               for v in vals for _, x in branches(v))


@dataclass(frozen=True)
class TorchDType:
    """A torch dtype (``torch.bfloat16``, ``q.dtype`` of a tensor the scenario types) by its
    element type's name (``bf16``): compared, never passed to a kernel as a number."""

    name: str

    def __repr__(self) -> str:
        return f"torch dtype {self.name}"


@dataclass(frozen=True, eq=False)
class ShapedTensor(Unknown):
    """A tensor computed at run time whose shape the code spells out (``k.view(-1, heads, dim)``):
    everywhere an :class:`Unknown`, but its ``.shape`` is ``dims`` (``-1`` stays unknown)."""

    dims: tuple = ()


@dataclass(frozen=True, eq=False)
class Absent(Unknown):
    """A model dimension the current scenario does not have (an MLA size in a GQA scenario, the
    experts of a dense model): the launch does not serve that model, so the scenario's instance
    of it is not judged when another scenario's is (:func:`~.sites.build_scenario_sites`)."""


@dataclass(frozen=True, eq=False)
class Seq(Val):
    items: tuple[Val, ...]
    generated: bool = False  # from a comprehension: its literals serve several items


@dataclass(frozen=True, eq=False)
class DictVal(Val):
    items: tuple[tuple[str, Val], ...]

    def get(self, key: str) -> Val | None:
        for k, v in self.items:
            if k == key:
                return v
        return None


@dataclass(frozen=True, eq=False)
class ConfigVal(Val):
    """A ``triton.Config(kwargs, num_warps=..., num_stages=..., ...)``."""

    kwargs: tuple[tuple[str, Val], ...]
    options: tuple[tuple[str, Val], ...]
    loc: Loc | None
    generated: bool = False


@dataclass(frozen=True, eq=False)
class Ref(Val):
    """A name that refers to a definition: ``kind`` is ``kernel``, ``function``, ``module``."""

    kind: str
    target: Any
    module: Any = None


@dataclass
class Frame:
    """Where an expression is evaluated: a module, maybe a function, and explicit bindings."""

    module: Any  # ModuleScan
    func: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    bindings: dict[str, Val] = field(default_factory=dict)
    before_line: int | None = None  # only assignments above this line count
    depth: int = 0
    # frames with the same token have the same bindings (memo keys of frames with bindings)
    token: int = 0

    def __post_init__(self) -> None:
        if self.bindings and not self.token:
            self.token = next(_TOKENS)

    def child(self, **changes) -> "Frame":
        f = Frame(self.module, self.func, dict(self.bindings), self.before_line, self.depth + 1, self.token)
        for k, v in changes.items():
            setattr(f, k, v)
        if "bindings" in changes:
            f.token = next(_TOKENS) if f.bindings else 0
        return f


# ----------------------------------------------------------------------------------------------
# helpers on values


def literal(val: Val) -> Any:
    """The Python value of a :class:`Lit`, else raise ``TypeError``."""
    if isinstance(val, Lit):
        return val.value
    raise TypeError(val)


def branches(val: Val, label: str = "") -> Iterator[tuple[str, Val]]:
    """Flatten nested :class:`Arms` into ``(label, value)`` pairs."""
    if isinstance(val, Arms):
        for sub_label, sub in val.arms:
            joined = f"{label}, {sub_label}" if label and sub_label else (label or sub_label)
            yield from branches(sub, joined)
    else:
        yield label, val


def combine(values: dict[str, Val], limit: int = MAX_ARMS) -> list[tuple[str, dict[str, Val]]] | None:
    """Every combination of the branches of ``values``: ``[(label, {name: value})]``.
    ``None`` when there are more than ``limit`` combinations."""
    names = list(values)
    options = [list(branches(values[n])) for n in names]
    # partial combinations, pruned as they grow: `if c` in one value and `if not c` in another (or
    # two batch sizes' entries of one MoE config dict) is no run, so it never multiplies; each
    # keeps its labels' atoms parsed (labels.Atoms), so a new branch is checked against them alone
    partial: list[tuple[Atoms, list]] = [(EMPTY, [])]
    for opts in options:
        if len(opts) == 1:
            lab, v = opts[0]
            nxt = []
            for labs, vals in partial:
                labs2 = labs.add(lab)
                if labs2 is not None:
                    nxt.append((labs2, vals + [v]))
            partial = nxt
            continue
        nxt = []
        for labs, vals in partial:
            for lab, v in opts:
                labs2 = labs.add(lab)
                if labs2 is None:
                    continue
                nxt.append((labs2, vals + [v]))
                if len(nxt) > limit * 64:
                    return None
        partial = nxt
    out = []
    for labels, vals in partial:
        out.append((labels.text(), dict(zip(names, vals))))
        if len(out) > limit:
            return None
    return out


def arch_capability(arch: str) -> int | None:
    """A target's compute capability as vLLM's ``DeviceCapability.to_int`` (sm_89 -> 89,
    sm_120a -> 120), None for an arch without one (gfx942)."""
    text = str(arch).lower()
    if not text.startswith("sm_"):
        return None
    digits = "".join(ch for ch in text[3:] if ch.isdigit())
    return int(digits) if digits else None


def _on_target(val: Arms, capability: int) -> Val:
    """The one value of per-target arms (every label naming its targets) on ``capability``; else
    ``val``."""
    hits = []
    for label, v in branches(val):
        caps = label_capabilities(label)
        if caps is None:
            return val
        if capability in caps:
            hits.append(v)
    if hits and all(isinstance(h, Lit) for h in hits) and len({bool(h.value) for h in hits}) == 1:
        return hits[0]
    return val


def _on_every_target(val: Arms) -> Val:
    """Per-target arms (every label naming its targets) that all give one truth value: that
    value; else ``val``."""
    got = list(branches(val))
    if all(label_capabilities(lab) is not None and isinstance(v, Lit) for lab, v in got) and \
            len({bool(v.value) for _, v in got}) == 1:
        return got[0][1]
    return val


_CAPABILITY_CALLS = frozenset({"get_device_capability", "has_device_capability", "is_device_capability",
                               "is_device_capability_family", "is_arch_support_pdl"})


def _has_capability_test(fn) -> bool:
    """Does ``fn`` call a compute-capability function anywhere (computed once per function)?"""
    hit = getattr(fn, "_tilefit_capability", None)
    if hit is None:
        hit = any(isinstance(n, ast.Call) and (n.func.attr if isinstance(n.func, ast.Attribute) else
                                               getattr(n.func, "id", "")) in _CAPABILITY_CALLS
                  for n in ast.walk(fn))
        fn._tilefit_capability = hit
    return hit


def restrict(val: Val, label: str) -> Val:
    """``val`` without the branches that cannot hold beside ``label`` (:func:`consistent`); one
    branch left: its value."""
    if not isinstance(val, Arms) or not label:
        return val
    keep = [(lab, v) for lab, v in branches(val) if consistent([lab, label])]
    if not keep or len(keep) == len(list(branches(val))):
        return val
    return keep[0][1] if len(keep) == 1 else Arms(tuple(keep))


def describe(val: Val) -> str:
    if isinstance(val, Lit):
        return repr(val.value)
    if isinstance(val, Unknown):
        return f"<{val.reason}>"
    if isinstance(val, Arms):
        return " | ".join(describe(v) for _, v in val.arms)
    return type(val).__name__


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.BitXor: operator.xor,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_, ast.IsNot: operator.is_not,
}
_SCALARS = (int, float, bool, str, type(None))


def _safe_binop(op: ast.operator, a: Any, b: Any) -> Any:
    if not isinstance(a, _SCALARS) or not isinstance(b, _SCALARS):
        raise TypeError("not a scalar")
    if isinstance(op, ast.Pow) and (abs(b) > 64 if isinstance(b, (int, float)) else True):
        raise ValueError("power too large")
    if isinstance(op, ast.LShift) and b > 64:
        raise ValueError("shift too large")
    if isinstance(op, ast.Mult) and (isinstance(a, str) or isinstance(b, str)):
        raise TypeError("string repetition")
    return _BINOPS[type(op)](a, b)


def _next_pow2(x: int) -> int:
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


# ----------------------------------------------------------------------------------------------
# locals of a function


@dataclass
class _Assigned:
    value: ast.expr | None  # None: assigned by something we do not follow (for target, aug-assign)
    line: int
    why: str = ""


def fn_key(fn) -> tuple:
    """A function in a memo key: itself when it is never inside a body that may be released and
    parsed again (a module-level def, a method), else its outermost enclosing function and its
    position (the same for every parse of that body)."""
    top = fn
    outer = getattr(top, "_tilefit_outer", None)
    while outer is not None:
        top = outer
        outer = getattr(top, "_tilefit_outer", None)
    return (fn,) if top is fn else (top, fn.name, fn.lineno, fn.col_offset)


def node_at(node: ast.AST) -> tuple:
    """A node in a memo key: its type and span (the same for every parse of its function)."""
    return (type(node), getattr(node, "lineno", None), getattr(node, "col_offset", None),
            getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None))


def local_assignments(fn) -> dict[str, list[_Assigned]]:
    """Every assignment to a plain name in ``fn`` (not in nested functions)."""
    cache = getattr(fn, "_tilefit_locals", None)
    if cache is not None:
        return cache
    out: dict[str, list[_Assigned]] = {}
    imports: dict[str, Binding] = {}

    def add(name, value, line, why=""):
        out.setdefault(name, []).append(_Assigned(value, line, why))

    def target(t, value, line, why=""):
        if isinstance(t, ast.Name):
            add(t.id, value, line, why)
        elif isinstance(t, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(t.elts):
                for tt, vv in zip(t.elts, value.elts):
                    target(tt, vv, line)
            elif unpacked_element(value, 0, len(t.elts)) is not None and \
                    not any(isinstance(e, ast.Starred) for e in t.elts):
                # `t, h, d = q.shape`: d is q.shape[2], of a rank-3 tensor (q.shape[-1] too);
                # `bm, bn = config(m)`: bm is config(m)[0]
                for i, tt in enumerate(t.elts):
                    target(tt, unpacked_element(value, i, len(t.elts)), line)
            else:
                text = ast.unparse(value) if value is not None else "a value"
                text = text if len(text) <= 40 else text[:39] + "\u2026"
                for tt in t.elts:
                    target(tt, None, line, f"unpacked from `{text}`")
        elif isinstance(t, ast.Starred):
            target(t.value, None, line, why or "unpacked")

    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                add(node.name, None, node.lineno, "a nested definition")
            continue
        if isinstance(node, ast.Assign):
            for t in node.targets:
                target(t, node.value, node.lineno)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            add(node.target.id, node.value, node.lineno)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            add(node.target.id, None, node.lineno, "changed in place")
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            target(node.target, None, getattr(node, "lineno", 0), "a loop variable")
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    target(item.optional_vars, None, node.lineno, "bound by `with`")
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            add(node.target.id, node.value, node.lineno)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                local = (a.asname or a.name).split(".")[0]
                add(local, None, node.lineno, "imported locally")
                if isinstance(node, ast.ImportFrom):
                    imports[local] = Binding("import", None, node.module, a.name, node.level)
                else:
                    imports[local] = Binding("import", None, a.name if a.asname else local, None, 0)
        for child in ast.iter_child_nodes(node):
            stack.append(child)
    for found in out.values():
        found.sort(key=lambda a: a.line)
    try:
        fn._tilefit_locals = out
        fn._tilefit_imports = imports
    except AttributeError:  # pragma: no cover
        pass
    return out


def local_import(fn, name: str):
    """The :class:`~tilefit.pysource.scan.Binding` of ``from m import name`` inside ``fn``."""
    local_assignments(fn)
    return getattr(fn, "_tilefit_imports", {}).get(name)


def _shape_of(value: ast.expr | None) -> ast.expr | None:
    """The tensor expression of ``x.shape`` / ``x.size()``, else None."""
    if isinstance(value, ast.Attribute) and value.attr == "shape" and isinstance(value.value, ast.Name):
        return value.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "size" and \
            not value.args and not value.keywords and isinstance(value.func.value, ast.Name):
        return value.func.value
    return None


def unpacked_element(value: ast.expr | None, index: int, count: int) -> ast.expr | None:
    """The expression of item ``index`` of ``count`` names unpacked from ``value``: ``q.shape[i]``
    (the rank known: ``count``), ``k.shape[1:]`` -> ``k.shape[1 + i]``, else ``value[i]`` of a
    call, name, attribute or subscript (a helper returning a tuple). None for other values.

    The node is built once per ``value`` node and index (kept on ``value``): every walk of the
    function gets the same node, so definitions grouped or merged by node (``flow._union``, the
    per-target groups of :meth:`Evaluator._split_by_target`) meet their equals, not a copy."""
    if value is None:
        return None
    memo = getattr(value, "_tilefit_unpacked_nodes", None)
    if memo is None:
        memo = {}
        try:
            value._tilefit_unpacked_nodes = memo  # type: ignore[attr-defined]
        except AttributeError:  # pragma: no cover
            pass
    key = (index, count)
    if key not in memo:
        memo[key] = _unpacked_node(value, index, count)
    return memo[key]


def _unpacked_node(value: ast.expr, index: int, count: int) -> ast.expr | None:
    shape = _shape_of(value)
    if shape is not None:
        return _shape_element(shape, value, index, count)
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) and value.slice.upper is None \
            and value.slice.step is None and _shape_of(value.value) is not None:
        lower = value.slice.lower
        start = 0 if lower is None else lower.value if isinstance(lower, ast.Constant) and \
            isinstance(lower.value, int) else None
        if start is not None and start >= 0:
            return _shape_element(_shape_of(value.value), value, start + index, start + count)
        return None
    if isinstance(value, (ast.Call, ast.Name, ast.Attribute, ast.Subscript)):
        node = ast.Subscript(value, ast.Constant(index), ast.Load())
        ast.copy_location(node, value)
        ast.copy_location(node.slice, value)
        node.end_lineno, node.end_col_offset = value.end_lineno, value.end_col_offset
        node.slice.end_lineno, node.slice.end_col_offset = value.end_lineno, value.end_col_offset
        node._tilefit_unpacked = True  # type: ignore[attr-defined]
        return node
    return None


def _shape_element(tensor: ast.expr, where: ast.expr, index: int, rank: int) -> ast.expr:
    """``tensor.shape[index]`` as a node placed at ``where`` (for messages), knowing the rank."""
    node = ast.Subscript(ast.Attribute(ast.Name(tensor.id, ast.Load()), "shape", ast.Load()),
                         ast.Constant(index), ast.Load())
    for sub in ast.walk(node):
        ast.copy_location(sub, where)
        sub.end_lineno, sub.end_col_offset = where.end_lineno, where.end_col_offset
    node._tilefit_rank = rank  # type: ignore[attr-defined]
    return node


def function_params(fn) -> dict[str, ast.expr | None]:
    """Parameter name -> default expression (None without default)."""
    args = fn.args
    positional = list(args.posonlyargs) + list(args.args)
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out = {a.arg: d for a, d in zip(positional, defaults)}
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out[a.arg] = d
    if args.vararg:
        out[args.vararg.arg] = None
    if args.kwarg:
        out[args.kwarg.arg] = None
    return out


# ----------------------------------------------------------------------------------------------
# the evaluator


class Evaluator:
    """Evaluates expressions of scanned modules; ``project`` resolves names across modules."""

    def __init__(self, project):
        self.project = project
        self._globals: dict[tuple[int, str], Val] = {}  # module-level names do not depend on the frame
        # locals of frames without explicit bindings; keyed by fn_key and node positions, not by
        # id: a body held as text (tilefit.pysource.lazybody) may be emptied and parsed again between
        # two launches, and its memo entries must hit (the same values, the same steps) and never
        # meet a reused id
        self._locals: dict[tuple, Val] = {}
        self._segs: dict[tuple, str] = {}  # (module, node type and span) -> its source text: labels and reasons
        self.max_steps = MAX_STEPS
        self.max_seconds = MAX_SECONDS
        # sites stopped by the clock (not the step count) in this run: the machine's load decided them
        self.stopped_by_time = 0
        self._steps = 0
        self._deadline: float | None = None  # None: not inside a site (no time limit)
        self._exhausted: str | None = None  # why the current site's budget ran out
        # "cuda" / "hip" when every target runs that backend: platform tests (`is_hip()`,
        # `current_platform.is_rocm()`, `torch.version.hip`) fold, a ROCm-only branch is no NVIDIA launch
        self.backend: str | None = None
        # compute capabilities of the targets (89, 120, ...): `has_device_capability(90)` folds
        # when every target answers it the same way
        self.capabilities: frozenset = frozenset()
        # tilefit.callsites.scenarios.Scenario: binds tensor shapes and parameters by name
        self.scenario = None
        self.scenario_keys: frozenset = frozenset()  # every key of the run's scenarios
        self.scenario_dims: frozenset = frozenset()  # every dimension name of the run's scenarios
        self._splitting = False  # within :meth:`_per_target_local` (no split in a split)
        self.scenario_hit = False  # did the current site read a scenario key (begin_site resets)
        # attributes of the scenarios' quantisation schemes (names.json quant), and did the current
        # site read one (or a MoE config, which depends on the scheme): only those launches are
        # built again for a further scheme of a model
        self.quant_names: frozenset = frozenset()
        self.quant_hit = False
        # the launch names of the quantised KV-cache presets (names.json kv_quant), and did the
        # current site read one: only those launches are built again for a preset
        self.kv_quant_names: frozenset = frozenset()
        self.kv_quant_hit = False
        # names and shape expressions of the batch dimension, and did the current site read one
        self.batch_keys: frozenset = frozenset()
        self.batch_hit = False
        # shape expressions of a forward's token rows (names.json token_rows), and did the current
        # site read one: only those launches are built again for a prefill-chunk variant
        self.row_keys: frozenset = frozenset()
        self.rows_hit = False
        # names and expressions of a decode context-parallel group (names.json dcp), and did the
        # current site read one: only those launches are built again for a DCP variant
        self.dcp_names: frozenset = frozenset()
        self.dcp_hit = False
        # device-database records of the targets: a fused-MoE launcher's `config` is bound to the
        # configs the engine launches on them (tilefit.callsites.moeconfigs)
        self.devices: tuple = ()

    def forget_functions(self) -> None:
        """Drop the memos of function frames and of source segments (they key nodes of function
        bodies by ``id``): before :meth:`Project.release_bodies` frees those bodies. Module-level
        names stay memoised."""
        self._locals.clear()
        self._segs.clear()

    # -- the budget of one launch site (bounded evaluation) ----------------------------------
    def begin_site(self) -> None:
        """Start the budget of one launch site: :data:`MAX_STEPS` expressions and
        :data:`MAX_SECONDS` CPU seconds of this thread; past either, every value of the site is Unknown with the
        reason (folding through helpers and branches can grow exponentially)."""
        self._steps = 0
        self._deadline = time.thread_time() + self.max_seconds
        self._exhausted = None
        self.scenario_hit = False
        self.quant_hit = False
        self.kv_quant_hit = False
        self.batch_hit = False
        self.rows_hit = False
        self.dcp_hit = False

    _HITS = ("scenario_hit", "quant_hit", "kv_quant_hit", "batch_hit", "rows_hit", "dcp_hit")

    def _take_hits(self) -> frozenset:
        """The scenario-read flags raised so far in this site (and clear them): a memoised local
        keeps the flags its evaluation raised, so each launch that reads it raises them again."""
        out = frozenset(h for h in self._HITS if getattr(self, h))
        for h in self._HITS:
            setattr(self, h, False)
        return out

    def _raise_hits(self, hits: frozenset) -> None:
        for h in hits:
            setattr(self, h, True)

    def end_site(self) -> None:
        self._deadline = None
        self._exhausted = None

    @property
    def exhausted(self) -> str | None:
        return self._exhausted

    def _spend(self) -> None:
        if self._exhausted is not None:
            raise _OutOfBudget()
        if self._deadline is None:
            return
        self._steps += 1
        if self._steps > self.max_steps:
            self._exhausted = f"evaluation stopped after {self.max_steps} steps (bounded evaluation)"
        elif self._steps % 128 == 0 and time.thread_time() > self._deadline:
            self._exhausted = f"evaluation stopped after {self.max_seconds:g} s (bounded evaluation)"
            self.stopped_by_time += 1
        if self._exhausted is not None:
            raise _OutOfBudget()

    def loc(self, module, node: ast.AST) -> Loc:
        return Loc(module.path, module.source.span(node))

    def seg(self, module, node: ast.AST) -> str:
        key = (id(module), *node_at(node))
        hit = self._segs.get(key)
        if hit is None:
            hit = self._segs[key] = module.source.segment(node, 60)
        return hit

    # -- names -------------------------------------------------------------------------------
    def name(self, frame: Frame, name: str, node: ast.AST | None = None) -> Val:
        v = self._name(frame, name, node)
        if frame.func is not None and self.scenario is not None and _has_unknown(v):
            if self.devices:
                from .moeconfigs import config_arms

                arms = config_arms(self.scenario, frame.module.path, name, self.devices)
                if arms is not None:  # the engine's table / default rule for the scenario's experts
                    self.scenario_hit = self.quant_hit = True
                    return arms
            return self._dimension(name, v)
        return v

    def _dimension(self, name: str, v: Val) -> Val:
        """A value nothing static gives (a run-time shape, a parameter without a default): the
        scenario's model dimension or feature of that name (``head_size``, ``num_kv_splits``,
        ``alibi_slopes``), else ``v``. Arms that fold keep their value."""
        if name in self.scenario_dims:
            self.scenario_hit = True
        if name in self.quant_names:
            self.quant_hit = True
        if name in self.kv_quant_names:
            self.kv_quant_hit = True
        if name in self.batch_keys:
            self.batch_hit = True
        if name in self.dcp_names:
            self.dcp_hit = True
        found, value = self.scenario.dimension(name)
        if not found:
            if name in self.scenario_dims:
                if isinstance(v, Absent):
                    return v
                return Absent(f"scenario {self.scenario.name} has no model dimension {name} ({_reason(v)})")
            return v
        lit = _scenario_lit(value, f"scenario {self.scenario.name} ({name})")
        if isinstance(v, Arms):
            return Arms(tuple((lab, lit if isinstance(x, Unknown) else x) for lab, x in v.arms))
        return lit

    def _name(self, frame: Frame, name: str, node: ast.AST | None = None) -> Val:
        if self.scenario is not None and frame.func is not None and name in function_params(frame.func):
            found, value = self.scenario.parameter(name)
            if found or name in self.scenario_keys:
                self.scenario_hit = True
            if found and isinstance(value, GivenTensor):  # an optional tensor the scenario's launches may pass
                return Unknown(f"`{name}` is a tensor {value.why}")
            if found:  # the scenario's value wins over the default and over what a caller passes
                return Lit(value, None, f"scenario {self.scenario.name}")
        if name in frame.bindings and (frame.func is None or frame.before_line is None or not any(
                a.line < frame.before_line for a in local_assignments(frame.func).get(name, ()))):
            # a caller's value, unless the body reassigns the parameter before the line
            # (`sliding_window_q = sliding_window_q if sliding_window_q is not None else 0`)
            return frame.bindings[name]
        if frame.depth > MAX_DEPTH:
            return Unknown(f"{name}: names nest too deeply")
        fn = frame.func
        if fn is not None:
            params = function_params(fn)
            assigns = [a for a in local_assignments(fn).get(name, ())
                       if frame.before_line is None or a.line < frame.before_line]
            passed = name in params
            if assigns and frame.before_line is not None:
                split = self._per_target_local(frame, fn, name, params)
                if split is not None:  # `if get_device_capability(d)[0] < 9: TILE = 512`: per target
                    return split
                assigns, passed = self._reaching(frame, fn, name, name in params)
                if not assigns and passed:
                    return self._param(frame, fn, name, params[name])
                if not assigns:
                    return self.global_name(frame.module, name, frame.depth)
            if len(assigns) > MAX_ARMS:
                return Unknown(f"{name} is assigned {len(assigns)} times in {fn.name}()")
            memo_key = (fn_key(fn), name, frame.before_line, frame.token)
            if memo_key is not None and memo_key in self._locals:
                out, hits = self._locals[memo_key]
                self._raise_hits(hits)  # a later launch reading the local reads the scenario too
                return out
            if assigns:
                before = self._take_hits()
                out = self._assigned_value(frame, fn, name, assigns, passed, params)
                hits = self._take_hits()
                self._raise_hits(before | hits)
                if memo_key is not None and self._exhausted is None:
                    self._locals[memo_key] = (out, hits)
                return out
            if name in params:
                return self._param(frame, fn, name, params[name])
            outer = getattr(fn, "_tilefit_outer", None)
            if outer is not None:  # a closure: the enclosing function's locals and parameters
                return self.name(Frame(frame.module, outer, {}, None, frame.depth + 1), name, node)
        return self.global_name(frame.module, name, frame.depth)

    def _assigned_value(self, frame: Frame, fn, name: str, assigns, passed: bool, params) -> Val:
        """The value of local ``name`` from the assignments that reach the line (one arm each, and
        the value passed in when ``passed``)."""
        arms: list[tuple[str, Val]] = []
        if name in params and passed:
            arms.append((f"{name} as passed", self._param(frame, fn, name, params[name])))
        for a in assigns:
            if a.value is None and a.why == "imported locally" and local_import(fn, name) is not None:
                # `from pkg.mod import helper` inside the function: followed like a module import
                arms.append((f"{name} (line {a.line})",
                             self.project.import_value(frame.module, name, local_import(fn, name),
                                                       frame.depth + 1)))
                continue
            if a.value is None and a.why == "a loop variable":
                loop = _static_loop(fn, a.line)
                if loop is not None:  # `for size, stride in ((k1, s1), (k2, s2)):` one arm per entry
                    v = self._loop_variable(frame, loop, name)
                    if v is not None:
                        arms.extend(branches(v) if isinstance(v, Arms) else [("", v)])
                        continue
            if a.value is None:
                return Unknown(f"{name} is {a.why or 'assigned'} at line {a.line}")
            # the right-hand side sees the names as they are at its own line
            v = self.expr(frame.child(before_line=a.line) if frame.before_line is not None else frame.child(),
                          a.value)
            text = self.seg(frame.module, a.value)
            label = f"{name}={text} (line {a.line})" if len(text) <= 24 else f"{name} of line {a.line}"
            arms.append((label, v))
        return arms[0][1] if len(arms) == 1 else Arms(tuple(arms))

    def _loop_variable(self, frame: Frame, loop: ast.For, name: str) -> Val | None:
        """Loop variable ``name`` of ``for TARGET in (e1, e2, ...)`` (a literal sequence): its value
        in each entry, one arm each labelled ```for` at line L taking entry i`` (the variables of one
        loop take the same entry). None when an entry does not unpack into the target."""
        where = f"`for` at line {loop.lineno}"
        sub = frame.child(before_line=loop.lineno) if frame.before_line is not None else frame.child()
        arms: list[tuple[str, Val]] = []
        for i, item in enumerate(loop.iter.elts):  # type: ignore[attr-defined]
            env: dict[str, Val] = {}
            if not _bind_target(loop.target, self._expr(sub, item), env) or name not in env:
                return None
            arms.append((f"{where} taking entry {i}", env[name]))
        return arms[0][1] if len(arms) == 1 else Arms(tuple(arms))

    def _per_target_local(self, frame: Frame, fn, name: str, params) -> Val | None:
        """Local ``name`` when the assignments that reach the line differ between the targets
        (``if torch.cuda.get_device_capability(d)[0] < 9: TILE_SIZE = min(512, TILE_SIZE)``): one
        arm per group of targets that agree, labelled ``compute capability 86/89 (TILE_SIZE per
        target)``, so each is judged on those targets only. None when the function has no
        capability test or every target takes the same branches."""
        if len(self.capabilities) < 2 or self.backend is None or not _has_capability_test(fn) or self._splitting:
            return None  # within a split, names are looked up once for every target (no split in a split)
        key = ("per target", fn_key(fn), name, frame.before_line, self.backend, frame.token)
        if key in self._locals:
            return self._locals[key]
        self._splitting = True
        try:
            out = self._split_by_target(frame, fn, name, params)
        finally:
            self._splitting = False
        if self._exhausted is None:
            self._locals[key] = out
        return out

    def _split_by_target(self, frame: Frame, fn, name: str, params) -> Val | None:
        from .flow import PARAM, reaching

        every, differs = self._test_every_target(frame, fn)
        reaching(fn, name, frame.before_line, every, name in params)
        if not differs:
            return None  # every test the walk met answers alike on every target: so do their walks
        groups: dict[tuple, tuple[tuple, list[int]]] = {}
        for c in sorted(self.capabilities):
            defs, alive = reaching(fn, name, frame.before_line, self._test_folder(frame, fn, c), name in params)
            if alive:  # on another target the line does not run: no value there
                groups.setdefault(tuple((id(d.value), d.line, d.kind, d.why) for d in defs), (defs, []))[1].append(c)
        out: Val | None = None
        if len(groups) > 1:
            arms = []
            for defs, caps in groups.values():
                assigns = [_Assigned(d.value, d.line, d.why) for d in defs if d.kind != PARAM]
                passed = any(d.kind == PARAM for d in defs)
                if not assigns:
                    v = self._param(frame, fn, name, params[name]) if passed else \
                        self.global_name(frame.module, name, frame.depth)
                else:
                    v = self._assigned_value(frame, fn, name, assigns, passed, params)
                arms.append((f"{CAPABILITY_LABEL}{'/'.join(map(str, caps))} ({name} per target)", v))
            out = Arms(tuple(arms))
        return out

    def _reaching(self, frame: Frame, fn, name: str, is_param: bool) -> tuple[list[_Assigned], bool]:
        """The assignments of ``name`` that reach ``frame.before_line`` (branches whose test
        folds are followed one way: :mod:`.flow`), and whether the value passed in reaches it."""
        from .flow import PARAM, Definition, reaching

        test = self._test_folder(frame, fn)
        key = ("reach", fn_key(fn), name, frame.before_line, self.backend, frame.token)
        hit = self._locals.get(key) if key is not None else None
        if hit is None:
            fast = _straight_line(fn, name, frame.before_line)
            if fast is not None:  # every assignment is a plain statement of the body: the last one wins
                defs = (Definition(fast.value, fast.line),)
            else:
                defs, _alive = reaching(fn, name, frame.before_line, test, is_param)
            hit = ([_Assigned(d.value, d.line, d.why) for d in defs if d.kind != PARAM],
                   any(d.kind == PARAM for d in defs))
            if key is not None and self._exhausted is None:
                self._locals[key] = hit
        return hit

    def _test_every_target(self, frame: Frame, fn):
        """A :mod:`.flow` test callback answering for every target at once: the answer the targets'
        folders (:meth:`_test_folder` with a capability) all give, and a list that becomes non-empty
        when a test the walk met answers differently on some target (then its answer is None)."""
        token = frame.token
        where = fn_key(fn)
        caps = sorted(self.capabilities)
        differs: list = []

        def test(node: ast.expr, line: int):
            key = ("test on every target", where, *node_at(node), line, token)
            if key in self._locals:
                out = self._locals[key]
            else:
                v = self.expr(Frame(frame.module, fn, dict(frame.bindings), line, frame.depth + 1, token), node)
                answers = {bool(x.value) if isinstance(x, Lit) else None
                           for x in ((_on_target(v, c) if isinstance(v, Arms) else v) for c in caps)}
                out = answers.pop() if len(answers) == 1 else _PER_TARGET
                if self._exhausted is None:
                    self._locals[key] = out
            if out is _PER_TARGET:
                differs.append(node)
                return None
            return out

        return test, differs

    def _test_folder(self, frame: Frame, fn, capability: int | None = None):
        """The callback :mod:`.flow` folds an ``if`` test with (memoised per test without bindings);
        with ``capability``, a test answered per target (:meth:`_per_target`) is that target's answer."""
        token = frame.token
        where = fn_key(fn)

        def test(node: ast.expr, line: int):
            key = ("test", where, *node_at(node), line, token, capability)
            if key is not None and key in self._locals:
                return self._locals[key]
            v = self.expr(Frame(frame.module, fn, dict(frame.bindings), line, frame.depth + 1, token), node)
            if isinstance(v, Arms):  # per-target answers: that target's, or the one every target gives
                v = _on_target(v, capability) if capability is not None else _on_every_target(v)
            out = bool(v.value) if isinstance(v, Lit) else None
            if key is not None and self._exhausted is None:
                self._locals[key] = out
            return out

        return test

    def reachable(self, frame: Frame) -> bool:
        """Can ``frame.before_line`` of ``frame.func`` run (a launch under ``if is_hip_:`` cannot
        on NVIDIA targets)?"""
        from .flow import reaching

        if frame.func is None or frame.before_line is None:
            return True

        if not any(isinstance(s, (ast.If, ast.While)) and s.lineno < frame.before_line for s in ast.walk(frame.func)):
            return True  # no branch above the line: it runs whenever the function does
        return reaching(frame.func, "\0", frame.before_line, self._test_folder(frame, frame.func), False)[1]

    def reachable_targets(self, frame: Frame) -> frozenset | None:
        """The targets' compute capabilities on which ``frame.before_line`` runs, when a
        capability test decides it on some of them only (``if has_device_capability(90):
        launch``); None when it runs on every target (or no target-dependent test is above it)."""
        from .flow import reaching

        fn = frame.func
        if fn is None or frame.before_line is None or len(self.capabilities) < 2 or self.backend is None or \
                not _has_capability_test(fn):
            return None
        on = frozenset(c for c in self.capabilities
                       if reaching(fn, "\0", frame.before_line, self._test_folder(frame, fn, c), False)[1])
        return None if on == frozenset(self.capabilities) else on

    def platform(self, node: ast.expr, frame: Frame) -> Val | None:
        """``is_hip()``, ``current_platform.is_rocm()``, ``torch.version.hip``, ``is_cuda()``:
        a boolean of the backend, folded when :attr:`backend` is known."""
        if self.backend is None:
            return None
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            key = fname.strip("_").lower()
            if key in _HIP_PREDICATES:
                return Lit(self.backend == "hip", self.loc(frame.module, node))
            if key in _CUDA_PREDICATES:
                return Lit(self.backend == "cuda", self.loc(frame.module, node))
            if key in _FNUZ_PREDICATES and self.backend == "cuda":  # fnuz fp8 exists only on ROCm parts
                return Lit(False, self.loc(frame.module, node))
            if key in _OTHER_PLATFORMS:  # the targets are GPUs of the backend: not Intel XPU, TPU, CPU
                return Lit(False, self.loc(frame.module, node))
            if key in _ARCH_PREDICATES and self.capabilities:
                want = _ARCH_PREDICATES[key]
                return self._per_target(lambda c: c >= want, f"{self.seg(frame.module, node)}", node, frame)
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and self.capabilities and \
                isinstance(node.func, ast.Attribute) and node.func.attr in _CAPABILITY_TESTS:
            return self._capability(node, frame)
        if isinstance(node, ast.Call) and len(node.args) <= 1 and not node.keywords and self.capabilities and \
                self.backend == "cuda" and (node.func.attr if isinstance(node.func, ast.Attribute) else
                                            getattr(node.func, "id", "")) == "get_device_capability":
            return self._capability_value(node, frame)
        if isinstance(node, ast.Attribute) and node.attr in ("hip", "cuda") and \
                isinstance(node.value, ast.Attribute) and node.value.attr == "version" and \
                isinstance(node.value.value, ast.Name) and node.value.value.id == "torch":
            # truthiness only: `torch.version.hip` is None on CUDA builds (a string otherwise)
            return Lit("hip" if self.backend == node.attr == "hip" else "cuda" if self.backend == node.attr
                       else None, self.loc(frame.module, node))
        return None

    def _capability(self, node: ast.Call, frame: Frame) -> Val | None:
        """vLLM's ``current_platform.has_device_capability(90)`` (>=), ``is_device_capability(90)``
        (==), ``is_device_capability_family(100)`` (same major), an int ``<major><minor>`` or a
        ``(major, minor)`` tuple: folded when every target gives the same answer."""
        arg = self._expr(frame, node.args[0])
        if isinstance(arg, Seq) and len(arg.items) == 2 and all(isinstance(x, Lit) for x in arg.items):
            want = int(arg.items[0].value) * 10 + int(arg.items[1].value)
        elif isinstance(arg, Lit) and isinstance(arg.value, int) and not isinstance(arg.value, bool):
            want = arg.value
        else:
            return None
        test = {"has_device_capability": lambda c: c >= want, "is_device_capability": lambda c: c == want,
                "is_device_capability_family": lambda c: c // 10 == want // 10}[node.func.attr]  # type: ignore
        return self._per_target(test, self.seg(frame.module, node), node, frame)

    def _capability_value(self, node: ast.Call, frame: Frame) -> Val:
        """``torch.cuda.get_device_capability(dev)`` (and vLLM's / SGLang's
        ``get_device_capability()``): the target's ``(major, minor)``, one arm per target when they
        differ, labelled as :meth:`_per_target` labels (``compute capability 86 (... = 8.6)``)."""
        loc = self.loc(frame.module, node)
        caps = sorted(self.capabilities)

        def pair(c: int) -> Seq:
            return Seq((Lit(c // 10, loc, f"compute capability {c}"), Lit(c % 10, loc, f"compute capability {c}")))

        if len(caps) == 1:
            return pair(caps[0])
        text = " ".join(self.seg(frame.module, node).replace(",", " ").split())
        return Arms(tuple((f"{CAPABILITY_LABEL}{c} ({text} = {c // 10}.{c % 10})", pair(c)) for c in caps))

    def _per_target(self, test, text: str, node: ast.expr, frame: Frame) -> Val:
        """A capability test's answer: folded when every target gives the same one, else one arm
        per answer labelled with the targets that give it (``compute capability 86/89 (text
        False)``): the instance of each arm is judged on those targets only."""
        groups: dict[bool, list[int]] = {}
        for c in sorted(self.capabilities):
            groups.setdefault(bool(test(c)), []).append(c)
        loc = self.loc(frame.module, node)
        if len(groups) == 1:
            return Lit(next(iter(groups)), loc, "every target's compute capability")
        text = " ".join(text.replace(",", " ").split())  # one label atom: no ", " inside
        return Arms(tuple((f"{CAPABILITY_LABEL}{'/'.join(map(str, caps))} ({text} {answer})",
                           Lit(answer, loc, f"on compute capability {'/'.join(map(str, caps))}"))
                          for answer, caps in sorted(groups.items(), reverse=True)))

    def _param(self, frame: Frame, fn, name: str, default: ast.expr | None) -> Val:
        if name in frame.bindings and frame.func is fn:  # what the caller passes
            return frame.bindings[name]
        if default is None:
            return Unknown(f"{name} is a parameter of {fn.name}() without a default")
        v = self.expr(Frame(frame.module, None, {}, None, frame.depth + 1), default)
        return _with_via(v, f"default of {name} in {fn.name}()")

    def global_name(self, module, name: str, depth: int = 0) -> Val:
        key = (id(module), name)
        hit = self._globals.get(key)
        if hit is not None:
            return hit
        if depth > MAX_DEPTH:
            return Unknown(f"{name}: names nest too deeply")
        self._globals[key] = Unknown(f"{name} refers to itself")  # cycle guard while evaluating
        try:
            out = self._global_name(module, name, depth)
        except BaseException:
            self._globals.pop(key, None)
            raise
        if self._exhausted is not None:  # cut short: not this name's value, do not remember it
            self._globals.pop(key, None)
        else:
            self._globals[key] = out
        return out

    def _global_name(self, module, name: str, depth: int = 0) -> Val:
        if name in ("True", "False", "None"):
            return Lit({"True": True, "False": False, "None": None}[name])
        b = module.binding(name)
        if b is None:
            if module.triton_name(ast.Name(id=name)) is not None:
                return Ref("triton", module.aliases.get(name, name))
            return Unknown(f"{name} is not defined at module level in {module.name}")
        if b.kind == "assign":
            if b.node is None:
                return Unknown(f"{name} is unpacked from an expression in {module.name}")
            if b.annotation is not None and module.triton_name(b.annotation) is None and \
                    "constexpr" not in ast.unparse(b.annotation):
                pass
            v = self.expr(Frame(module, None, {}, None, depth + 1), b.node)
            if b.conditional:
                v = _with_via(v, f"module constant {name} (set conditionally)")
            return _with_via(v, f"module constant {name}")
        if b.kind == "def":
            kernel = module.kernels.get(name)
            if kernel is not None:
                return Ref("kernel", kernel, module)
            return Ref("function", b.node, module)
        if b.kind == "import":
            return self.project.import_value(module, name, b, depth + 1)
        if b.kind == "class" and isinstance(b.node, ast.ClassDef):
            return Ref("class", b.node, module)
        return Unknown(f"{name} is a class")

    # -- expressions -------------------------------------------------------------------------
    def expr(self, frame: Frame, node: ast.expr) -> Val:
        try:
            return self._expr(frame, node)
        except RecursionError:
            return Unknown("expression nests too deeply")
        except _OutOfBudget:
            return Unknown(self._exhausted or "evaluation stopped (bounded evaluation)")

    def _expr(self, frame: Frame, node: ast.expr) -> Val:
        self._spend()
        m = frame.module
        if isinstance(node, ast.Constant):
            return Lit(node.value, self.loc(m, node))
        if isinstance(node, ast.Name):
            return self.name(frame, node.id, node)
        if isinstance(node, ast.IfExp):
            test = self._expr(frame, node.test)
            if isinstance(test, Lit):  # the condition folds: one arm
                return self._expr(frame, node.body if test.value else node.orelse)
            if isinstance(test, Arms) and all(isinstance(v, Lit) and label_capabilities(lab) is not None
                                              for lab, v in test.arms):
                # answered per target (`x if has_device_capability(90) else y`): each arm keeps its targets
                return Arms(tuple((lab, self._expr(frame, node.body if v.value else node.orelse))
                                  for lab, v in test.arms))
            cond = self.seg(m, node.test)
            return Arms(((f"if {cond}", self._expr(frame, node.body)),
                         (f"if not {cond}", self._expr(frame, node.orelse))))
        if isinstance(node, ast.UnaryOp):
            v = self._expr(frame, node.operand)
            if isinstance(node.op, ast.Not) and isinstance(v, Unknown) and not _absent_in([v]):
                return RunTimeBool(v.reason, self.seg(m, node))  # `not x` is a bool whatever x is
            return self._map(v, lambda x: {ast.USub: operator.neg, ast.UAdd: operator.pos,
                                           ast.Not: operator.not_, ast.Invert: operator.invert}[type(node.op)](x),
                             node, m)
        if isinstance(node, ast.BinOp):
            a, b = self._expr(frame, node.left), self._expr(frame, node.right)
            if isinstance(node.op, ast.Add) and isinstance(a, Seq) and isinstance(b, Seq):
                return Seq(a.items + b.items, a.generated or b.generated)
            return self._map2(a, b, lambda x, y: _safe_binop(node.op, x, y), node, m)
        if isinstance(node, ast.Compare):
            vals = [self._expr(frame, node.left)] + [self._expr(frame, c) for c in node.comparators]
            named = self._device_name_test(node, vals)
            if named is not None:
                return named
            if len(node.ops) == 1 and isinstance(node.ops[0], (ast.Is, ast.IsNot)) and \
                    isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
                test = _none_test(vals[0], isinstance(node.ops[0], ast.IsNot), self.seg(m, node.left))
                if test is not None:
                    return test
            if all(isinstance(v, Lit) for v in vals):
                try:
                    ok = all(_CMPOPS[type(op)](literal(x), literal(y))
                             for op, x, y in zip(node.ops, vals, vals[1:]))
                except Exception:  # noqa: BLE001
                    return Unknown(f"`{self.seg(m, node)}` cannot be compared statically")
                return Lit(ok)
            if len(vals) == 2 and any(isinstance(v, Arms) for v in vals) and \
                    not any(isinstance(x, Unknown) for v in vals for _, x in branches(v)):
                # `K % config["BLOCK_SIZE_K"] == 0` of a config that is one of several: per branch
                op = _CMPOPS[type(node.ops[0])]

                def cmp(x, y):
                    if not isinstance(x, _SCALARS) or not isinstance(y, _SCALARS):
                        raise TypeError("not a scalar")
                    return op(x, y)

                return self._map2(vals[0], vals[1], cmp, node, m)
            unknown = _first_unknown(vals, f"`{self.seg(m, node)}` depends on run-time values")
            if _absent_in(vals):
                return unknown
            return RunTimeBool(unknown.reason, self.seg(m, node))
        if isinstance(node, ast.BoolOp):
            vals = []
            unknown_before = False
            for sub in node.values:
                v = self._expr(frame, sub)
                if isinstance(v, Lit) and bool(v.value) == isinstance(node.op, ast.Or):
                    # `a or True or ...` is truthy, `a and False and ...` falsy, whatever `a` is; only
                    # its truthiness is known when an unknown came first
                    return v if not unknown_before else Lit(bool(v.value))
                unknown_before = unknown_before or not isinstance(v, Lit)
                vals.append(v)
            if all(isinstance(v, Lit) for v in vals):
                res = vals[0].value
                for v in vals[1:]:
                    res = (res and v.value) if isinstance(node.op, ast.And) else (res or v.value)
                return Lit(res)
            unknown = _first_unknown(vals, f"`{self.seg(m, node)}` depends on run-time values")
            if all(_bool_typed(v) for v in vals):  # `and` / `or` of bools is a bool
                return RunTimeBool(unknown.reason, self.seg(m, node))
            return unknown
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items: list[Val] = []
            generated = False
            for e in node.elts:
                if isinstance(e, ast.Starred):
                    inner = self._expr(frame, e.value)
                    if not isinstance(inner, Seq):
                        return Unknown(f"`{self.seg(m, e)}` cannot be unpacked statically")
                    items.extend(inner.items)
                    generated = generated or inner.generated
                else:
                    items.append(self._expr(frame, e))
            return Seq(tuple(items), generated)
        if isinstance(node, ast.Dict):
            pairs: list[tuple[str, Val]] = []
            for k, v in zip(node.keys, node.values):
                if k is None:
                    inner = self._expr(frame, v)
                    if not isinstance(inner, DictVal):
                        return Unknown(f"`**{self.seg(m, v)}` cannot be unpacked statically")
                    pairs.extend(inner.items)
                    continue
                key = self._expr(frame, k)
                if not isinstance(key, Lit) or not isinstance(key.value, str):
                    return Unknown(f"dict key `{self.seg(m, k)}` is not a string literal")
                pairs.append((key.value, self._expr(frame, v)))
            return DictVal(tuple(pairs))
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self._comprehension(frame, node)
        if isinstance(node, ast.Subscript) and self.scenario is not None:
            found, value = self._scenario_expression(frame, node)
            if found or self.scenario_keys:
                self.scenario_hit = self.scenario_hit or found or _key_in(node, self.scenario_keys)
            if found:
                return _scenario_lit(value, f"scenario {self.scenario.name}")
        if isinstance(node, ast.Subscript):
            out = self._or_asserted(frame, node, self._subscript(frame, node))
            if type(out) is Unknown and self.scenario is not None and _key_in(node, self.scenario_keys):
                # a shape another scenario binds (`buf.shape[1]` of the DSA index cache): not this model's
                return Absent(f"scenario {self.scenario.name} has no value for `{self.seg(m, node)}` ({out.reason})")
            return out
        if isinstance(node, ast.Attribute):
            return self._or_asserted(frame, node, self._attribute(frame, node))
        if isinstance(node, ast.Call):
            folded = self.platform(node, frame)
            if folded is not None:
                return folded
            if self.scenario is not None:
                found, value = self._scenario_expression(frame, node)
                if found or self.scenario_keys:
                    self.scenario_hit = self.scenario_hit or found or _key_in(node, self.scenario_keys)
                if found:
                    return Lit(value, None, f"scenario {self.scenario.name}")
            typed = self._tensor_call(node, frame)
            if typed is not None:
                return typed
            return self._call(frame, node)
        if isinstance(node, ast.JoinedStr):
            return Unknown("an f-string")
        return Unknown(f"`{self.seg(m, node)}` is computed at run time")

    def _or_asserted(self, frame: Frame, node: ast.expr, out: Val) -> Val:
        """``out``, or where it is unknown, what the function asserts ``node`` equal to above it
        (``assert pool.index_page_size == BLOCK_SIZE_K``: :mod:`.asserted`)."""
        if not isinstance(out, Unknown) or frame.func is None:
            return out
        hit = asserted_value(frame.func, node)
        if hit is None:
            return out
        line, other = hit
        got = self._expr(frame.child(before_line=line), other)
        if isinstance(got, Lit):
            return Lit(got.value, got.loc, f"asserted at line {line}")
        return out

    def _subscript(self, frame: Frame, node: ast.Subscript) -> Val:
        m = frame.module
        base = self._expr(frame, node.value)
        index = self._expr(frame, node.slice)
        if isinstance(base, DictVal) and isinstance(index, Lit):
            got = base.get(index.value)
            return got if got is not None else Unknown(f"no key {index.value!r} in `{self.seg(m, node.value)}`")
        if isinstance(base, Seq) and isinstance(index, Lit) and isinstance(index.value, int):
            try:
                return base.items[index.value]
            except IndexError:
                return Unknown(f"index {index.value} out of range")
        if isinstance(base, Arms) and isinstance(index, Lit) and isinstance(index.value, str) and \
                all(isinstance(arm, DictVal) for _, arm in branches(base)):
            # `config["BLOCK_SIZE_M"]` of a config that is one of several dicts: the key of each
            arms = [(lab, arm.get(index.value) or Unknown(f"no key {index.value!r} in `{self.seg(m, node.value)}`"))
                    for lab, arm in branches(base)]
            return Arms(tuple(arms))
        if isinstance(base, Arms) and isinstance(index, Lit) and isinstance(index.value, int):
            # a helper returning a tuple on each of its branches: the item of each
            arms = []
            for lab, arm in branches(base):
                item = arm.items[index.value] if isinstance(arm, Seq) and -len(arm.items) <= index.value < \
                    len(arm.items) else arm if isinstance(arm, Unknown) else Unknown(f"`{self.seg(m, node)}` is not "
                                                                                    "a static tuple")
                arms.append((lab, item))
            return Arms(tuple(arms[:MAX_ARMS]))
        if getattr(node, "_tilefit_unpacked", False) and isinstance(base, Unknown):
            return Unknown(f"unpacked from `{self.seg(m, node.value)}`: {base.reason}")
        rank = getattr(node, "_tilefit_rank", None)
        if rank is not None:  # `t, h, d = q.shape`
            return Unknown(f"unpacked from `{self.seg(m, node)}` (dimension {node.slice.value} of {rank}, "  # type: ignore
                           "computed at run time)")
        return _first_unknown([base, index], f"`{self.seg(m, node)}` is computed at run time")

    def _device_name_test(self, node: ast.Compare, vals: list[Val]) -> Val | None:
        """``"H20" in torch.cuda.get_device_name(0)``: folded when every target device is a card
        whose runtime name (its device record's torch_names) gives the same answer."""
        if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.In, ast.NotIn)) or not self.devices:
            return None
        call = node.comparators[0]
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "get_device_name") or not isinstance(vals[0], Lit) or \
                not isinstance(vals[0].value, str):
            return None
        names = [tuple(getattr(d, "torch_names", ()) or ())[:1] for d in self.devices]
        if not all(names):
            return None
        answers = {(vals[0].value in n[0]) != isinstance(node.ops[0], ast.NotIn) for n in names}
        if len(answers) != 1:
            return None
        return Lit(answers.pop(), None, "every target device's runtime name")

    def _attribute(self, frame: Frame, node: ast.Attribute, base: Val | None = None) -> Val:
        """``x.attr``; ``base`` is ``x``'s value when the caller has it already (a call's receiver)."""
        m = frame.module
        folded = self.platform(node, frame)
        if folded is not None:
            return folded
        if isinstance(node.value, ast.Name):
            typed = self._dtype_attribute(node.value.id, node.attr, frame)
            if typed is not None:
                return typed
        if node.attr == "bits" and base is None and _torch_info_call(node.value):
            bits = self._dtype_bits(frame, node.value.args[0])  # `torch.finfo(out.dtype).bits`
            if bits is not None:
                return bits
        if base is None:
            base = self._expr(frame, node.value)
        if isinstance(base, Ref) and base.kind == "module":
            return self.global_name(base.target, node.attr, frame.depth + 1)
        if node.attr == "shape" and isinstance(base, ShapedTensor):
            return Seq(tuple(Unknown(f"`{self.seg(m, node)}` has a dimension computed at run time")
                             if isinstance(d, Lit) and d.value == -1 else d for d in base.dims))
        if isinstance(base, Ref) and base.kind == "class":  # `KVQuantMode.NONE`: a member of literal value
            return self._class_attr(base, node.attr, frame)
        if isinstance(base, Ref) and base.kind == "triton":
            return Ref("triton", f"{base.target}.{node.attr}")
        if isinstance(base, Ref) and base.kind == "math" and base.target == "math":
            from .project import MATH_FUNCTIONS

            if node.attr in MATH_FUNCTIONS:
                return Ref("math", f"math.{node.attr}")
        out = Unknown(f"`{self.seg(m, node)}` is computed at run time")
        if self.scenario is not None and not isinstance(base, Ref):  # `self.page_size`, `layer.num_heads`
            found, value = self._scenario_expression(frame, node)  # `cp_group.world_size` (names.json dcp)
            if found:
                self.scenario_hit = True
                return Lit(value, None, f"scenario {self.scenario.name}")
            if _key_in(node, self.scenario_keys):  # another scenario's (variant's) binding: not this model's
                self.scenario_hit = True
                return Absent(f"scenario {self.scenario.name} has no value for `{self.seg(m, node)}` ({out.reason})")
            return self._dimension(node.attr, out)
        return out

    def _scenario_expression(self, frame: Frame, node: ast.expr) -> tuple[bool, Any]:
        """The scenario's value of a shape read (``q.shape[1]``), or of the caller's tensor the
        name stands for (``B.size(1)`` where the caller passes ``w1``: ``w1.shape[1]``), unless
        the function reassigns the name."""
        found, value = self.scenario.expression(node)
        if found and self.batch_keys and any(k in self.batch_keys for k in expression_keys_of(node)):
            self.batch_hit = True
        if found and self.row_keys and any(k in self.row_keys for k in expression_keys_of(node)):
            self.rows_hit = True
        if self.dcp_names and any(k in self.dcp_names for k in expression_keys_of(node)):
            self.dcp_hit = True
        if found or not frame.bindings or frame.func is None:
            return found, value
        for key in expression_keys_of(node):
            name, _, rest = key.partition(".")
            alias = frame.bindings.get(ALIAS + name)
            if isinstance(alias, Lit) and not local_assignments(frame.func).get(name):
                hit = self.scenario.values.get(f"{alias.value}.{rest}")
                if hit is not None:
                    return True, hit
        return False, None

    def _dtype_attribute(self, base: str, attr: str, frame: Frame) -> Val | None:
        """``torch.bfloat16`` (when ``torch`` is not a name of the scanned tree), and ``x.dtype``
        of a tensor the scenario gives one dtype (``q``: the activation dtype)."""
        from tilefit.dtypes import ALIASES

        if base == "torch" and attr in _TORCH_DTYPES and frame.module.binding("torch") is None or \
                base == "torch" and attr in _TORCH_DTYPES and frame.module.binding("torch").kind == "import":
            return Lit(TorchDType(ALIASES[attr]))
        if attr == "dtype" and self.scenario is not None and frame.func is not None:
            dt = self.scenario.dtype_of(base)
            if dt is not None:
                self.scenario_hit = True
                return Lit(TorchDType(dt), None, f"scenario {self.scenario.name} ({base}: {dt})")
        return None

    def _dtype_bits(self, frame: Frame, node: ast.expr) -> Val | None:
        """The bits of a torch dtype ``node`` folds to (``torch.finfo(dt).bits``), else None."""
        from tilefit.dtypes import ELEMENT_BYTES

        dt = self._expr(frame, node)
        if isinstance(dt, Lit) and isinstance(dt.value, TorchDType) and dt.value.name in ELEMENT_BYTES:
            return Lit(8 * ELEMENT_BYTES[dt.value.name], None, f"bits of {dt.value.name}")
        return None

    def _tensor_call(self, node: ast.Call, frame: Frame) -> Val | None:
        """``x.element_size()`` of a tensor the scenario types; ``current_platform.fp8_dtype()``
        on CUDA; ``x.stride(i)`` of the last dimension the function reads of ``x`` (1: contiguous)."""
        f = node.func
        if not isinstance(f, ast.Attribute):
            return None
        if f.attr == "fp8_dtype" and not node.args and self.backend == "cuda":
            return Lit(TorchDType("fp8e4nv"), self.loc(frame.module, node), "the CUDA fp8 type")
        if f.attr in ("view", "reshape") and node.args and not node.keywords and frame.func is not None and \
                not (len(node.args) == 1 and isinstance(node.args[0], ast.Attribute)):  # not `.view(torch.uint8)`
            args = node.args[0].elts if len(node.args) == 1 and isinstance(node.args[0], ast.Tuple) else node.args
            if not any(isinstance(a, ast.Starred) for a in args):
                return ShapedTensor(f"`{self.seg(frame.module, node)}` is computed at run time",
                                    tuple(self._expr(frame, a) for a in args))
        if not isinstance(f.value, ast.Name) or frame.func is None:
            return None
        tensor = f.value.id
        if f.attr == "element_size" and not node.args and self.scenario is not None:
            from tilefit.dtypes import ELEMENT_BYTES

            dt = self.scenario.dtype_of(tensor)
            if dt is not None and dt in ELEMENT_BYTES:
                self.scenario_hit = True
                return Lit(ELEMENT_BYTES[dt], None, f"scenario {self.scenario.name} ({tensor}: {dt})")
            several = [d for d in self.scenario.dtypes_of(tensor) if d in ELEMENT_BYTES]
            if len(several) > 1:  # one arm per element type (a bf16 or fp8 cache)
                self.scenario_hit = True
                return _scenario_lit(PerDtype(tensor, tuple((d, ELEMENT_BYTES[d]) for d in several)),
                                     f"scenario {self.scenario.name}")
        return None

    def constexpr_stride(self, frame: Frame, node: ast.expr) -> Val | None:
        """``x.stride(i)`` passed to a ``tl.constexpr`` parameter (vLLM's ``stride_k_cache_3``:
        declared constexpr because the launcher's tensor is contiguous there): 1 when ``i`` is the
        last dimension the launching function reads of ``x``; else None. ``a.stride(1) if a.ndim == 3
        else 0``: one arm per layout when the condition is a run-time one."""
        if isinstance(node, ast.IfExp) and frame.func is not None:
            test = self.expr(frame, node.test)
            if isinstance(test, Lit):
                return self.constexpr_stride(frame, node.body if test.value else node.orelse)
            arms = []
            for label, sub in ((f"if {self.seg(frame.module, node.test)}", node.body),
                               (f"if not {self.seg(frame.module, node.test)}", node.orelse)):
                v = self.constexpr_stride(frame, sub) or self.expr(frame, sub)
                if _has_unknown(v):
                    return None
                arms.append((label, v))
            return Arms(tuple(arms))
        if isinstance(node, ast.Name) and frame.func is not None:  # `stride_block = kv_cache.stride(0)`
            assigned = local_assignments(frame.func).get(node.id, [])
            if len(assigned) == 1 and assigned[0].value is not None and assigned[0].line < (frame.before_line or 0):
                node = assigned[0].value
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "stride"
                and isinstance(node.func.value, (ast.Name, ast.Attribute)) and len(node.args) == 1
                and frame.func is not None
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int)):
            return None
        tensor, i = ast.unparse(node.func.value), node.args[0].value
        if i >= 2 and isinstance(node.func.value, ast.Name) and i == _last_index(frame.func, tensor):  # (i >= 2: `q.stride(1)` of a [T, H, D] q is D)
            return Lit(1, None, f"`{tensor}.stride({i})`: the last dimension {frame.func.name}() reads of "
                                f"{tensor} (contiguous)")
        if i >= 0:
            # an outer stride of a contiguous tensor: the product of the inner sizes (heads x head
            # size, a row of a table), a multiple of 16 as a launch specialises it (the compile
            # depends on its divisibility, not its magnitude)
            return Lit(OUTER_STRIDE, None, f"`{tensor}.stride({i})`: an outer stride, judged at {OUTER_STRIDE} "
                                           "(16-divisible)")
        return None

    def _class_attr(self, ref: Ref, attr: str, frame: Frame) -> Val:
        """``Cls.NAME`` where the class body assigns ``NAME = <literal expression>`` (an IntEnum's
        members, class constants); else Unknown."""
        cls = ref.target
        for stmt in cls.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] \
                if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
            if any(isinstance(x, ast.Name) and x.id == attr for x in targets):
                v = self.expr(Frame(ref.module or frame.module, None, {}, None, frame.depth + 1), stmt.value)
                return _with_via(v, f"{cls.name}.{attr}")
        return Unknown(f"`{cls.name}.{attr}` is not a constant of the class")

    def _map(self, v: Val, fn, node, m) -> Val:
        if isinstance(v, Arms):
            return Arms(tuple((lab, self._map(x, fn, node, m)) for lab, x in v.arms))
        if isinstance(v, Lit):
            try:
                return Lit(fn(v.value), None, v.via)
            except Exception:  # noqa: BLE001
                return Unknown(f"`{self.seg(m, node)}` cannot be folded")
        return v if isinstance(v, Unknown) else Unknown(f"`{self.seg(m, node)}` is computed at run time")

    def _map2(self, a: Val, b: Val, fn, node, m) -> Val:
        if isinstance(a, Arms) or isinstance(b, Arms):
            pairs = [(la, x, lb, y) for la, x in branches(a) for lb, y in branches(b) if consistent((la, lb))]
            if len(pairs) > MAX_ARMS:
                return Unknown(f"`{self.seg(m, node)}` has too many branches")
            return Arms(tuple((", ".join(s for s in (la, lb) if s), self._map2(x, y, fn, node, m))
                              for la, x, lb, y in pairs))
        if isinstance(a, Lit) and isinstance(b, Lit):
            try:
                return Lit(fn(a.value, b.value), None, a.via or b.via)
            except Exception:  # noqa: BLE001
                return Unknown(f"`{self.seg(m, node)}` cannot be folded")
        return _first_unknown([a, b], f"`{self.seg(m, node)}` is computed at run time")

    def _comprehension(self, frame: Frame, node) -> Val:
        m = frame.module
        envs: list[dict[str, Val]] = [dict(frame.bindings)]
        for gen in node.generators:
            if gen.is_async:
                return Unknown("an async comprehension")
            nxt: list[dict[str, Val]] = []
            for env in envs:
                it = self._expr(frame.child(bindings=env), gen.iter)
                if not isinstance(it, Seq):  # an unknown iterable's own reason (a budget stop, a run-time shape) first
                    return _first_unknown([it], f"`{self.seg(m, gen.iter)}` is not a static sequence")
                for item in it.items:
                    e2 = dict(env)
                    if not _bind_target(gen.target, item, e2):
                        return Unknown(f"cannot unpack into `{self.seg(m, gen.target)}`")
                    keep = True
                    for cond in gen.ifs:
                        c = self._expr(frame.child(bindings=e2), cond)
                        if isinstance(c, Lit):
                            keep = keep and bool(c.value)
                        # an unknown condition keeps the item: the list may hold it
                    if keep:
                        nxt.append(e2)
                    if len(nxt) > MAX_ITEMS:
                        return Unknown("the comprehension yields too many items")
            envs = nxt
        items = tuple(_mark_generated(self._expr(frame.child(bindings=env), node.elt)) for env in envs)
        return Seq(items, generated=True)

    def _next(self, frame: Frame, node: ast.Call) -> Val:
        """``next(cfg for limit, cfg in TABLE if x <= limit)`` over a static table: the first entry
        whose conditions hold; where a condition is a run-time one, each entry it can pick, one
        branch each (labelled ``taking entry i``: one entry per call), up to the first that
        surely holds."""
        m = frame.module
        gen = node.args[0]
        if len(gen.generators) != 1 or gen.generators[0].is_async:  # type: ignore[attr-defined]
            return Unknown(f"`{self.seg(m, node)}` is computed at run time")
        g = gen.generators[0]  # type: ignore[attr-defined]
        where = f"`{self.seg(m, node)}` (line {node.lineno})"
        out: list[tuple[str, Val]] = []
        for tlabel, table in branches(self._expr(frame, g.iter)):
            if not isinstance(table, Seq):
                return _first_unknown([table], f"`{self.seg(m, g.iter)}` is not a static sequence")
            for i, item in enumerate(table.items):
                env = dict(frame.bindings)
                if not _bind_target(g.target, item, env):
                    return Unknown(f"cannot unpack into `{self.seg(m, g.target)}`")
                tests = [self._expr(frame.child(bindings=env), c) for c in g.ifs]
                if any(isinstance(t, Lit) and not t.value for t in tests):
                    continue
                value = self._expr(frame.child(bindings=env), gen.elt)  # type: ignore[attr-defined]
                sure = all(isinstance(t, Lit) for t in tests)
                label = ", ".join(x for x in (tlabel, f"{where} taking entry {i}") if x)
                out.append((label if not sure or out else tlabel, value))
                if sure:
                    break
                if len(out) > MAX_ARMS:
                    return Unknown(f"{where} has too many branches")
        if not out:
            return Unknown(f"{where}: no entry of the table is static")
        return out[0][1] if len(out) == 1 and not out[0][0] else Arms(tuple(out))

    def _call(self, frame: Frame, node: ast.Call) -> Val:
        m = frame.module
        receiver = None
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("copy", "pop", "get") and \
                not any(isinstance(a, ast.Starred) for a in node.args) and not node.keywords:
            receiver = self._expr(frame, node.func.value)  # once: the dict method and the callee share it
            got = self._dict_method(frame, node, receiver)
            if got is None and node.func.attr == "get" and self._memo_miss(frame, node, receiver):
                got = self._expr(frame, node.args[1]) if len(node.args) == 2 else Lit(None)
            if got is not None:
                return got
        if receiver is not None:
            callee = self._attribute(frame, node.func, receiver)  # type: ignore[arg-type]
        else:
            callee = self._expr(frame, node.func) if not isinstance(node.func, ast.Name) or \
                node.func.id not in _BUILTINS else None
        fname = None
        if isinstance(callee, Ref) and callee.kind == "triton":
            fname = "triton." + str(callee.target).rsplit(".", 1)[-1]
        elif isinstance(callee, Ref) and callee.kind == "math":
            fname = str(callee.target)
        elif callee is None:
            fname = node.func.id  # type: ignore[union-attr]
        if fname == "triton.Config":
            return self._config(frame, node)
        if fname == "next" and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.GeneratorExp):
            return self._next(frame, node)
        args = [self._expr(frame, a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args):
            return Unknown(f"`{self.seg(m, node)}` unpacks arguments at run time")
        if isinstance(node.func, ast.Attribute) and node.func.attr == "bit_length" and not node.args:
            base = self._expr(frame, node.func.value)
            return self._map(base, lambda x: int(x).bit_length(), node, m) if isinstance(base, (Lit, Arms)) else \
                _first_unknown([base], f"`{self.seg(m, node)}` is computed at run time")
        if fname == "isinstance" and len(args) == 2 and isinstance(args[0], Lit):
            return self._isinstance(args[0], node.args[1])
        if fname in ("triton.constexpr", "int", "float", "bool", "abs", "min", "max", "triton.next_power_of_2",
                     "triton.cdiv", "len", "range", "list", "tuple", "sorted", "dict") or \
                isinstance(callee, Ref) and callee.kind == "math" and not node.keywords:
            return self._builtin(fname, args, node, frame)
        if isinstance(callee, Ref) and callee.kind == "function":
            return self._helper_call(frame, callee, node)
        if isinstance(callee, Unknown):
            return Unknown(f"`{self.seg(m, node)}` is computed at run time")
        return Unknown(f"`{self.seg(m, node)}` is computed at run time")

    @staticmethod
    def _memo_miss(frame: Frame, node: ast.Call, base: Val) -> bool:
        """Is ``D.get(key)`` a memo's lookup, judged as its miss? ``D`` a name whose value is an
        empty dict (a module's ``_cache = {}``) and the enclosing function stores into ``D`` at the
        same key (``D[key] = ...``): such a cache only ever holds what this function's miss builds
        from the same inputs (vLLM's TurboQuant ``_get_layout``). A registry filled elsewhere, or
        at another key, is not one."""
        if not isinstance(base, DictVal) or base.items or frame.func is None or \
                not isinstance(node.func.value, ast.Name) or not 1 <= len(node.args) <= 2:  # type: ignore[union-attr]
            return False
        name, key = node.func.value.id, ast.dump(node.args[0])  # type: ignore[union-attr]
        return any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name and
                   ast.dump(t.slice) == key
                   for stmt in ast.walk(frame.func) if isinstance(stmt, ast.Assign) for t in stmt.targets)

    def _dict_method(self, frame: Frame, node: ast.Call, base: Val) -> Val | None:
        """``d.copy()``, ``d.pop(k[, default])``, ``d.get(k[, default])`` of a static dict (or of
        one of several: per branch), ``base`` being ``d``'s value; None when ``d`` is not one."""
        attr = node.func.attr  # type: ignore[union-attr]
        arms = list(branches(base))
        if not arms or not all(isinstance(v, DictVal) for _, v in arms):
            return None
        if attr == "copy":
            return base if not node.args else None
        if not 1 <= len(node.args) <= 2:
            return None
        key = self._expr(frame, node.args[0])
        if not isinstance(key, Lit) or not isinstance(key.value, str):
            return None
        default = self._expr(frame, node.args[1]) if len(node.args) == 2 else \
            (Lit(None) if attr == "get" else None)

        def one(d: DictVal) -> Val:
            got = d.get(key.value)
            if got is not None:
                return got
            return default if default is not None else Unknown(f"no key {key.value!r} in "
                                                               f"`{self.seg(frame.module, node.func.value)}`")

        if len(arms) == 1:
            return one(arms[0][1])  # type: ignore[arg-type]
        return Arms(tuple((lab, one(d)) for lab, d in arms))  # type: ignore[arg-type]

    def _isinstance(self, value: Lit, types: ast.expr) -> Val:
        """``isinstance(<literal>, T)``: a Python scalar is an instance of the builtin scalar types
        only (``isinstance(True, torch.Tensor)`` is False)."""
        names = types.elts if isinstance(types, ast.Tuple) else [types]
        builtin = {"int": int, "float": float, "bool": bool, "str": str, "tuple": tuple, "list": list}
        for n in names:
            if isinstance(n, ast.Name) and n.id in builtin:
                if isinstance(value.value, builtin[n.id]):
                    return Lit(True)
            elif not isinstance(n, (ast.Name, ast.Attribute)):
                return Unknown("isinstance of a computed type")
        return Lit(False)

    def _builtin(self, fname: str, args: list[Val], node: ast.Call, frame: Frame) -> Val:
        m = frame.module
        if fname == "dict":
            pairs = []
            for kw in node.keywords:
                if kw.arg is None:
                    inner = self._expr(frame, kw.value)
                    if not isinstance(inner, DictVal):
                        return Unknown(f"`{self.seg(m, node)}` is computed at run time")
                    pairs.extend(inner.items)
                else:
                    pairs.append((kw.arg, self._expr(frame, kw.value)))
            return DictVal(tuple(pairs))
        if fname in ("list", "tuple", "sorted") and len(args) == 1 and isinstance(args[0], Seq):
            return args[0]
        if fname == "len" and len(args) == 1 and isinstance(args[0], Seq):
            return Lit(len(args[0].items))
        if fname == "range":
            if all(isinstance(a, Lit) and isinstance(a.value, int) for a in args) and 1 <= len(args) <= 3:
                r = range(*[a.value for a in args])
                if len(r) > MAX_ITEMS:
                    return Unknown("range too long")
                return Seq(tuple(Lit(i) for i in r), generated=True)
            return Unknown(f"`{self.seg(m, node)}` is computed at run time")
        if fname in ("min", "max") and len(args) == 1 and isinstance(args[0], Seq):
            args = list(args[0].items)
        if any(isinstance(a, Arms) for a in args) and len(args) <= 3:
            # distribute over the branches of the arguments
            combos = combine({str(i): a for i, a in enumerate(args)})
            if combos is None:
                return Unknown(f"`{self.seg(m, node)}` has too many branches")
            return Arms(tuple((lab, self._builtin(fname, [vals[str(i)] for i in range(len(args))], node, frame))
                              for lab, vals in combos))
        if fname == "min" and len(args) >= 2 and any(isinstance(a, Lit) and isinstance(a.value, (int, float))
                                                      for a in args) \
                and all(isinstance(a, Lit) or isinstance(a, Unknown) for a in args):
            # `min(run_time, 1024)`: the tile a launch can get is at most the bound; the largest
            # is the one that needs the most shared memory, so it is the one judged
            bound = min(a.value for a in args if isinstance(a, Lit))
            return Lit(bound, None, f"at most {bound} (`{self.seg(m, node)}`)")
        if not args or not all(isinstance(a, Lit) for a in args):
            return _first_unknown(args, f"`{self.seg(m, node)}` is computed at run time")
        xs = [a.value for a in args]
        via = next((a.via for a in args if a.via), "")
        try:
            if fname == "triton.constexpr" and len(args) == 1:
                return args[0]
            if fname in ("int", "float", "bool", "abs") and len(xs) == 1:
                return Lit({"int": int, "float": float, "bool": bool, "abs": abs}[fname](xs[0]), None, via)
            if fname == "min":
                return Lit(min(xs), None, via)
            if fname == "max":
                return Lit(max(xs), None, via)
            if fname == "triton.next_power_of_2" and len(xs) == 1:
                return Lit(_next_pow2(xs[0]), None, via)
            if fname == "triton.cdiv" and len(xs) == 2:
                return Lit(-(-xs[0] // xs[1]), None, via)
            if fname.startswith("math.") and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs):
                import math

                got = getattr(math, fname[5:])(*xs)  # MATH_FUNCTIONS only: pure, bounded
                return Lit(got, None, via)
        except Exception:  # noqa: BLE001
            pass
        return Unknown(f"`{self.seg(m, node)}` cannot be folded")

    def _helper_call(self, frame: Frame, ref: Ref, node: ast.Call) -> Val:
        """A call of a plain function of the scanned tree: fold its ``return`` expressions."""
        fn = ref.target
        module = ref.module or frame.module
        if frame.depth > 4:
            return Unknown(f"{fn.name}() calls nest too deeply")
        returns = [r for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None
                   and _owner(fn, r)]
        if not returns:
            return Unknown(f"{fn.name}() returns nothing static")
        params = function_params(fn)
        names = list(params)
        bindings: dict[str, Val] = {}
        for i, a in enumerate(node.args):
            if isinstance(a, ast.Starred) or i >= len(fn.args.posonlyargs) + len(fn.args.args):
                return Unknown(f"`{self.seg(frame.module, node)}` passes arguments we cannot map")
            bindings[names[i]] = self._expr(frame, a)
        for kw in node.keywords:
            if kw.arg is None:
                return Unknown(f"`{self.seg(frame.module, node)}` passes **kwargs")
            bindings[kw.arg] = self._expr(frame, kw.value)
        inner = Frame(module, fn, bindings, None, frame.depth + 1)
        if len(returns) > 1:  # only the returns the passed values can reach (`if is_prefill: return 32`)
            from .flow import reaching

            test = self._test_folder(inner, fn)
            live = [r for r in returns if reaching(fn, "\0", r.lineno, test, False)[1]]
            returns = live or returns
        if len(returns) == 1:
            if isinstance(returns[0].value, ast.Name):
                # `return cfg`: the assignments that reach the return (flow folds the tests above
                # it: a memo's `if cfg is None:` miss), not every assignment of the name
                return self.expr(Frame(module, fn, bindings, returns[0].lineno, frame.depth + 1), returns[0].value)
            return self.expr(inner, returns[0].value)
        call = f"{fn.name}() (line {node.lineno}:{node.col_offset})"  # one call returns once: see consistent()
        return Arms(tuple((f"{call} returning at line {r.lineno}", self.expr(inner, r.value))
                          for r in returns[:MAX_ARMS]))

    def _config(self, frame: Frame, node: ast.Call) -> Val:
        m = frame.module
        kwargs_val: Val = DictVal(())
        if node.args:
            kwargs_val = self._expr(frame, node.args[0])
        options: list[tuple[str, Val]] = []
        for kw in node.keywords:
            if kw.arg == "kwargs":
                kwargs_val = self._expr(frame, kw.value)
            elif kw.arg is not None:
                options.append((kw.arg, self._expr(frame, kw.value)))
        positional_opts = ("num_warps", "num_stages", "num_ctas", "maxnreg")
        for name, a in zip(positional_opts, node.args[1:]):
            options.append((name, self._expr(frame, a)))
        if not isinstance(kwargs_val, DictVal):
            return Unknown(f"the kwargs of `{self.seg(m, node)}` are not a static dict")
        return ConfigVal(kwargs_val.items, tuple(options), self.loc(m, node))


# zero-argument calls that say the backend (their name, underscores stripped, lower case)
_HIP_PREDICATES = frozenset({"is_hip", "is_rocm", "is_hip_available", "is_rocm_available", "use_rocm",
                             "is_amd", "is_hip_or_rocm"})
_CUDA_PREDICATES = frozenset({"is_cuda", "is_nvidia", "is_cuda_available"})
_FNUZ_PREDICATES = frozenset({"is_fp8_fnuz", "is_fnuz"})
_OTHER_PLATFORMS = frozenset({"is_xpu", "is_tpu", "is_cpu", "is_hpu", "is_neuron", "is_npu", "is_musa"})
_TORCH_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
                           "float8_e4m3fnuz", "float8_e5m2fnuz", "int8", "uint8", "int16", "int32", "int64", "half",
                           "float"})
# zero-argument calls whose answer is "compute capability >= N" (name, underscores stripped, lower
# case -> N as DeviceCapability.to_int): vLLM's `current_platform.is_arch_support_pdl()` (cuda.py:
# `major >= 9`), SGLang's `is_arch_support_pdl()` (kernels/jit/utils/arch.py: `major >= 9`)
_ARCH_PREDICATES = {"is_arch_support_pdl": 90}
_CAPABILITY_TESTS = frozenset({"has_device_capability", "is_device_capability", "is_device_capability_family"})

_BUILTINS = {"int", "float", "bool", "abs", "min", "max", "len", "range", "list", "tuple", "sorted", "dict",
             "isinstance", "next"}


class _OutOfBudget(Exception):
    """The current site's budget ran out (:meth:`Evaluator.begin_site`)."""


def _reason(v: Val) -> str:
    if isinstance(v, Unknown):
        return v.reason
    return next((x.reason for _, x in branches(v) if isinstance(x, Unknown)), "not static")


def _last_index(fn, tensor: str) -> int | None:
    """The largest literal dimension index ``fn`` reads of ``tensor`` (``tensor.stride(i)``,
    ``tensor.shape[i]``, ``tensor.size(i)``, or unpacking ``a, b, c = tensor.shape``), memoised."""
    memo = getattr(fn, "_tilefit_last_index", None)
    if memo is None:
        memo = {}
        for node in ast.walk(fn):
            name = idx = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("stride", "size") and isinstance(node.func.value, ast.Name) and \
                    len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and \
                    isinstance(node.args[0].value, int):
                name, idx = node.func.value.id, node.args[0].value
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and \
                    node.value.attr == "shape" and isinstance(node.value.value, ast.Name) and \
                    isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                name, idx = node.value.value.id, node.slice.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                    isinstance(node.targets[0], ast.Tuple) and _shape_of(node.value) is not None:
                name, idx = _shape_of(node.value).id, len(node.targets[0].elts) - 1  # type: ignore[union-attr]
            if name is not None and idx is not None and idx >= 0:
                memo[name] = max(memo.get(name, 0), idx)
        try:
            fn._tilefit_last_index = memo
        except AttributeError:  # pragma: no cover
            pass
    return memo.get(tensor)


def expression_keys_of(node: ast.expr) -> tuple[str, ...]:
    from .scenarios import expression_keys

    return expression_keys(node)


def _has_unknown(v: Val) -> bool:
    return isinstance(v, Unknown) or isinstance(v, Arms) and any(isinstance(x, Unknown) for _, x in v.arms)


def _scenario_lit(value: Any, via: str) -> Val:
    if isinstance(value, PerDtype):  # one arm per element type the scenario gives the tensor
        arms = tuple((f"{DTYPE_LABEL}{value.tensor}: {dt}", Lit(v, None, f"{via} ({value.tensor}: {dt})"))
                     for dt, v in value.values)
        return arms[0][1] if len(arms) == 1 else Arms(arms)
    if isinstance(value, dict) and set(value) == {"dtype"}:  # names.json quant: {"dtype": "fp8e4nv"}
        return Lit(TorchDType(str(value["dtype"])), None, via)
    if isinstance(value, (list, tuple)):
        return Seq(tuple(Lit(x, None, via) for x in value))
    return Lit(value, None, via)


def _torch_info_call(node: ast.expr) -> bool:
    """``torch.finfo(x)`` / ``torch.iinfo(x)`` (one positional argument)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr in ("finfo", "iinfo") and isinstance(node.func.value, ast.Name) \
        and node.func.value.id == "torch" and len(node.args) == 1 and not node.keywords


def _key_in(node: ast.expr, keys) -> bool:
    from .scenarios import expression_keys

    return any(k in keys for k in expression_keys(node))


def _straight_line(fn, name: str, line: int) -> "_Assigned | None":
    """When every assignment of ``name`` in ``fn`` is a plain statement of its body (no branch,
    loop or ``with`` around it) and one of them is above ``line``: the last such one (the
    only one that reaches ``line``, whatever branch ``line`` is in). Else None."""
    assigns = local_assignments(fn).get(name, ())
    if not assigns:
        return None
    top = getattr(fn, "_tilefit_top_lines", None)
    if top is None:
        top = {s.lineno for s in fn.body if isinstance(s, (ast.Assign, ast.AnnAssign))}
        try:
            fn._tilefit_top_lines = top
        except AttributeError:  # pragma: no cover
            pass
    if not all(a.line in top and a.value is not None for a in assigns):
        return None
    before = [a for a in assigns if a.line < line]
    if not before:
        return None
    # the launch's own top-level statement must come after the assignment (not be it)
    return before[-1]


def _owner(fn, ret) -> bool:
    """True when ``ret`` belongs to ``fn`` itself, not to a nested function."""
    for node in ast.walk(fn):
        if node is not fn and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for sub in ast.walk(node):
                if sub is ret:
                    return False
    return True


def _static_loop(fn, line: int) -> ast.For | None:
    """The ``for`` statement of ``fn`` at ``line`` when it loops over a literal tuple or list of at
    most :data:`MAX_ARMS` entries (no starred one), else None."""
    loops = getattr(fn, "_tilefit_static_loops", None)
    if loops is None:
        loops = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.For) and isinstance(node.iter, (ast.Tuple, ast.List)) and \
                    0 < len(node.iter.elts) <= MAX_ARMS and not any(isinstance(e, ast.Starred) for e in node.iter.elts):
                loops[node.lineno] = node
        try:
            fn._tilefit_static_loops = loops
        except AttributeError:
            pass
    return loops.get(line)


def _bind_target(target: ast.expr, value: Val, env: dict[str, Val]) -> bool:
    if isinstance(target, ast.Name):
        env[target.id] = value
        return True
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, Seq) and len(value.items) == len(target.elts):
        return all(_bind_target(t, v, env) for t, v in zip(target.elts, value.items))
    return False


def _mark_generated(v: Val) -> Val:
    if isinstance(v, ConfigVal):
        return ConfigVal(v.kwargs, v.options, v.loc, True)
    return v


def _with_via(v: Val, via: str) -> Val:
    if isinstance(v, Lit):
        return Lit(v.value, v.loc, v.via or via)
    if isinstance(v, Arms):
        return Arms(tuple((lab, _with_via(x, via)) for lab, x in v.arms))
    return v


def _none_test(left: Val, is_not: bool, text: str) -> Val | None:
    """``x is None`` / ``x is not None`` of a value nothing static fixes: both answers, one arm each
    (an optional tensor given or not: both launches exist, each is judged). Arms of ``x`` that fold
    keep their answer; an arm computed at run time beside an arm that is None is the one where ``x``
    is given. None when ``left`` folds (the plain comparison answers), is a model dimension the
    scenario lacks, or is not a value a launcher can get (a function, a module)."""
    if isinstance(left, Absent) or isinstance(left, Lit):
        return None
    if isinstance(left, (Seq, DictVal, ConfigVal)):  # a static list or dict (a scenario's block_shape) is not None
        return Lit(is_not)
    if isinstance(left, Unknown):
        if "evaluation stopped" in left.reason:
            return None
        return Arms(((f"if {text} is given (either, at run time)", Lit(is_not)),
                     (f"if {text} is None (either, at run time)", Lit(not is_not))))
    if isinstance(left, Arms):
        arms = list(branches(left))
        if not any(isinstance(v, Lit) and v.value is None for _, v in arms):
            return None
        out = []
        for label, v in arms:
            if isinstance(v, Absent):
                return None
            if isinstance(v, Lit):
                out.append((label, Lit((v.value is not None) == is_not)))
            elif isinstance(v, (Unknown, Seq, DictVal, ConfigVal)):
                out.append((label, Lit(is_not)))  # the arm that assigns a run-time value: given
            else:
                return None
        return Arms(tuple(out))
    return None


def _first_unknown(vals, fallback: str) -> Unknown:
    for v in vals:
        if isinstance(v, Unknown):
            return v
    return Unknown(fallback)
