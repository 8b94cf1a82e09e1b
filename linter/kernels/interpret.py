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
fp32 first (:func:`patch_bf16_dot`). Casts from integers to bf16 are wrong too (the raw integer
lands in the bf16 bits), so the bf16 int8_w8a16 path is checked on GPUs only. Triton <= 3.8's
interpreter also needs :func:`patch_scalar_index` with numpy >= 2.3. Nothing else is changed.

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


def patch_scalar_index() -> None:
    """Triton <= 3.8's interpreter turns a 1-element array into an int with ``int(array)``, which
    numpy >= 2.3 rejects for 1-d arrays (``range(tl.cdiv(K, BK))`` fails); 3.9 squeezes first."""
    import numpy as np
    from triton.runtime import interpreter

    original = getattr(interpreter, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_tilefit_index", False):
        return

    def index(self):
        return int(np.asarray(self.handle.data).reshape(-1)[0])

    def patched(tensor, *args, **kwargs):
        result = original(tensor, *args, **kwargs)
        scope = args[0] if args else kwargs.get("scope")
        if scope is not None and hasattr(scope, "set_attr"):
            scope.set_attr(tensor, "__index__", index)
        else:  # Triton 3.5: patched in place, restored by nobody
            tensor.__index__ = index
        return result

    patched._tilefit_index = True
    interpreter._patch_lang_tensor = patched


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
    patch_scalar_index()
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
