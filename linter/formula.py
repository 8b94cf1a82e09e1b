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
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise FormulaError(f"formula {text!r}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Name) and node.id not in variables and node.id not in FUNCTIONS:
            raise FormulaError(f"formula {text!r}: unknown name {node.id!r} (known: {', '.join(variables)})")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS or node.keywords:
                raise FormulaError(f"formula {text!r}: only {', '.join(FUNCTIONS)} may be called")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            raise FormulaError(f"formula {text!r}: only numbers are allowed as constants")
    namespace = {"__builtins__": {}, **FUNCTIONS}
    # the checked tree itself becomes the lambda's body: no unparse and no second parse
    at = {"lineno": 1, "col_offset": 0, "end_lineno": 1, "end_col_offset": 0}  # the new nodes' only
    lam = ast.Lambda(ast.arguments(posonlyargs=[], args=[ast.arg(v, **at) for v in variables], kwonlyargs=[],
                                   kw_defaults=[], defaults=[]), tree.body, **at)
    code = compile(ast.Expression(lam), "<formula>", "eval")
    return eval(code, namespace)  # noqa: S307 - the tree was checked node by node above
