"""``tilefit probe``: compile a kernel over a sweep and show its shared memory per target."""

from __future__ import annotations

import json
import sys

import click

from tilefit import kernels

from .common import check_output, check_triton_version, emit, fail


class KernelName(click.Choice):
    """A registered kernel family (tilefit.kernels), looked up when the command line is parsed."""

    def __init__(self) -> None:
        super().__init__((), case_sensitive=True)

    @property
    def choices(self):  # type: ignore[override]
        return tuple(kernels.names())

    @choices.setter
    def choices(self, value) -> None:
        pass


@click.command()
@click.argument("kernel", type=KernelName())
@click.option("--dtype", "dtypes", multiple=True, metavar="PATHS",
              help="Dtype paths (bf16, fp16, fp32, fp8_w8a8, int8_w8a8, int8_w8a16, int4_w4a16); MLA decode: the "
                   "query dtype. Comma-separated or repeated.")
@click.option("--kv-dtype", "kv_dtypes", multiple=True, metavar="DTYPES",
              help="MLA decode: KV-cache dtypes (bf16, fp16, fp8). Comma-separated or repeated.")
@click.option("--quant", type=click.Choice(["none", "per_tensor", "per_channel", "block", "group"]), default=None,
              help="Quantisation of the 8-bit paths. [default: per_tensor, block with --block-shape]")
@click.option("--block-shape", default=None, metavar="N,K",
              help="Block quantisation (block_n,block_k); wNa16: 0,GROUP.")
@click.option("--tile", default=None, metavar="BM,BN,BK[,GROUP]",
              help="GEMM tile BLOCK_SIZE_M,N,K (and GROUP_SIZE_M); MLA decode: BLOCK_N,BLOCK_H.")
@click.option("--warps", default=None, metavar="LIST", help="num_warps values (4 or 4,8 or 2..8). [default: 4]")
@click.option("--stages", default=None, metavar="LIST",
              help="num_stages values. [default: 3 on CUDA, 2 on ROCm]")
@click.option("--sweep", "sweeps", multiple=True, metavar="NAME=VALUES",
              help="Sweep a parameter: num_stages=1..5, num_warps=4,8, BLOCK_SIZE_K=32..256, BLOCK_N=16..64. "
                   "Repeatable (the product is probed).")
@click.option("--arch", "archs", multiple=True, metavar="ARCHS",
              help="Archs to compile for (sm_89,sm_90,gfx942). [default: those of --target, else sm_89]")
@click.option("--target", "-t", "targets", multiple=True, metavar="DEVICE",
              help="Judge against these devices or groups (rtx4090, consumer, datacenter) instead of every "
                   "device of the arch. Repeatable.")
@click.option("--heads", default="576,512", show_default=True, metavar="LK,LV",
              help="MLA decode: head sizes (latent + rope, value).")
@click.option("--swap-ab", is_flag=True, help="fused_moe fp8: the swapped kernel (vLLM on sm_90, BLOCK_SIZE_M < 64).")
@click.option("--estimator", type=click.Choice(["auto", "exact", "analytic"]), default="auto", show_default=True,
              help="exact: compile (needs Triton); analytic: closed forms; auto: exact when Triton is installed.")
@click.option("--triton-version", default=None, metavar="X.Y", help="Analytic model of this Triton version.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None, help="Compiler processes.")
@click.option("--engine-kernels", default=None, metavar="PATH|installed",
              help="Also compile the engine's own kernel (a file, a source tree, or `installed`/`vllm`/`sglang`) "
                   "and show where it differs from ours.")
@click.option("--engine", "engine", type=click.Choice(["vllm", "sglang"]), default=None,
              help="The figures of this engine's own kernel (its calibrated forms; its compile where no form is "
                   "proven and its source is at hand) instead of our reference kernel's.")
@click.option("--launch", is_flag=True, help="Also launch every point on the local GPU and report the outcome.")
@click.option("--device-file", "device_files", multiple=True, type=click.Path(dir_okay=False),
              help="Extra device database file (JSON). Repeatable.")
@click.option("--output-format", type=click.Choice(["text", "json", "html", "svg"]), default="text", show_default=True,
              help="text, json, html (a page: the plot, the points, the text report) or svg (the plot: bytes per "
                   "point and arch, each device's limit drawn).")
@click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the report to a file instead of stdout.")
def probe(kernel, dtypes, kv_dtypes, quant, block_shape, tile, warps, stages, sweeps, archs, targets, heads, swap_ab,
          estimator, triton_version, jobs, engine, engine_kernels, launch, device_files, output_format, output_file):
    """Compile KERNEL over a sweep and show its shared memory per arch, and which devices fit.

    \b
    tilefit probe fused_moe --dtype fp8_w8a8 --tile 128,256,128 --sweep num_stages=1..5 \\
        --arch sm_89,sm_90,sm_120
    tilefit probe mla_decode --kv-dtype bf16,fp8 --sweep num_stages=1..4 --arch sm_121
    """
    from tilefit.device_db import DeviceDBError, UnknownDevice, UnknownTarget, load_database
    from tilefit.smem import probe as P

    try:
        db = load_database(list(device_files))
    except DeviceDBError as exc:
        fail(str(exc))
    local = None
    if launch:
        local = P.local_gpu_arch()
        if local is None:
            fail("--launch needs a local GPU (torch with CUDA or ROCm); none was found. Run without --launch "
                 "for the compile-only figures.")
    check_triton_version(triton_version)
    check_output(output_file)
    try:
        arch_list = P.split_list(archs)
        for a in arch_list:
            try:
                db.arch_device(a)
            except UnknownDevice as exc:
                known = ", ".join(d.arch for d in db.devices if d.kind == "arch")
                raise P.ProbeError(f"--arch {a}: {exc} (known: {known})") from None
        arch_list = [db.arch_device(a).arch for a in arch_list]
        if not arch_list and targets:
            seen = []
            for t in targets:
                for d in db.resolve_target(t):
                    if d.arch not in seen and d.smem_per_block_optin:
                        seen.append(d.arch)
            arch_list = seen
        if not arch_list:
            arch_list = [local] if local else ["sm_89"]
        bs = None
        if block_shape:
            parts = P.parse_values(block_shape) if ".." in block_shape else [int(x) for x in block_shape.split(",")]
            if len(parts) != 2:
                raise P.ProbeError("--block-shape takes N,K")
            bs = (parts[0], parts[1])
        hk = [int(x) for x in heads.split(",")]
        if len(hk) != 2:
            raise P.ProbeError("--heads takes LK,LV")
        req = P.ProbeRequest(
            kernel=kernel, dtypes=P.split_list(dtypes), kv_dtypes=P.split_list(kv_dtypes), quant=quant,
            block_shape=bs, tile=P.parse_tile(kernel, tile) if tile else [],
            warps=P.parse_values(warps) if warps else [], stages=P.parse_values(stages) if stages else [],
            sweeps=P.parse_sweep(sweeps, kernel), archs=arch_list, swap_ab=swap_ab, heads=(hk[0], hk[1]))
        P.validate_request(req)
        points = P.build_points(req)
        if engine:
            points = [P.ProbePoint(p.spec.with_(engine=engine), p.arch, p.labels) for p in points]
        devices = P.arch_devices(db, arch_list, list(targets))
    except (P.ProbeError, ValueError, UnknownTarget) as exc:
        fail(str(exc))
        return
    from tilefit import versions
    from tilefit.smem.analytic import pick_version
    from tilefit.smem.exact import TritonUnavailable, UnsupportedArch

    if estimator == "exact" and versions.installed_triton() is None:
        fail("--estimator exact needs Triton (pip install 'tilefit[triton]')")
    from tilefit.progress import for_terminal

    bar = for_terminal(sys.stderr)  # on a terminal only: a sweep compiles for seconds to minutes
    try:
        if engine:
            mode = _estimate_engine_points(points, estimator, triton_version)
        else:
            mode = P.estimate_points(points, estimator, jobs=jobs, triton_version=triton_version, progress=bar)
    except (TritonUnavailable, UnsupportedArch, ValueError) as exc:
        fail(str(exc))
        return
    finally:
        if bar is not None:
            bar.close()
    if mode == "analytic" and estimator == "auto" and versions.installed_triton() is None:
        click.echo("note: Triton is not installed; figures come from the analytic model, not from compiles",
                   err=True)
    engine_desc = None
    if engine_kernels:
        if versions.installed_triton() is None:
            fail("--engine-kernels compiles the engine's kernel and needs Triton")
        from tilefit.smem.engine_kernels import EngineKernelError

        try:
            engine_desc = P.compare_engine(points, engine_kernels)
        except EngineKernelError as exc:
            fail(str(exc))
    if launch:
        for p in points:
            if p.arch == local:
                p.launch = P.launch_point(p.spec)
            else:
                p.launch = {"outcome": "not launched", "detail": f"the local GPU is {local}"}
    # the Triton the figures are for: the installed one's compiles, or the analytic model's version
    triton = versions.installed_triton() if mode == "exact" else pick_version(triton_version or versions.installed_triton())
    all_devices = [d for devs in devices.values() for d in devs]
    if output_format == "json":
        doc = {"kernel": kernel, "estimator": mode, "triton_version": triton,
               "devices": {a: [{"key": d.key, "name": d.name, "limit": d.smem_per_block_optin} for d in devs]
                           for a, devs in devices.items()},
               "engine_kernels": engine_desc, "local_gpu": local,
               "points": [p.to_json(all_devices) for p in points]}
        text = json.dumps(doc, indent=1) + "\n"
    else:
        text = P.render_text(points, devices, req, mode, triton, engine_desc, local if launch else None)
        if output_format in ("html", "svg"):
            text = _sweep_page(points, devices, mode, triton, text, output_format)
    emit(text, output_file)
    failed = [p for p in points if p.error]
    if failed:
        # the whole reason of each distinct failure (the table shows its first line)
        for reason in dict.fromkeys(p.full_error or p.error for p in failed):
            click.echo(f"error: a point did not compile: {reason}", err=True)
        sys.exit(1)
    sys.exit(0)


def _sweep_page(points, devices, mode: str, triton: str | None, text: str, fmt: str) -> str:
    """The probe's HTML page or SVG plot; titled with the text report's heading lines."""
    from tilefit import __version__
    from tilefit.audit.sweep import build_sweep
    from tilefit.reporters.html import render_sweep_page, sweep_svg

    from .check import command_line

    head = text.splitlines()
    model = build_sweep(points, devices, title=head[0] if head else "tilefit probe",
                        subtitle=head[1] if len(head) > 1 else "", estimator=mode, triton=triton, text=text,
                        command=command_line(), tool=f"tilefit {__version__}")
    return sweep_svg(model) if fmt == "svg" else render_sweep_page(model)


def _estimate_engine_points(points: Sequence[ProbePoint], mode: str, triton_version: str | None) -> str:
    """``--engine``: the engine's kernel's figures -- its calibrated forms (proven ones final), its
    compile where no proven form exists and its source is at hand (auto, exact)."""
    from tilefit.estimate import Estimator, EstimatorUnavailable

    est = Estimator(mode, triton_version=triton_version)
    used = set()
    for p in points:
        failure = est.compile_failure(p.spec, p.arch)
        if failure:
            p.error = f"does not compile: {failure}"
            p.source = "engine calibration"
            continue
        try:
            e = est.estimate(p.spec, p.arch)
        except EstimatorUnavailable as exc:
            p.error = str(exc)
            continue
        p.shared = e.shared_bytes
        how = e.estimator if e.status == e.estimator else f"{e.estimator} ({e.status})"  # not "exact (exact)"
        p.source = f"{how}: {e.detail}" if e.detail else how
        used.add(e.estimator)
    return "engine"
