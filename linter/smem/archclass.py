"""Archs that compile alike: one compile answers every arch of a class (issue 18 item 5).

A call-site compile stops at the shared-memory allocation (:mod:`tilefit.smem.exact`). Up to
there the NVIDIA pipeline reads the target's compute capability (cc) in a known list of places:
the backend's Python (``parse_options``, ``make_ttir``, ``make_ttgir``, the ptxas choice) and its
C++ passes (through the module's ``ttg.target`` and the allocation pass's ``TargetInfo``).
``linter/data/arch_classes.json`` lists those reads per Triton release, each as a predicate on
cc, with where it is read, and the classes: archs every read answers alike. Two archs of a class
therefore get the same IR at every pass, the same ``ttg.shared`` and the same failures.

A class whose archs differ only in reads marked ``fp8`` (sm_86/sm_87 lack fp8e4nv and promote fp8
dot operands to fp16; sm_89 has both) holds only for compiles without an fp8 type
(``when: "no_fp8"``): :func:`fp8_free` says whether a compile's launch key and kernel source name
none. ``TILEFIT_ARCH_CLASSES=0`` compiles every arch (for A/B runs). The classes are checked against the reads when the file is loaded (a class a read
splits is an error), and apply only to the Triton releases they were derived for.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "data" / "arch_classes.json"
_READ = {"type": "object", "required": ["cc", "where", "what"], "additionalProperties": False,
         "properties": {"cc": {"type": "string"}, "where": {"type": "string", "minLength": 1},
                        "what": {"type": "string"}, "fp8": {"type": "boolean"},
                        "frontend": {"type": "boolean"}}}
_CLASS = {"type": "object", "required": ["archs", "when"], "additionalProperties": False,
          "properties": {"archs": {"type": "array", "minItems": 2, "items": {"type": "string", "pattern": "^sm_[0-9]+$"}},
                         "when": {"enum": ["always", "no_fp8"]}}}
_SCHEMA = {
    "type": "object", "required": ["version", "releases"], "additionalProperties": False,
    "properties": {
        "$comment": {"type": "string"}, "version": {"const": 1},
        "releases": {"type": "array", "items": {
            "type": "object", "required": ["triton", "sources", "reads", "classes"], "additionalProperties": False,
            "properties": {"triton": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                           "sources": {"type": "object", "additionalProperties": {"type": "string"}},
                           "reads": {"type": "array", "minItems": 1, "items": _READ},
                           "unread": {"type": "array", "items": {"type": "string"}},
                           "classes": {"type": "array", "items": _CLASS}}}}}}
_SCHEMA_TEXT = json.dumps(_SCHEMA).encode()

_PREDICATE = re.compile(r"^cc( // 10)? (>=|<=|==|!=|<|>|in) (\d+|\(\d+(?:, \d+)*\))$")
_OPS = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b, ">": lambda a, b: a > b, "in": lambda a, b: a in b}
# words of a launch key or kernel text that can bring an fp8 type into a compile
_FP8_WORDS = ("fp8", "float8", "e4m3", "e5m2")
# a Gluon kernel's builder reads options.arch itself (code_generator.py): no class covers it
_GLUON_WORDS = ("gluon",)
# triton.language.extra.hip's helpers read options.arch in the code generator (frontend_class)
_HIP_WORDS = ("hip",)
# the stages of a failure that frontend_class archs share (exact.py: parse_options, make_ir)
FRONTEND_STAGES = ("options", "ast")


def predicate(text: str):
    """``"cc // 10 in (8, 9)"`` -> a function of the compute capability (raises ValueError)."""
    m = _PREDICATE.match(text)
    if not m:
        raise ValueError(f"not a compute-capability predicate: {text!r}")
    major, op, rhs = m.group(1), m.group(2), m.group(3)
    value = tuple(int(x) for x in rhs.strip("()").split(", ")) if rhs.startswith("(") else int(rhs)
    if (op == "in") != isinstance(value, tuple):
        raise ValueError(f"not a compute-capability predicate: {text!r}")
    fn = _OPS[op]
    return (lambda cc: fn(cc // 10, value)) if major else (lambda cc: fn(cc, value))


def capability(arch: str) -> int:
    return int(arch[3:])


def check_classes(release: dict) -> None:
    """Raise ValueError where a read answers two archs of a class differently (a read marked
    ``fp8`` may split a ``no_fp8`` class), or an arch is in two classes."""
    reads = [(r, predicate(r["cc"])) for r in release["reads"]]
    seen: set = set()
    for cls in release["classes"]:
        archs = cls["archs"]
        if seen & set(archs):
            raise ValueError(f"arch in two classes: {sorted(seen & set(archs))}")
        seen |= set(archs)
        for read, fn in reads:
            if read.get("fp8") and cls["when"] == "no_fp8":
                continue
            answers = {a: fn(capability(a)) for a in archs}
            if len(set(answers.values())) > 1:
                raise ValueError(f"class {archs} is split by {read['cc']!r} ({read['where']}): {answers}")


@lru_cache(maxsize=None)
def _releases() -> tuple:
    from tilefit.device_db.validation import first_error

    data = json.loads(DATA.read_text(encoding="utf-8"))
    error = first_error(_SCHEMA_TEXT, data)
    if error is not None:
        raise ValueError(f"{DATA}: {error[0]}: {error[1]}")
    for release in data["releases"]:
        try:
            check_classes(release)
        except ValueError as exc:
            raise ValueError(f"{DATA}: Triton {release['triton']}: {exc}") from None
    return tuple(data["releases"])


@lru_cache(maxsize=None)
def classes(triton: str | None) -> dict:
    """arch -> (representative arch, when) for the Triton release ``triton``; empty for a release
    the classes were not derived for."""
    out: dict = {}
    for release in _releases():
        if triton in release["triton"]:
            for cls in release["classes"]:
                for arch in cls["archs"]:
                    out[arch] = (cls["archs"][0], cls["when"])
    return out


@lru_cache(maxsize=1024)
def _text_names(source: str) -> tuple[bool, bool, bool]:
    """(names an fp8 type, is a Gluon kernel, names hip) of a kernel's text: read once per text
    (a run asks for every (case, variant, arch) of a kernel, tens of thousands of times)."""
    text = source.lower()
    return (any(w in text for w in _FP8_WORDS), any(w in text for w in _GLUON_WORDS),
            any(w in text for w in _HIP_WORDS))


def fp8_free(key: str, source: str | None) -> bool:
    """No fp8 type can enter a compile whose launch key and kernel text name none (a pointer's
    element type, a dtype constexpr, a ``tl.float8e5`` cast in the kernel or a helper)."""
    if source is None or _text_names(source)[0]:
        return False
    key = key.lower()
    return not any(w in key for w in _FP8_WORDS)


def frontend_class(arch: str, triton: str | None, source: str | None) -> tuple | None:
    """Equal for archs whose compiles of the kernel text ``source`` are alike up to the end of
    the AST code generator, else None (not known: a release without reads, an imported module,
    ``TILEFIT_ARCH_CLASSES=0``): the answers of the reads marked ``frontend`` (``parse_options``,
    ``get_codegen_implementation``). The code generator and ``triton.language`` read no compute
    capability of the compile target besides those options, only ``options.arch`` itself in a
    Gluon kernel and in ``triton.language.extra.hip``'s helpers (kernels whose text names either
    get None) and in a warning's text. So a compile that fails there (``error_stage`` in
    :data:`FRONTEND_STAGES`) fails alike, with the same message, on every arch of the key: one
    such failure answers the others (:func:`tilefit.callsites.prefetch.prefetch`; 302 of
    sglang 0.5.23's sm_110 compiles fail as their sm_120 twin, 118 sm_87 ones as sm_86)."""
    if os.environ.get("TILEFIT_ARCH_CLASSES", "1") == "0" or source is None or not arch.startswith("sm_"):
        return None
    names = _text_names(source)
    if names[1] or names[2]:
        return None
    reads = _frontend_reads(triton)
    if not reads:
        return None
    try:
        cc = capability(arch)
    except ValueError:
        return None
    return tuple(fn(cc) for fn in reads)


@lru_cache(maxsize=None)
def _frontend_reads(triton: str | None) -> tuple:
    for release in _releases():
        if triton in release["triton"]:
            return tuple(predicate(r["cc"]) for r in release["reads"] if r.get("frontend"))
    return ()


def compile_arch(arch: str, triton: str | None, key: str, source: str | None) -> str:
    """The arch whose compile answers ``arch`` for a compile with launch key ``key`` of the
    kernel text ``source`` (None: not known, e.g. an imported module): the first arch of its
    class, else ``arch`` itself."""
    if os.environ.get("TILEFIT_ARCH_CLASSES", "1") == "0":  # every arch compiled (A/B runs)
        return arch
    found = classes(triton).get(arch)
    if found is None or source is None or _text_names(source)[1]:
        return arch
    first, when = found
    if when == "no_fp8" and not fp8_free(key, source):
        return arch
    return first
