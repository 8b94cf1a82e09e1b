"""Compile ahead the probe sets of other Triton releases into the engine-kernel cache.

``tilefit calibrate smem --engine W --probe-from 3.9 --triton-python PY`` compiles a probe set
(:func:`tilefit.smem.engine_calibrate.probe_set`, deterministic) with the Triton of ``PY`` and
compares it with the 3.9 calibration. On a 2-core machine shared by several sessions the compiles
of all releases, engines and kernel families are best made as one long, interruptible job, in
passes of growing size (each pass's set holds the previous one's), so a cut-short run still
leaves whole passes in the cache; the calibration runs afterwards answer from the cache.

    nice -n 15 python bench/release_probe.py --cache-dir DIR -j 2 \\
        --release 3.8=/work/venvs/t380/bin/python ... [--job 3.8:vllm:fused_moe ...] \
        --pass 0.25:0 --pass 0.5:0.05 [--arch gfx942 --arch sm_110 ...]

``--arch`` (default: the NVIDIA archs the first probe records cover) picks the base release's
points the probe sets are drawn from; ``calibrate smem --probe-from 3.9 --extend --arch A`` then
merges those archs' records into the release's stored one.

Each line of the log: release, engine, kernel, pass, points, compiled, failed, seconds.
"""

from __future__ import annotations

import argparse
import sys
import time

ENGINES = {
    "vllm": "/work/engines/wheels/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    "sglang": "/work/engines/wheels/sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
}
VERSIONS = {"vllm": "0.33.0", "sglang": "0.5.23"}
KERNELS = ("fused_moe", "block_gemm", "fused_moe_wna16", "mla_decode", "scaled_mm")
NVIDIA_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "sm_121")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", action="append", required=True, metavar="X.Y=PYTHON")
    ap.add_argument("--pass", dest="passes", action="append", required=True, metavar="SCALE:RISK")
    ap.add_argument("--job", action="append", default=None, metavar="X.Y:ENGINE:KERNEL",
                    help="the (release, engine, kernel) probes to compile, in this order [default: all]")
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--arch", dest="archs", action="append", default=None,
                    help=f"the archs to probe [default: {' '.join(NVIDIA_ARCHS)}]")
    args = ap.parse_args(argv)

    from tilefit.smem import engine_calibrate as ec
    from tilefit.smem import interpreter
    from tilefit.smem.engine_kernels import EngineKernels

    pythons = dict(rel.split("=", 1) for rel in args.release)
    jobs = [tuple(j.split(":")) for j in args.job] if args.job else [
        (name, engine, kernel) for name in pythons for engine in ENGINES for kernel in KERNELS]
    kernels: dict[tuple[str, str], EngineKernels] = {}  # per release: its memo holds that release's bytes
    for spec in args.passes:
        scale, risk = (float(x) for x in spec.split(":"))
        for name, engine, kernel in jobs:
            interpreter.use(pythons[name])
            have = interpreter.compile_triton_version()
            ek = kernels.get((name, engine))
            if ek is None:
                ek = kernels[(name, engine)] = EngineKernels(ENGINES[engine], cache_dir=args.cache_dir, engine=engine)
            pp = ec.points_path(kernel, engine, VERSIONS[engine], "3.9")
            if not pp.is_file():
                continue
            base = [d for d in ec.load_points(pp) if d.point.arch in (args.archs or NVIDIA_ARCHS)]
            if not base:
                continue
            probe, risky = ec.probe_set(base, scale, risk)
            t0 = time.perf_counter()
            before = ek.stats["compiles"]
            done = ec.compile_points(ek, probe + risky, args.jobs)
            failed = sum(d.point.shared is None for d in done)
            print(f"{name} ({have}) {engine} {kernel} pass {spec}: {len(done)} points, "
                  f"{ek.stats['compiles'] - before} compiled, {failed} without bytes, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
