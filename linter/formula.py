"""Safe arithmetic formulas stored as data.

The analytic model keeps its closed forms as strings in JSON (``"max(S - 1, 1) * (BM*BK*a +
BK*BN*b)"``). This module checks such a string against a small grammar (integer and float
literals, the model's variable names, + - * / // % **, comparisons, ``x if c else y``,
``max``/``min``/``ceil``/``floor``/``pow2ceil``) and turns it into a Python function once, so
evaluating it costs one call.
"""

from __future__ import annotations

import ast
import math
from functools import lru_cache
from typing import Callable, Mapping

_ALLOWED_NODES = (
    ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp, ast.Call,
    ast.Name, ast.Load, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv,
    ast.Mod, ast.Pow, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or, ast.Lt, ast.LtE, ast.Gt,
    ast.GtE, ast.Eq, ast.NotEq,
)
_ALLOWED = frozenset(_ALLOWED_NODES)  # parse gives these very classes, never subclasses


def _pow2ceil(x: float) -> int:
    x = int(math.ceil(x))
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


FUNCTIONS: Mapping[str, Callable] = {
    "max": max,
    "min": min,
    "ceil": math.ceil,
    "floor": math.floor,
    "pow2ceil": _pow2ceil,
}


class FormulaError(ValueError):
    pass


@lru_cache(maxsize=8192)
def compile_formula(text: str, variables: tuple[str, ...]) -> Callable[..., float]:
    """Compile ``text`` to ``f(**values)`` after checking it uses only allowed syntax. Memoised:
    the same form text recurs across arch families, kernels and calibration files."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"formula {text!r}: {exc.msg}") from None
    _check(tree, text, variables)
    namespace = {"__builtins__": {}, **FUNCTIONS}
    # the checked text, as the body of a lambda over the variables: compiled from its text (a
    # compile of the checked tree would first convert every node back to the compiler's own)
    code = compile(f"lambda {', '.join(variables)}: (\n{text}\n)", "<formula>", "eval")
    return eval(code, namespace)  # noqa: S307 - the tree was checked node by node above


def _check(tree: ast.Expression, text: str, variables: tuple[str, ...]) -> None:
    """Raise FormulaError unless every node of ``tree`` (``text`` parsed) is of the grammar. The
    nodes in the order ``ast.walk`` visits them (breadth first), without its generators."""
    queue = [tree]
    for node in queue:  # the list grows as it is read: each node's children after it
        kind = type(node)
        if kind not in _ALLOWED:
            raise FormulaError(f"formula {text!r}: {kind.__name__} is not allowed")
        if kind is ast.Name:
            if node.id not in variables and node.id not in FUNCTIONS:
                raise FormulaError(f"formula {text!r}: unknown name {node.id!r} (known: {', '.join(variables)})")
        elif kind is ast.Call:
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                raise FormulaError(f"formula {text!r}: only {', '.join(FUNCTIONS)} may be called")
        elif kind is ast.Constant:
            if not isinstance(node.value, (int, float)):
                raise FormulaError(f"formula {text!r}: only numbers are allowed as constants")
        for name in node._fields:
            child = getattr(node, name, None)
            if isinstance(child, list):
                queue.extend(c for c in child if isinstance(c, ast.AST))
            elif isinstance(child, ast.AST):
                queue.append(child)
