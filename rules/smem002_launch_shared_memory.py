"""SMEM002: a kernel launch in Python source needs more shared memory than a target allows."""

from __future__ import annotations

from tilefit.model import Severity

from .base import CallsiteContext, Example, Finding, FixAvailability, Planner, Rule, Scope, format_targets

# A small GEMM kernel for the examples of the call-site rules.
GEMM_KERNEL = '''import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
'''

_LAUNCH = GEMM_KERNEL + '''

def matmul(a, b, c):
    grid = (triton.cdiv(a.shape[0], 128), triton.cdiv(b.shape[1], 256))
    matmul_kernel[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], a.stride(0), a.stride(1),
                        b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages={stages})
'''


def _variant_text(label: str) -> str:
    return f" with {label}" if label else ""


class SMEM002(Rule):
    """Kernel launch needs more shared memory per block than the target allows.

    ## What it does
    Finds Triton launches in Python files (``kernel[grid](..., BLOCK_N=32, num_stages=2)``),
    resolves the kernel across the scanned modules, follows the constants of the launch
    (literals, module-level names, default arguments of the enclosing function, each arm of
    ``x if cond else y``), and compiles the kernel -- taken out of its file without importing
    it -- for each target's architecture and each dtype variant (from
    ``[tool.tilefit.kernels."module:function"]``, else bf16/fp16/fp8 over the data pointers).
    Reports launches whose ``metadata.shared`` exceeds the target's per-block limit, with the
    figures of the runtime error, per variant.

    ## Why is this bad?
    Half of the real ``OutOfResources`` crashes come from no config file at all but from
    constants written at the launch: MLA decode's ``num_stages=2`` needs 1 KB more than an
    RTX 4090, RTX 5090 or GB10 has with an fp8 KV cache, while bf16 fits. The launch fails the
    first time that path runs, often after the server is up.

    ## Example
    ```python
    matmul_kernel[grid](..., BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4)
    ```
    needs 147456 bytes on sm_89 (limit 101376). The unsafe fix sets ``num_stages`` (or, where
    stages do not help, a ``BLOCK_*`` literal) to the largest value that fits every target and
    variant; when only some variants overflow, the message suggests a device-aware guard
    instead, e.g. ``num_stages=1`` when the KV cache is fp8 and the device has less than the
    required bytes per block. ``# noqa: SMEM002`` on the launch line silences it.
    """

    code = "SMEM002"
    name = "launch-shared-memory"
    severity = Severity.ERROR
    scope = Scope.CALLSITE
    families = None
    fix_availability = FixAvailability.SOMETIMES
    fix_planner = Planner.CALLSITE
    examples = (
        Example("matmul_launch.py", _LAUNCH.replace("{stages}", "4"), True, targets=("rtx4090",),
                fixed=_LAUNCH.replace("{stages}", "3"), unsafe=True),
        Example("matmul_launch.py", _LAUNCH.replace("{stages}", "2"), False, targets=("rtx4090",)),
        Example("matmul_launch.py", _LAUNCH.replace("{stages}", "4"), False, targets=("h100-sxm",),
                note="an H100 has 227 KB per block"),
    )

    def check(self, ctx: CallsiteContext):
        from tilefit.callsites.checks import join_labels
        from tilefit.device_db.names import arch_order

        site = ctx.site
        if site.kind != "launch" or site.kernel.autotune is not None:
            return
        checks = ctx.checks
        verdicts = checks.launch(site)
        cases = []
        for v in verdicts:
            if v.case not in cases:
                cases.append(v.case)
        for case in cases:
            mine = [v for v in verdicts if v.case is case]
            over = [v for v in mine if v.over]
            if not over:
                continue
            # one finding per (required, limit, devices): variants with equal figures merge
            groups: dict[tuple, list] = {}
            for v in over:
                groups.setdefault((v.outcome.shared, v.limit, v.variant.label), []).append(v)
            merged: dict[tuple, list] = {}
            for (required, limit, _), vs in groups.items():
                devices = tuple(d.key for v in vs for d in v.dclass.devices)
                merged.setdefault((required, limit, devices), []).extend(vs)
            suggestion = checks.suggest(case, verdicts)
            first = True
            for (required, limit, _), vs in sorted(merged.items(), key=lambda kv: (-kv[0][0], kv[0][2])):
                devices = list(dict.fromkeys(d for v in vs for d in v.dclass.devices))
                archs = sorted({v.device.arch for v in vs}, key=arch_order)
                label = join_labels([v.variant.label for v in vs])
                branch = f" [{case.label}]" if case.label else ""
                stages = vs[0].outcome.num_stages
                msg = (f"OutOfResources on {format_targets(devices)}{_variant_text(label)}: shared memory, "
                       f"Required: {required}, Hardware limit: {limit} ({site.where}, num_warps="
                       f"{vs[0].outcome.num_warps}, num_stages={stages}, {'/'.join(archs)}){branch}")
                bound = list(dict.fromkeys(b for v in vs for b in v.outcome.bound))
                if bound:  # the values a [tool.tilefit.kernels] table gave (over the launch's)
                    msg += "; with " + ", ".join(bound)
                fix = None
                if first and suggestion is not None:
                    msg += "; " + _advice(suggestion, case, over, site.path)
                    fix = _fix(suggestion, site.path)
                yield Finding(
                    msg,
                    fix=fix,
                    data={"required_bytes": required, "limit_bytes": limit, "variant": label or None,
                          "targets": [d.key for d in devices], "archs": archs, "kernel": site.kernel.key,
                          "estimator": vs[0].outcome.estimator, "branch": case.label or None,
                          "num_stages": stages, "num_warps": vs[0].outcome.num_warps, "bound": bound},
                    identity=f"{site.identity}|{case.label}|{label}",
                )
                first = False


def _advice(s, case, over, path: str) -> str:
    from tilefit.callsites.checks import join_labels, literal_edit, where_literal

    if s.scope == "failing":
        labels = join_labels(sorted({v.variant.label for v in over if v.variant.label}))
        need = sorted({v.outcome.shared for v in over})
        when = f" when {labels}" if labels else ""
        after = f" (then {max(s.required.values())} bytes)" if s.required else ""
        return (f"use {s.name}={s.new}{when}{after} and the device has < {need[-1]} bytes of shared memory per block "
                f"(a device-aware guard; other variants fit)")
    where = where_literal(s.literal)
    if literal_edit(s.literal, path, s.new) is None:
        return f"set {s.name}={s.new} to fit every target and variant{where}"
    return f"{s.name}={s.new} fits every target and variant{where}"


def _fix(s, path: str):
    from tilefit.callsites.checks import literal_edit, make_fix

    if s.scope != "all":
        return None
    return make_fix(f"Set {s.name}={s.new} (was {s.old}): fits every target and dtype variant",
                    literal_edit(s.literal, path, s.new))
