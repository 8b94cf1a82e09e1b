"""Run kernel checks on the CPU under Triton's interpreter, in a child process.

``TRITON_INTERPRET=1`` must be set before triton is imported (Triton's own ``@jit`` helpers,
``tl.zeros`` and friends, are built at import), so interpreted runs cannot share a process with
compiles. :func:`run_interpreted` starts ``python -m tilefit.kernels.interpret`` with the
variable set, feeds it a JSON list of cases (:mod:`tilefit.kernels.checks`) and returns the
results.

What the interpreter supports (Triton 3.6-3.9): fp16/fp32/int8 loads, stores and ``tl.dot``;
fp8 e4m3/e5m2 (emulated: ``tl.dot`` upcasts 8-bit floats to fp16); bf16 loads, stores and
conversions -- but *not* ``tl.dot`` on bf16 operands, which it multiplies as raw uint16 bits.
The child process therefore patches the interpreter's ``create_dot`` to widen bf16 operands to
fp32 first (:func:`patch_bf16_dot`); nothing else is changed.

This module imports neither triton nor torch unless run as the child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Sequence


def patch_bf16_dot() -> None:
    """Make the interpreter's ``tl.dot`` read bf16 operands as numbers, not raw bits."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "_tilefit_bf16", False):
        return
    original = builder.create_dot

    def widen(handle):
        if handle.dtype == tl.bfloat16:
            data = (handle.data.astype(np.uint32) << 16).view(np.float32)
            return interpreter.TensorHandle(data, tl.float32)
        return handle

    def create_dot(self, a, b, d, *args, **kwargs):
        return original(self, widen(a), widen(b), d, *args, **kwargs)

    create_dot._tilefit_bf16 = True
    builder.create_dot = create_dot


def run_interpreted(cases: Sequence[dict], timeout: float = 600.0) -> list[dict]:
    """Run ``cases`` in a child interpreter process; one result dict per case."""
    env = dict(os.environ)
    env["TRITON_INTERPRET"] = "1"
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    proc = subprocess.run(
        [sys.executable, "-m", "tilefit.kernels.interpret"],
        input=json.dumps(list(cases)), capture_output=True, text=True, env=env, timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"interpreter child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{") or line.startswith("[")]
    return json.loads(lines[-1])


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") != "1":
        print("set TRITON_INTERPRET=1 (run_interpreted does)", file=sys.stderr)
        return 2
    import warnings

    warnings.filterwarnings("ignore")
    patch_bf16_dot()
    from .checks import run_case

    cases = json.loads(sys.stdin.read())
    results = []
    for case in cases:
        import time

        t0 = time.perf_counter()
        res = run_case(case, "cpu")
        res["seconds"] = round(time.perf_counter() - t0, 3)
        results.append(res)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
