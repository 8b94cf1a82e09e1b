"""What of a launch argument a compile sees: Triton's launch specialisation, as a key.

A compile of a kernel for an arch depends on its constexprs, its options and, for each other
argument, only what Triton's launch specialiser (``native_specialize_impl``, the function
``JITFunction.run`` calls; :func:`tilefit.smem.exact.specialise` feeds it our values) makes of
it. For Triton 3.9 (checked against the specialiser itself in ``tests/test_speckey.py``):

* an int becomes ``i32`` (``-2**31 <= v < 2**31``), ``i64`` (``-2**63 <= v < 2**63``) or
  ``u64``, with the attribute ``D`` when it is divisible by 16; the int 1 becomes the constant 1;
* a float becomes ``fp32`` whatever its value; a bool ``u1``.

So two launches of one kernel that pass ``M=4096`` and ``M=8192`` (both ``i32``, divisible by
16) compile to the same module with the same shared memory. :func:`arg_key` is the part of an
argument that can change the compile: the compile cache and the compile jobs of a run
(:attr:`tilefit.callsites.evaluate.CompileJob.key`) are keyed by it, so such launches compile once.
``do_not_specialize`` and annotations only take information away, so launches equal under this
key are equal for those parameters too. Pointers, constexprs, dtypes, ``None`` and descriptors
keep their values.
"""

from __future__ import annotations

from typing import Any

_I32 = 1 << 31
_I64 = 1 << 63


def int_class(value: int) -> str:
    """``"1"`` for the int 1, else ``"<i32|i64|u64>:<D|->"`` (type, divisible by 16)."""
    if value == 1:
        return "1"
    if -_I32 <= value < _I32:
        ty = "i32"
    elif -_I64 <= value < _I64:
        ty = "i64"
    else:
        ty = "u64"
    return f"{ty}:{'D' if value % 16 == 0 else '-'}"


def arg_key(kind: str, value: Any) -> Any:
    """The value of an argument of ``kind`` as far as the compile sees it."""
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return int_class(value)
    if kind == "float":
        return "fp32"
    return value
