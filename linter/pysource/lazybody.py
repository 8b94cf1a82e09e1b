"""Function bodies held as source text until something reads them (issue 18 item 5, memory).

A whole engine's parsed modules are most of the parent's memory (vLLM 0.33.0: 770 of 1008 MB
are ``ast`` objects), yet the call-site evaluation reads only the bodies of launchers, of
callers found by a caller search, of the few helpers a launch's values are computed by, and
of the kernels it analyses and extracts. After :func:`tilefit.pysource.scan.scan_source` has
taken what the scan needs (kernels, launches, bindings, calls by name), :func:`release_bodies`
replaces the body of each module-level function and of each method of a module-level class
that holds no launch and no other kernel (a kernel's own body is one) by a :class:`LazyBody`:
an empty list that parses the function's lines again (from the text the
:class:`~tilefit.pysource.source.SourceFile` already holds) on the first read of any kind.

What stays the same: the ``FunctionDef`` node itself (its identity, name, arguments,
decorators, positions, the attributes the scan set), so bindings, ``functions`` and launch
scopes keep pointing at it. A call record inside a released body holds only its position
(and ``lazy``, the body): reading its ``node`` or ``scope`` fills the body and points the
record at the new nodes. Nested functions get their enclosing function (``_tilefit_outer``)
as the scan set it. A re-parse whose node count differs from the first parse's falls back to
parsing the whole module and taking the function at the same position.

A filled body can be released again (:meth:`LazyBody.release`): between two modules' launches
(:func:`release_recent`, from :func:`tilefit.callsites.sites.build_sites`) and between the
phases of a run (:meth:`tilefit.callsites.project.Project.release_bodies`, which also holds the
launchers' bodies as text once the sites are built: a fill points each ``LaunchCall`` at the
new parse's launch). What the evaluation cached on the function from its statements
(``_tilefit_locals``, ...) goes with them; its memos key functions and nodes by what every
parse shares (:func:`tilefit.callsites.values.fn_key`, ``node_at``), never by ``id``, so a
memo entry still hits after a release and no reused ``id`` can meet one.

``TILEFIT_KEEP_BODIES=1`` keeps every body (for measuring the difference).
"""

from __future__ import annotations

import ast
import os
import re
import weakref

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # the line ends ast counts (not \x0c)
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_MIN_LINES = 4  # a shorter function is not worth the bookkeeping
# what the scan sets on a function (not computed from its body), and a kernel's parameter roles
# (tilefit.callsites.kernelinfo: names only): kept when the body is released
_KEEP_ATTRS = frozenset({"_tilefit_top", "_tilefit_outer", "_tilefit_info"})


def _where(node) -> tuple:
    return (type(node), node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)


def _at(node) -> int:
    """A call's or a function's position as one int (a body's records keep only these; a call
    and a function never share all four numbers)."""
    return (((node.lineno << 32 | node.col_offset) << 32 | node.end_lineno) << 32) | node.end_col_offset


def _count(nodes) -> int:
    return sum(1 for top in nodes for _ in ast.walk(top))


class LazyBody(list):
    """The body of ``fn``: empty until read, then the statements of a parse of its lines;
    :meth:`release` empties it again (the next read parses it again)."""

    __slots__ = ("_fn", "_text", "_records", "_size", "_filled", "__weakref__")

    def __init__(self, fn, text: str, records: list, size: int):
        super().__init__()
        # records, flat: CallRecord, its node's position (_at), its scope's position or None for fn itself, ...
        self._fn, self._text, self._records, self._size, self._filled = fn, text, records, size, False

    def fill(self) -> None:
        """Parse the body again (once) and point the call records inside it at its nodes."""
        if self._filled:
            return
        self._filled = True
        _RECENT[id(self)] = self
        fn = self._fn
        new = _reparse(fn, self._text, self._size)
        list.extend(self, new.body)
        _mark_outer(fn, new.body)
        if self._records:
            found = {}
            for top in new.body:
                for node in ast.walk(top):
                    if isinstance(node, (ast.Call, *_FUNCS)):
                        found[_at(node)] = node
            records = self._records
            for i in range(0, len(records), 3):
                rec, node_at, scope_at = records[i:i + 3]
                node = found.get(node_at)
                scope = fn if scope_at is None else found.get(scope_at)
                if node is None or scope is None:
                    raise RuntimeError(f"{fn.name} at line {fn.lineno}: its body parsed again lacks a call")
                if hasattr(rec, "grid"):  # a LaunchCall: the launch of the new parse
                    rec.node, rec.callee, rec.grid, rec.scope = node, node.func.value, node.func.slice, scope
                else:
                    rec._node, rec._scope, rec.lazy = node, scope, None

    @property
    def filled(self) -> bool:
        return self._filled

    def release(self) -> None:
        """Empty a filled body again: its call records keep only their positions, and what the
        call-site evaluation cached on ``fn`` from its statements (``_tilefit_locals``, ...) is
        dropped, so nothing holds the nodes of this parse. Only between phases: a cache keyed by
        the ``id`` of a node of the body must not outlive it (:meth:`Project.release_bodies`)."""
        if not self._filled:
            return
        list.clear(self)
        for rec in self._records[::3]:
            if not hasattr(rec, "grid"):  # a LaunchCall keeps its nodes (of the launch only) until the next fill
                rec._node = rec._scope = None
                rec.lazy = self
        attrs = self._fn.__dict__
        for name in [a for a in attrs if a.startswith("_tilefit_") and a not in _KEEP_ATTRS]:
            del attrs[name]
        self._filled = False

    # every read fills first; after that it is an ordinary list
    def __iter__(self):
        self.fill()
        return list.__iter__(self)

    def __len__(self):
        self.fill()
        return list.__len__(self)

    def __getitem__(self, i):
        self.fill()
        return list.__getitem__(self, i)

    def __reversed__(self):
        self.fill()
        return list.__reversed__(self)

    def __contains__(self, x):
        self.fill()
        return list.__contains__(self, x)

    def __eq__(self, other):
        self.fill()
        return list.__eq__(self, other)

    def __ne__(self, other):
        self.fill()
        return list.__ne__(self, other)

    def __add__(self, other):
        self.fill()
        return list(self) + other

    def __radd__(self, other):
        self.fill()
        return other + list(self)

    def __repr__(self):
        self.fill()
        return list.__repr__(self)

    def __reduce_ex__(self, protocol):
        self.fill()
        return (list, (list(self),))

    __hash__ = None  # type: ignore[assignment]

    def index(self, *args):
        self.fill()
        return list.index(self, *args)

    def count(self, x):
        self.fill()
        return list.count(self, x)

    def copy(self):
        self.fill()
        return list(self)


# bodies filled since the last release_recent(), by id (a body is a list: unhashable)
_RECENT: "weakref.WeakValueDictionary[int, LazyBody]" = weakref.WeakValueDictionary()


def release_recent() -> int:
    """Release every body filled since the last call (:meth:`LazyBody.release`); how many.
    Between two launches' evaluations (:func:`tilefit.callsites.sites.build_sites`): the memos
    of the evaluation key functions and nodes by what stays the same across parses."""
    bodies = list(_RECENT.values())
    _RECENT.clear()
    for body in bodies:
        body.release()
    return len(bodies)


def _writer(name):
    def method(self, *args, **kwargs):
        self.fill()
        return getattr(list, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


for _name in ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
              "__delitem__", "__iadd__", "__imul__", "__mul__", "__rmul__"):
    setattr(LazyBody, _name, _writer(_name))


def _mark_outer(fn, body) -> None:
    """``_tilefit_outer`` of the nested functions, as the scan's ``_function`` sets it."""
    stack = [(stmt, fn) for stmt in body]
    while stack:
        node, outer = stack.pop()
        if isinstance(node, _FUNCS):
            node._tilefit_outer = outer
            outer = node
        for child in ast.iter_child_nodes(node):
            stack.append((child, outer))


def _reparse(fn, text: str, size: int):
    """A fresh ``FunctionDef`` at ``fn``'s position, from its lines (else from the whole text)."""
    lines = [m.group(0) for m in _LINES.finditer(text)]
    segment = "".join(lines[fn.lineno - 1:fn.end_lineno])
    try:
        if fn.col_offset == 0:
            tree = ast.parse(segment, type_comments=False)
            new = tree.body[0] if tree.body else None
            shift = fn.lineno - 1
        else:  # a method: under an `if` its columns are those of the file
            tree = ast.parse("if 1:\n" + segment, type_comments=False)
            new = tree.body[0].body[0] if tree.body and tree.body[0].body else None
            shift = fn.lineno - 2
    except (SyntaxError, ValueError, RecursionError, AttributeError):
        new = None
    if new is not None:
        ast.increment_lineno(new, shift)
        if not isinstance(new, _FUNCS) or new.name != fn.name or _where(new)[1:] != _where(fn)[1:] \
                or _count(new.body) != size:
            new = None
    if new is None:
        for node in ast.walk(ast.parse(text, type_comments=False)):
            if isinstance(node, _FUNCS) and _where(node) == _where(fn):
                new = node
                break
    return new


def _candidates(tree) -> list:
    """The module-level functions and the methods of module-level classes."""
    out = []
    for stmt in tree.body:
        if isinstance(stmt, _FUNCS):
            out.append(stmt)
        elif isinstance(stmt, ast.ClassDef):
            out.extend(s for s in stmt.body if isinstance(s, _FUNCS))
    return out


def release_bodies(module, launchers: bool = False) -> int:
    """Replace the bodies no launch and no other kernel is in by :class:`LazyBody` (see the
    module text); a kernel's own body is one of them (its analysis and its extraction read it).
    ``launchers``: the bodies with launches too (once the sites are built: a fill points each
    :class:`~tilefit.pysource.scan.LaunchCall` at the new parse's launch). How many."""
    tree = module.source.tree
    text = module.source.text
    if tree is None or not text or os.environ.get("TILEFIT_KEEP_BODIES") == "1":
        return 0
    candidates = _candidates(tree)
    if not candidates:
        return 0
    launches = {id(launch.node): launch for launch in module.launches}
    kernels = [k.node for k in module.all_kernels]
    records = {id(rec._node): rec for recs in module.calls.values() for rec in recs if rec.lazy is None}
    if launchers:
        records.update(launches)
    count = 0
    for fn in candidates:
        first, last = fn.lineno, fn.end_lineno
        if last - first + 1 < _MIN_LINES or isinstance(fn.body, LazyBody) or \
                not launchers and any(first <= launch.node.lineno <= last for launch in launches.values()) or \
                any(k is not fn and first <= k.lineno <= last for k in kernels):
            continue
        size, inside = 0, []
        for top in fn.body:
            for node in ast.walk(top):
                size += 1
                rec = records.get(id(node)) if isinstance(node, ast.Call) else None
                if rec is not None:
                    scope = rec.scope if hasattr(rec, "grid") else rec._scope
                    inside += (rec, _at(node), None if scope is fn else _at(scope))
        body = LazyBody(fn, text, inside, size)
        for rec in inside[::3]:
            if not hasattr(rec, "grid"):
                rec._node = rec._scope = None  # the position is enough until the body is read
                rec.lazy = body
        fn.body = body
        count += 1
    return count


def release_filled(module) -> int:
    """Empty again the bodies of ``module`` that a read filled (:meth:`LazyBody.release`);
    how many."""
    tree = module.source.tree
    if tree is None:
        return 0
    count = 0
    for fn in _candidates(tree):
        body = fn.__dict__.get("body")
        if isinstance(body, LazyBody) and body.filled:
            body.release()
            count += 1
    return count
