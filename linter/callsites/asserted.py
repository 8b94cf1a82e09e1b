"""Values a function asserts: ``assert pool.index_page_size == BLOCK_SIZE_K`` above a launch says
what ``pool.index_page_size`` is wherever the launch runs (the engine's own invariant; a run with
``python -O`` skips it, and so would the launch's shapes no longer be the engine's).

Only top-level ``assert`` statements of the function body count (one inside an ``if`` holds in its
branch only), only equalities (``A == B``, also as terms of ``and``), and only for an expression
below the assert whose names the function does not assign between the two lines. The other side
is evaluated by the caller (:class:`~.values.Evaluator`) as at the assert's line.
"""

from __future__ import annotations

import ast


def _root_name(node: ast.expr) -> str | None:
    """``pool`` of ``pool.index_page_size``, ``buf`` of ``buf.shape[1]``; None for anything else."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _assigned_between(fn, name: str, first: int, last: int) -> bool:
    from .values import local_assignments

    return any(first <= a.line < last for a in local_assignments(fn).get(name, ()))


def _equalities(test: ast.expr):
    """``(left, right)`` of each ``==`` that ``test`` asserts (``A == B``, ``A == B and C == D``)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            yield from _equalities(value)
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        yield test.left, test.comparators[0]


def _asserts(fn) -> dict[str, list[tuple[int, ast.expr]]]:
    """``ast.dump`` of an asserted side -> [(line, the other side)], of ``fn``'s top-level asserts."""
    cache = getattr(fn, "_tilefit_asserted", None)
    if cache is not None:
        return cache
    out: dict[str, list[tuple[int, ast.expr]]] = {}
    for stmt in fn.body:
        if isinstance(stmt, ast.Assert):
            for a, b in _equalities(stmt.test):
                out.setdefault(ast.dump(a), []).append((stmt.lineno, b))
                out.setdefault(ast.dump(b), []).append((stmt.lineno, a))
    fn._tilefit_asserted = out
    return out


def asserted_value(fn, node: ast.expr) -> tuple[int, ast.expr] | None:
    """(line, expression) that ``fn`` asserts ``node`` equal to, above ``node``; else None."""
    if fn is None or not hasattr(node, "lineno"):
        return None
    asserted = _asserts(fn)
    if not asserted:  # most functions assert no equality: no need to spell the expression
        return None
    found = asserted.get(ast.dump(node))
    if not found:
        return None
    root = _root_name(node)
    for line, other in reversed(found):
        if line < node.lineno and (root is None or not _assigned_between(fn, root, line, node.lineno)):
            return line, other
    return None
