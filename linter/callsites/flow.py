"""Which assignments of a local reach a line, with the branches that cannot run pruned.

``num_stages = 2`` then ``if is_hip_: num_stages = 1`` then ``elif BLOCK_DMODEL >= 1024:
num_stages = 1``: on an NVIDIA target, with ``BLOCK_DMODEL`` 512, only the first assignment
reaches the launch. :func:`reaching` walks a function's body in order (structured code, no
CFG): a plain assignment replaces what reached before it, an ``if`` whose test folds (the
``test`` callback answers True or False) contributes only the branch it takes and both
otherwise, a loop body may run or not, a ``return``/``raise``/``break``/``continue`` ends its
path. :func:`reachable` says whether a line can run at all (a launch under ``if is_hip_:`` is
not an NVIDIA launch).

The callback evaluates a test at its line; it may look names up itself, at earlier lines only,
so the recursion ends.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

from .values import unpacked_element

PARAM = "param"  # the value the function was called with (or the parameter's default)

Test = Callable[[ast.expr, int], "bool | None"]


@dataclass(frozen=True)
class Definition:
    """One assignment that may reach the line: ``value`` (None: not followed, ``why`` says
    why) at ``line``; ``kind`` is ``assign`` or :data:`PARAM`."""

    value: ast.expr | None
    line: int
    why: str = ""
    kind: str = "assign"


@dataclass
class _Path:
    defs: tuple[Definition, ...]
    alive: bool = True


_MAX_DEFS = 32


def _union(paths: list[_Path]) -> _Path:
    live = [p for p in paths if p.alive]
    if not live:
        return _Path((), False)
    out: list[Definition] = []
    seen = set()
    for p in live:
        for d in p.defs:
            key = (id(d.value), d.line, d.kind, d.why)
            if key not in seen:
                seen.add(key)
                out.append(d)
    return _Path(tuple(out[:_MAX_DEFS]))


def _contains(stmt: ast.stmt, line: int) -> bool:
    end = getattr(stmt, "end_lineno", None) or stmt.lineno
    return stmt.lineno <= line <= end


def _target_names(t: ast.expr) -> list[tuple[str, ast.expr | None]]:
    """Names bound by an assignment target; a value only for a plain Name target."""
    if isinstance(t, ast.Name):
        return [(t.id, None)]
    out = []
    for n in ast.walk(t):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.append((n.id, None))
    return out


class _Walker:
    def __init__(self, name: str, line: int, test: Test, walrus: bool = True):
        self.name = name
        self.line = line
        self.test = test
        self.walrus = walrus  # does the function bind `name` with `:=` anywhere
        self.reached: _Path | None = None  # the state at the line, once reached

    def define(self, path: _Path, value: ast.expr | None, line: int, why: str = "") -> _Path:
        return _Path((Definition(value, line, why),), path.alive)

    def assign(self, stmt: ast.stmt, path: _Path) -> _Path:
        name = self.name
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name) and t.id == name:
                    path = self.define(path, stmt.value, stmt.lineno)
                elif isinstance(t, (ast.Tuple, ast.List)):
                    if isinstance(stmt.value, (ast.Tuple, ast.List)) and len(stmt.value.elts) == len(t.elts):
                        for tt, vv in zip(t.elts, stmt.value.elts):
                            if isinstance(tt, ast.Name) and tt.id == name:
                                path = self.define(path, vv, stmt.lineno)
                    elif unpacked_element(stmt.value, 0, len(t.elts)) is not None and \
                            not any(isinstance(e, ast.Starred) for e in t.elts):
                        for i, tt in enumerate(t.elts):  # `t, h, d = q.shape`: q.shape[i] of a rank-3 q
                            if isinstance(tt, ast.Name) and tt.id == name:
                                path = self.define(path, unpacked_element(stmt.value, i, len(t.elts)), stmt.lineno)
                    elif any(n == name for n, _ in _target_names(t)):
                        text = ast.unparse(stmt.value)
                        text = text if len(text) <= 40 else text[:39] + "\u2026"
                        path = self.define(path, None, stmt.lineno, f"unpacked from `{text}`")
                elif any(n == name for n, _ in _target_names(t)):
                    pass  # an item or attribute of it is set: the name still holds its object
        elif isinstance(stmt, ast.AnnAssign):
            if isinstance(stmt.target, ast.Name) and stmt.target.id == name and stmt.value is not None:
                path = self.define(path, stmt.value, stmt.lineno)
        elif isinstance(stmt, ast.AugAssign):
            if isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                path = self.define(path, None, stmt.lineno, "changed in place")
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == name:
                path = self.define(path, None, stmt.lineno, "a nested definition")
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                if (a.asname or a.name).split(".")[0] == name:
                    path = self.define(path, None, stmt.lineno, "imported locally")
        # walrus in any expression of a simple statement (only functions that have one are walked)
        for n in (ast.walk(stmt) if self.walrus else ()):
            if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name) and n.target.id == name:
                path = _union([path, self.define(path, n.value, stmt.lineno)])
        return path

    def block(self, body: list[ast.stmt], path: _Path) -> _Path:
        for stmt in body:
            if self.reached is not None or not path.alive:
                return path
            if _contains(stmt, self.line):
                return self.into(stmt, path)
            path = self.stmt(stmt, path)
        return path

    def into(self, stmt: ast.stmt, path: _Path) -> _Path:
        """The line is inside ``stmt``: the state where it runs."""
        if isinstance(stmt, ast.If):
            taken = self.test(stmt.test, stmt.lineno) if self.line > stmt.test.end_lineno else None
            in_body = any(_contains(s, self.line) for s in stmt.body)
            if in_body and taken is False or not in_body and stmt.orelse and taken is True:
                self.reached = _Path((), False)  # this branch cannot run
                return self.reached
            sub = stmt.body if in_body else stmt.orelse
            return self._finish(sub, path)
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            loop_path = path
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                if any(n == self.name for n, _ in _target_names(stmt.target)):
                    loop_path = self.define(path, None, stmt.lineno, "a loop variable")
            if any(_contains(s, self.line) for s in stmt.body):
                # first iteration, or a later one after the body ran
                after = self._probe(stmt.body, loop_path)
                return self._finish(stmt.body, _union([loop_path, after]))
            return self._finish(stmt.orelse, _union([path, self._probe(stmt.body, loop_path)]))
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None and any(n == self.name for n, _ in
                                                          _target_names(item.optional_vars)):
                    path = self.define(path, None, stmt.lineno, "bound by `with`")
            return self._finish(stmt.body, path)
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            for part in [stmt.body, *[h.body for h in stmt.handlers], stmt.orelse, stmt.finalbody]:
                if any(_contains(s, self.line) for s in part):
                    if part is stmt.body:
                        return self._finish(part, path)
                    return self._finish(part, _union([path, self._probe(stmt.body, path)]))
            return self._finish(stmt.body, path)
        if type(stmt).__name__ == "Match":
            for case in stmt.cases:
                if any(_contains(s, self.line) for s in case.body):
                    return self._finish(case.body, path)
        # a simple statement (the launch itself): what reached it
        self.reached = path
        return path

    def _finish(self, body, path: _Path) -> _Path:
        self.block(body, path)
        if self.reached is None:  # the line is in the statement's header
            self.reached = path
        return self.reached

    def _probe(self, body, path: _Path) -> _Path:
        """The state after ``body`` without looking for the line."""
        sub = _Walker(self.name, -1, self.test, self.walrus)
        return sub.block(body, path)

    def stmt(self, stmt: ast.stmt, path: _Path) -> _Path:
        if isinstance(stmt, ast.If):
            taken = self.test(stmt.test, stmt.lineno)
            if taken is True:
                return self.block(stmt.body, path)
            if taken is False:
                return self.block(stmt.orelse, path)
            return _union([self.block(stmt.body, path), self.block(stmt.orelse, path)])
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(stmt, ast.While) and self.test(stmt.test, stmt.lineno) is False:
                return self.block(stmt.orelse, path)
            start = path
            if isinstance(stmt, (ast.For, ast.AsyncFor)) and any(n == self.name for n, _ in
                                                                  _target_names(stmt.target)):
                start = self.define(path, None, stmt.lineno, "a loop variable")
            body = self.block(stmt.body, start)
            body = _Path(body.defs, True)  # break/continue end an iteration, not the function
            merged = _union([path if not isinstance(stmt, (ast.For, ast.AsyncFor)) else
                             _union([path, start]), body])
            return self.block(stmt.orelse, merged)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None and any(n == self.name for n, _ in
                                                          _target_names(item.optional_vars)):
                    path = self.define(path, None, stmt.lineno, "bound by `with`")
            return self.block(stmt.body, path)
        if isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            body = self.block(stmt.body, path)
            handlers = [self.block(h.body, _union([path, _Path(body.defs)])) for h in stmt.handlers]
            main = self.block(stmt.orelse, body) if stmt.orelse else body
            merged = _union([main] + handlers)
            return self.block(stmt.finalbody, merged) if stmt.finalbody else merged
        if type(stmt).__name__ == "Match":
            return _union([self.block(c.body, path) for c in stmt.cases] + [path])
        if isinstance(stmt, (ast.Return, ast.Raise)):
            return _Path(path.defs, False)
        if isinstance(stmt, (ast.Break, ast.Continue)):
            return _Path(path.defs, False)
        return self.assign(stmt, path)


def reaching(fn, name: str, line: int, test: Test, is_param: bool) -> tuple[tuple[Definition, ...], bool]:
    """``(definitions, reachable)``: the assignments of ``name`` in ``fn`` that may reach
    ``line`` (a :data:`PARAM` definition for the value the function received), and whether
    ``line`` can run at all."""
    start = _Path((Definition(None, fn.lineno, "", PARAM),) if is_param else ())
    walker = _Walker(name, line, test, name in _walrus_names(fn))
    end = walker.block(fn.body, start)
    state = walker.reached if walker.reached is not None else end
    return state.defs, state.alive


def _walrus_names(fn) -> frozenset:
    """Names ``fn`` binds with ``:=`` (computed once per function)."""
    hit = getattr(fn, "_tilefit_walrus", None)
    if hit is None:
        hit = frozenset(n.target.id for n in ast.walk(fn)
                        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name))
        try:
            fn._tilefit_walrus = hit
        except AttributeError:  # pragma: no cover
            pass
    return hit
