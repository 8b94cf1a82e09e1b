"""Validate on a GPU: the exact estimator against Triton's own JIT on the device, and numerics.

``python -m tilefit.smem.validate [--json FILE] [--quick]`` on a machine with a CUDA GPU:

1. for a list of specs, compiles each reference kernel two ways and compares the shared-memory
   figures: ahead of time with :mod:`tilefit.smem.exact` for the device's arch, and through
   ``JITFunction.warmup`` with real device tensors built from the same launch plan (Triton's own
   launch specialisation and compile for the current device). It then loads the warmed-up kernel
   (``_init_handles``) to see whether the device accepts it: ``OutOfResources`` must happen
   exactly when the estimate exceeds the device's opt-in limit;
2. runs the numerical checks (:mod:`tilefit.kernels.checks`) compiled on the GPU.

Prints one JSON document (also written to ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from ..kernels import launch_plan, registry
from ..kernels.plan import Arg
from ..kernels.spec import KernelSpec


def validation_specs() -> list[KernelSpec]:
    """Every kernel family's validation specs (:meth:`tilefit.kernels.KernelFamily.validation_specs`)."""
    return [spec for family in registry.families() for spec in family.validation_specs()]


def _torch_dtype(name: str):
    import torch

    from ..dtypes import TORCH_NAMES

    return getattr(torch, TORCH_NAMES[name])


def _device_value(arg: Arg, device):
    import torch
    import triton.language as tl

    if arg.kind == "ptr":
        return torch.zeros(64, dtype=_torch_dtype(str(arg.value)), device=device)
    if arg.kind == "dtype":
        return {"fp16": tl.float16, "bf16": tl.bfloat16, "fp32": tl.float32}[str(arg.value)]
    if arg.kind == "none":
        return None
    return arg.value


def jit_shared(spec: KernelSpec, device="cuda") -> dict:
    """Compile ``spec``'s kernel through Triton's JIT (``warmup``) on the current device."""
    from ..smem.exact import load_kernel

    plan = launch_plan(spec)
    fn = load_kernel(plan.module, plan.function)
    kwargs = {a.name: _device_value(a, device) for a in plan.args}
    kwargs.update(num_warps=plan.num_warps, num_stages=plan.num_stages, **dict(plan.options))
    out: dict = {}
    t0 = time.perf_counter()
    try:
        compiled = fn.warmup(grid=(1,), **kwargs)
    except Exception as exc:  # noqa: BLE001
        out["jit_error"] = f"{type(exc).__name__}: {exc}"[-600:]
        return out
    out["jit_seconds"] = round(time.perf_counter() - t0, 3)
    out["jit_shared"] = int(compiled.metadata.shared)
    try:
        compiled._init_handles()
        out["loads"] = True
        out["n_regs"] = getattr(compiled, "n_regs", None)
        out["n_spills"] = getattr(compiled, "n_spills", None)
    except Exception as exc:  # noqa: BLE001 - OutOfResources and friends
        out["loads"] = False
        out["load_error"] = f"{type(exc).__name__}: {exc}"[-300:]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--quick", action="store_true", help="skip the numerical checks")
    args = ap.parse_args(argv)

    import torch
    import triton

    from ..kernels.checks import run_case
    from .exact import compile_spec

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    major, minor = torch.cuda.get_device_capability()
    arch = f"sm_{major}{minor}"
    props = torch.cuda.get_device_properties(0)
    limit = triton.runtime.driver.active.utils.get_device_properties(0).get("max_shared_mem")
    report: dict = {"triton": triton.__version__, "torch": torch.__version__, "device": props.name, "arch": arch,
                    "max_shared_mem": limit, "points": [], "checks": []}
    for spec in validation_specs():
        row: dict = {"key": spec.key()}
        for stop in ("alloc", "llir", "full"):
            r = compile_spec(spec, arch, stop=stop, raise_on_error=False)
            row[f"aot_{stop}"] = r.shared_bytes if r.ok else None
            row[f"aot_{stop}_seconds"] = round(r.seconds, 3)
            if not r.ok:
                row["aot_error"] = r.error[-300:]
        row.update(jit_shared(spec))
        row["match"] = row.get("aot_alloc") == row.get("jit_shared")
        if row.get("aot_alloc") is not None and limit:
            row["oor_predicted"] = row["aot_alloc"] > limit
            row["oor_consistent"] = row["oor_predicted"] == (not row.get("loads", True))
        report["points"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    if not args.quick:
        from ..kernels.checks import gpu_cases

        for case in gpu_cases():
            t0 = time.perf_counter()
            res = run_case(case, "cuda")
            res.pop("trace", None) if res.get("ok") else None
            res["case"] = case
            res["seconds"] = round(time.perf_counter() - t0, 3)
            report["checks"].append(res)
            print(json.dumps(res)[:400], file=sys.stderr, flush=True)
    report["summary"] = {
        "points": len(report["points"]),
        "aot_equals_jit": sum(1 for r in report["points"] if r.get("match")),
        "oor_consistent": sum(1 for r in report["points"] if r.get("oor_consistent")),
        "checks_ok": sum(1 for c in report["checks"] if c.get("ok")),
        "checks": len(report["checks"]),
    }
    text = json.dumps(report, indent=1)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text)
    print(json.dumps(report["summary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
