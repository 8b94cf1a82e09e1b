"""What a kernel's parameters are, read from its body: pointers (and their role), floats,
and the strides a launch passes as 1.

A launch specialises a compile on its arguments (16-byte aligned pointers, ints equal to 1
become constants, ints divisible by 16 get a hint), and ``num_stages`` only pipelines loads
whose contiguity is known. To compile a scanned kernel as it would be launched, each
non-constexpr parameter needs a launch-like value:

* **pointers** are the parameters that are additive terms of the address of a ``tl.load``,
  ``tl.store``, ``tl.atomic_*``, ``tl.make_block_ptr``/``tl.make_tensor_descriptor`` (also
  through locals, ``tl.advance``, ``tl.multiple_of``, and ``@triton.jit`` helpers that receive
  them). Their role decides their default element type:

  - ``data``: loaded values reach ``tl.dot`` (or are loaded as tiles): swept over
    bf16/fp16/fp8e4nv unless ``[tool.tilefit.kernels]`` names the dtypes;
  - ``index``: loaded values feed addresses or loop bounds (page tables, sequence lengths):
    int32;
  - ``scale``: loaded as scalars and not otherwise used: fp32;
  - ``output``: only stored to: the data dtype (bf16 when data is fp8).

* **floats** are parameters named like scales and epsilons (``sm_scale``, ``eps``, ...);
* **unit strides**: in an address with no implicitly contiguous term, the stride that
  multiplies the offsets of the innermost tile axis (``offs_k[None, :] * stride_ak``) is passed
  as 1 (a contiguous tensor's last stride); every other int gets a 16-divisible value.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Callable

from tilefit.pysource.scan import KernelDef
from .values import local_assignments

_ADDRESS_OPS = {
    "load": ("pointer",), "store": ("pointer",), "atomic_add": ("pointer",), "atomic_max": ("pointer",),
    "atomic_min": ("pointer",), "atomic_cas": ("pointer",), "atomic_xchg": ("pointer",),
    "atomic_and": ("pointer",), "atomic_or": ("pointer",), "atomic_xor": ("pointer",),
    "make_block_ptr": ("base",), "make_tensor_descriptor": ("base",), "prefetch": ("pointer",),
}
_PASS_THROUGH = {"advance", "multiple_of", "max_contiguous", "max_constancy", "broadcast_to", "reshape", "view",
                 "expand_dims", "where"}
_DOT_OPS = {"dot", "dot_scaled"}
_INDEX_NAME = re.compile(r"(?i)(block_tables?|page_table|req_to_token|seq_lens?|seqlens?|start_loc|query_start|cu_seq|"
                         r"indptr|indices|slot_mapping|token_to_req)")
_SCALAR_ANNOTATION = re.compile(r"^((tl|triton\.language)\.)?(u?int(1|8|16|32|64)|float(16|32|64)|bfloat16|int|float|bool)"
                                r"(\|None)?$")
_RANGE_OPS = {"range", "static_range"}
_FLOAT_NAME = re.compile(r"(^|_)(sm_?)?(scale|scaling|eps|epsilon|alpha|beta|temperature|softcap|logit_cap|cap|theta|"
                         r"momentum|factor|ratio|dropout_p|p_drop|inv_freq|lr|weight_decay)(_|$)", re.I)


@dataclass
class KernelInfo:
    pointers: dict[str, str] = field(default_factory=dict)  # param -> data | index | scale | output
    floats: set[str] = field(default_factory=set)
    unit_strides: set[str] = field(default_factory=set)

    @property
    def data_pointers(self) -> list[str]:
        return [p for p, r in self.pointers.items() if r == "data"]


class _Analysis:
    def __init__(self, kernel: KernelDef, helper: Callable[[ast.FunctionDef, ast.expr], KernelDef | None]):
        self.k = kernel
        self.fn = kernel.node
        self.helper = helper
        self.module = kernel.module
        self.params = {p.name for p in kernel.params if not p.constexpr}
        # parameters annotated as scalars (`num_seqs: tl.int32`, `stride: tl.int64`, `n: int`)
        self.scalars = {p.name for p in kernel.params if not p.constexpr and p.annotation and
                        _SCALAR_ANNOTATION.match(p.annotation.replace(" ", ""))}
        self.constexprs = {p.name for p in kernel.params if p.constexpr}
        self.assigns = local_assignments(self.fn)
        self._vector: dict[str, bool] = {}

    # -- helpers -----------------------------------------------------------------------------
    def op(self, call: ast.Call) -> str | None:
        """``load`` for ``tl.load(...)`` (any alias of triton.language), else None."""
        name = self.module.dotted(call.func)
        if name and name.startswith("triton.language."):
            return name.rsplit(".", 1)[-1]
        if name and name.startswith("triton.") and name.count(".") == 1:
            return name.rsplit(".", 1)[-1]
        return None

    def local_values(self, name: str) -> list[ast.expr]:
        return [a.value for a in self.assigns.get(name, ()) if a.value is not None]

    def base_terms(self, expr: ast.expr) -> set[str]:
        """:meth:`terms` that can be the base pointer of an address: not a parameter annotated as a
        scalar (``num_seqs: tl.int32``); of ``query_start_len_ptr + num_seqs``, the one named like a
        pointer when some are (two pointers are never added: the other is an offset)."""
        out = {t for t in self.terms(expr) if t not in self.scalars}
        named = {t for t in out if t.lower().endswith("ptr")}
        return named if named and len(out) > 1 else out

    def terms(self, expr: ast.expr, seen: frozenset = frozenset()) -> set[str]:
        """Parameters that are additive terms of ``expr`` (the candidates for its base pointer)."""
        if isinstance(expr, ast.Name):
            if expr.id in self.params:
                return {expr.id}
            if expr.id in seen:
                return set()
            out: set[str] = set()
            for v in self.local_values(expr.id):
                out |= self.terms(v, seen | {expr.id})
            return out
        if isinstance(expr, ast.BinOp):
            if isinstance(expr.op, ast.Add):
                return self.terms(expr.left, seen) | self.terms(expr.right, seen)
            if isinstance(expr.op, ast.Sub):
                return self.terms(expr.left, seen)
            return set()
        if isinstance(expr, ast.Subscript):
            return self.terms(expr.value, seen)
        if isinstance(expr, ast.IfExp):
            return self.terms(expr.body, seen) | self.terms(expr.orelse, seen)
        if isinstance(expr, ast.Call):
            op = self.op(expr)
            if op in _PASS_THROUGH or op in ("make_block_ptr", "make_tensor_descriptor"):
                arg = _arg(expr, 0, "base") or _arg(expr, 0, "pointer") or _arg(expr, 0, "input") or _arg(expr, 0, "x")
                if op == "where":
                    arg = _arg(expr, 1, "x")
                return self.terms(arg, seen) if arg is not None else set()
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("to",):
                return self.terms(expr.func.value, seen)
        return set()

    def names_in(self, expr: ast.AST, seen: frozenset = frozenset()) -> set[str]:
        """Every name ``expr`` reads, following locals transitively."""
        out: set[str] = set()
        for node in ast.walk(expr):
            if isinstance(node, ast.Name):
                out.add(node.id)
                if node.id not in seen and node.id in self.assigns:
                    for v in self.local_values(node.id):
                        out |= self.names_in(v, seen | {node.id})
        return out

    def is_vector(self, expr: ast.AST, seen: frozenset = frozenset()) -> bool:
        """Does ``expr`` depend on ``tl.arange`` (a tile of offsets rather than a scalar)?"""
        for node in ast.walk(expr):
            if isinstance(node, ast.Call) and self.op(node) in ("arange", "make_block_ptr",
                                                                 "make_tensor_descriptor"):
                return True
            if isinstance(node, ast.Name) and node.id in self.assigns and node.id not in seen:
                hit = self._vector.get(node.id)
                if hit is None:
                    self._vector[node.id] = False  # cycle guard
                    hit = any(self.is_vector(v, seen | {node.id}) for v in self.local_values(node.id))
                    self._vector[node.id] = hit
                if hit:
                    return True
        return False

    # -- the analysis ------------------------------------------------------------------------
    def run(self) -> KernelInfo:
        info = KernelInfo()
        loads: list[tuple[ast.Call, ast.expr]] = []  # (load call, address)
        stores: list[ast.expr] = []
        pointer_params: set[str] = set()
        helper_roles: dict[str, str] = {}  # pointers handed to @triton.jit helpers
        for node in ast.walk(self.fn):
            if not isinstance(node, ast.Call):
                continue
            op = self.op(node)
            if op in _ADDRESS_OPS:
                addr = _arg(node, 0, _ADDRESS_OPS[op][0])
                if addr is None:
                    continue
                base = self.base_terms(addr)
                pointer_params |= base
                if op == "load":
                    loads.append((node, addr))
                elif op in ("store",) or op.startswith("atomic"):
                    stores.append(addr)
                elif op in ("make_block_ptr", "make_tensor_descriptor"):
                    loads.append((node, addr))
            elif isinstance(node.func, ast.Name):
                helper = self.helper(self.fn, node.func)
                if helper is not None and helper.node is not self.fn:
                    sub = analyze(helper, self.helper, depth=1)
                    for p, a in zip(helper.params, node.args):
                        role = sub.pointers.get(p.name)
                        if role is not None:
                            for outer in self.terms(a):
                                pointer_params.add(outer)
                                helper_roles.setdefault(outer, role)
        # taint: which locals hold values loaded from which pointer
        taint: dict[str, set[str]] = {}

        def loaded_from(expr: ast.AST) -> set[str]:
            """Pointers whose loaded values ``expr`` carries (a load's own address and mask are
            not its value)."""
            out: set[str] = set()
            stack = [expr]
            while stack:
                node = stack.pop()
                if isinstance(node, ast.Call) and self.op(node) == "load":
                    addr = _arg(node, 0, "pointer")
                    if addr is not None:
                        out |= self.terms(addr) & pointer_params
                    continue
                if isinstance(node, ast.Name) and node.id in taint:
                    out |= taint[node.id]
                stack.extend(ast.iter_child_nodes(node))
            return out

        changed = True
        rounds = 0
        while changed and rounds < 20:
            changed = False
            rounds += 1
            for name, assigns in self.assigns.items():
                for a in assigns:
                    if a.value is None:
                        continue
                    src = loaded_from(a.value)
                    if src - taint.get(name, set()):
                        taint.setdefault(name, set()).update(src)
                        changed = True

        data: set[str] = set()
        index: set[str] = set()
        for node in ast.walk(self.fn):
            if isinstance(node, ast.Call):
                op = self.op(node)
                if op in _DOT_OPS:
                    for a in list(node.args[:2]) + [k.value for k in node.keywords if k.arg in ("input", "other")]:
                        data |= loaded_from(a)
                elif op in _ADDRESS_OPS:
                    addr = _arg(node, 0, _ADDRESS_OPS[op][0])
                    if addr is not None:
                        index |= loaded_from(addr)
                elif op in _RANGE_OPS or isinstance(node.func, ast.Name) and node.func.id == "range":
                    for a in node.args:
                        index |= loaded_from(a)
            elif isinstance(node, (ast.If, ast.While)):
                index |= loaded_from(node.test)
        loaded = {p for call, addr in loads for p in self.terms(addr) & pointer_params}
        vector_loaded = {p for call, addr in loads if self.is_vector(addr) for p in self.terms(addr) & pointer_params}
        has_dot = bool(data) or any(isinstance(n, ast.Call) and self.op(n) in _DOT_OPS for n in ast.walk(self.fn))
        for p in sorted(pointer_params, key=lambda n: self.k.param(n).index if self.k.param(n) else 0):
            if p in data and p in vector_loaded:
                role = "data"
            elif p in index:
                role = "index"
            elif p in helper_roles and p not in loaded and not any(p in self.terms(a) for a in stores):
                role = helper_roles[p]
            elif p in loaded:
                # tiles of a kernel without tl.dot are its data; beside a dot, scales and weights
                role = "data" if p in vector_loaded and not has_dot else "scale"
            else:
                role = "output"
            if role in ("data", "scale") and _INDEX_NAME.search(p):
                # page tables, sequence lengths, offsets: integers whatever the flow analysis saw
                # (their loads sit in @triton.jit helpers: vLLM's resolve_seq_and_query_len)
                role = "index"
            info.pointers[p] = role
        for p in self.k.params:
            if not p.constexpr and p.name not in info.pointers and _FLOAT_NAME.search(p.name):
                info.floats.add(p.name)
        tensors = {p for p, r in info.pointers.items() if r in ("data", "output")}
        info.unit_strides = self.unit_strides([a for _, a in loads if self.terms(a) & tensors] +
                                              [a for a in stores if self.terms(a) & tensors],
                                              set(info.pointers) | info.floats)
        return info

    def unit_strides(self, addresses: list[ast.expr], not_ints: set[str]) -> set[str]:
        ints = self.params - not_ints
        per_pointer: dict[frozenset, list[list[str] | None]] = {}
        for addr in addresses:
            terms = self.term_nodes(addr)
            implicit = False
            candidates: list[str] = []
            for t in terms:
                stride, axis_last = self.stride_term(t, ints)
                if stride is not None:
                    if axis_last:
                        candidates.append(stride)
                elif not (isinstance(t, ast.Name) and t.id in self.params) and self.is_vector(t) and \
                        not self.has_param_product(t, ints):
                    implicit = True
            per_pointer.setdefault(frozenset(self.terms(addr)), []).append(None if implicit else candidates)
        out: set[str] = set()
        for found in per_pointer.values():
            if any(c is None for c in found):
                continue  # the tensor is addressed contiguously somewhere: its strides are real ones
            for c in found:
                if c is not None and len(c) == 1:
                    out.add(c[0])
        return out

    def term_nodes(self, expr: ast.expr, seen: frozenset = frozenset()) -> list[ast.expr]:
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
            return self.term_nodes(expr.left, seen) + self.term_nodes(expr.right, seen)
        if isinstance(expr, ast.Name) and expr.id not in self.params and expr.id not in seen:
            values = self.local_values(expr.id)
            if len(values) == 1:
                return self.term_nodes(values[0], seen | {expr.id})
        return [expr]

    def stride_term(self, t: ast.expr, ints: set[str]) -> tuple[str | None, bool]:
        """``offs[None, :] * stride`` -> ("stride", True) (the innermost axis)."""
        if not (isinstance(t, ast.BinOp) and isinstance(t.op, ast.Mult)):
            return None, False
        for a, b in ((t.left, t.right), (t.right, t.left)):
            if isinstance(b, ast.Name) and b.id in ints and self.is_vector(a):
                return b.id, self.innermost(a)
        return None, False

    def innermost(self, expr: ast.expr) -> bool:
        """Is the vector ``expr`` laid along the last axis of its tile (``x[None, :]``, or 1-D)?"""
        if isinstance(expr, ast.Subscript):
            sl = expr.slice
            if isinstance(sl, ast.Tuple):
                full = [i for i, e in enumerate(sl.elts) if isinstance(e, ast.Slice)]
                return bool(full) and full[-1] == len(sl.elts) - 1
            return isinstance(sl, ast.Slice)
        if isinstance(expr, ast.BinOp):  # (offs[:, None] // top_k): look at the vector operands
            parts = [x for x in (expr.left, expr.right) if self.is_vector(x)]
            return bool(parts) and all(self.innermost(x) for x in parts)
        return True  # a 1-D offset vector

    def has_param_product(self, t: ast.expr, ints: set[str]) -> bool:
        return any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult) and
                   any(isinstance(x, ast.Name) and x.id in ints for x in (n.left, n.right))
                   for n in ast.walk(t))


def _arg(call: ast.Call, pos: int, name: str) -> ast.expr | None:
    if len(call.args) > pos and not isinstance(call.args[pos], ast.Starred):
        return call.args[pos]
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


_memo: dict[int, KernelInfo] = {}


def analyze(kernel: KernelDef, helper: Callable[[ast.FunctionDef, ast.expr], KernelDef | None] | None = None,
            depth: int = 0) -> KernelInfo:
    """The parameter roles of ``kernel`` (memoised per kernel node)."""
    key = id(kernel.node)
    hit = getattr(kernel.node, "_tilefit_info", None)
    if hit is not None:
        return hit
    if depth > 3:
        return KernelInfo()
    info = _Analysis(kernel, helper or (lambda fn, expr: None)).run()
    try:
        kernel.node._tilefit_info = info
    except AttributeError:  # pragma: no cover
        _memo[key] = info
    return info
