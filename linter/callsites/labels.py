"""Branch labels: the text that says which branches a value (or a launch's instance) took.

A label is atoms joined by ``", "``: ``if bias is None``, ``compute capability 86/89 (TILE per
target)``, ``element type of key_cache: fp8e4nv``, ``MoE config E=64 ... taking entry 3``. Which
atoms cannot hold together is decided here, in one place (:func:`consistent`), and a label is
split into atoms once (:func:`atoms`): :class:`Atoms` keeps a combination's atoms parsed as it
grows, so combining the branches of many values (:func:`tilefit.callsites.values.combine`) checks
each new atom against what is already there instead of parsing every label again.
"""

from __future__ import annotations

from functools import lru_cache

MOE_CONFIG_LABEL = "MoE config "  # tilefit.callsites.moeconfigs.LABEL: label atoms that exclude each other
# a branch that holds on some targets only (`is_arch_support_pdl()` True on sm_120, False on sm_86):
# "compute capability 86/89 (...)"; the launch's instance is judged on those targets alone
CAPABILITY_LABEL = "compute capability "
# an arm per element type a scenario gives a tensor (scenarios.PerDtype): "element type of key_cache: fp8e4nv"
DTYPE_LABEL = "element type of "
_ONE_PER_CALL = (" returning at line ", " taking entry ")  # one return / one table entry per call


@lru_cache(maxsize=65536)
def atoms(label: str) -> tuple[str, ...]:
    """The atoms of ``label`` in order (``()`` for the empty label)."""
    return tuple(label.split(", ")) if label else ()


@lru_cache(maxsize=65536)
def _capabilities_of(atom: str) -> frozenset | None:
    if not atom.startswith(CAPABILITY_LABEL):
        return None
    return frozenset(int(x) for x in atom[len(CAPABILITY_LABEL):].split(" ", 1)[0].split("/") if x.isdigit())


@lru_cache(maxsize=65536)
def _parsed(atom: str) -> tuple:
    """``(kind, key, value)`` of an atom that can exclude another: ``("test", text, negated)``,
    ``("moe", atom, None)``, ``("caps", None, capabilities)``, ``("dtype", tensor, type)``,
    ``("call", call + word, line)``; ``()`` for an atom that excludes nothing."""
    out = []
    if atom.startswith("if "):
        out.append(("test", atom[3:], None))
    if atom.startswith(MOE_CONFIG_LABEL):
        out.append(("moe", atom, None))
    caps = _capabilities_of(atom)
    if caps is not None:
        out.append(("caps", None, caps))
    if atom.startswith(DTYPE_LABEL):
        tensor, _, dt = atom[len(DTYPE_LABEL):].partition(": ")
        out.append(("dtype", tensor, dt))
    for word in _ONE_PER_CALL:
        call, sep, line = atom.partition(word)
        if sep:
            out.append(("call", call + word, line))
    return tuple(out)


class Atoms:
    """The atoms of a combination of labels, parsed: :meth:`add` a label, or learn that it cannot
    hold beside them. Immutable (``add`` returns a new one), so partial combinations share it."""

    __slots__ = ("order", "tests", "moe", "caps", "keyed")

    def __init__(self, order: dict | None = None, tests: frozenset = frozenset(), moe: str | None = None,
                 caps: frozenset | None = None, keyed: dict | None = None):
        self.order = order if order is not None else {}  # atom -> None, in order of first use
        self.tests = tests  # texts of the `if ...` atoms
        self.moe = moe  # the one MoE config atom
        self.caps = caps  # the intersection of the per-target atoms' capabilities (None: no such atom)
        self.keyed = keyed if keyed is not None else {}  # (kind, key) -> value: a tensor's type, a call's return

    def add(self, label: str) -> "Atoms | None":
        """These atoms and ``label``'s, or None when they cannot hold together (:func:`consistent`)."""
        new = [a for a in atoms(label) if a not in self.order]
        if not new:
            return self
        tests, moe, caps, keyed = self.tests, self.moe, self.caps, None
        for a in dict.fromkeys(new):
            for kind, key, value in _parsed(a):
                if kind == "test":
                    # `if c` beside `if not c` (and `if not c` beside `if not not c`, as tests pair)
                    if f"not {key}" in tests or key.startswith("not ") and key[4:] in tests:
                        return None
                    tests = tests | {key}
                elif kind == "moe":
                    if moe is not None and moe != key:
                        return None  # one config dict per launch: its keys come from one entry
                    moe = key
                elif kind == "caps":
                    caps = value if caps is None else caps & value
                    if not caps:
                        return None  # two per-target answers that no target gives together
                else:
                    have = (keyed if keyed is not None else self.keyed).get((kind, key))
                    if have is not None and have != value:
                        return None  # one element type per tensor; one return / entry per call
                    if have is None:
                        if keyed is None:
                            keyed = dict(self.keyed)
                        keyed[(kind, key)] = value
        order = dict(self.order)
        order.update(dict.fromkeys(new))
        return Atoms(order, tests, moe, caps, keyed if keyed is not None else self.keyed)

    def text(self) -> str:
        """The combined label: each atom once, in order of first use."""
        return ", ".join(self.order)


EMPTY = Atoms()


def consistent(labels) -> bool:
    """Whether branch labels can hold together: not ``if c`` beside ``if not c``, not two MoE
    config entries, not per-target atoms no target gives together, not two element types of one
    tensor, and not two returns of one call (``bm, bn = config(m)``: both from the same ``return``)."""
    state: Atoms | None = EMPTY
    for lab in labels:
        state = state.add(lab)
        if state is None:
            return False
    return True


def label_dtypes(label: str) -> dict[str, str]:
    """Tensor -> element type of a label's per-dtype atoms (:data:`DTYPE_LABEL`)."""
    out: dict[str, str] = {}
    for a in atoms(label):
        if a.startswith(DTYPE_LABEL):
            tensor, _, dt = a[len(DTYPE_LABEL):].partition(": ")
            out[tensor] = dt
    return out


def label_capabilities(label) -> frozenset | None:
    """The compute capabilities a label's per-target atoms (:data:`CAPABILITY_LABEL`) leave (their
    intersection), None when it has none (every target). ``label``: a label or its atoms."""
    out: frozenset | None = None
    for a in (atoms(label) if isinstance(label, str) else label):
        caps = _capabilities_of(a)
        if caps is not None:
            out = caps if out is None else out & caps
    return out
