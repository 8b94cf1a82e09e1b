"""``tilefit calibrate perf``: fit the performance model's coefficients for the local GPU.

A designed sample (every BLOCK_SIZE_M x num_stages x num_warps cell of the tuning grid at least
once, then random fill, among configs that fit the GPU) of fused-MoE configs is measured at a
spread of batch sizes on a representative shape, or read from an earlier run's JSON lines
(``--from``: records with ``config``, ``M``, ``dtype``, ``time_us``); the coefficients are fitted
(:mod:`tilefit.perf.calibrate`) and written as a device coefficient file that the fixer and the
tuner load (by default in the user data folder, which they read). The report gives the model's mean
Spearman rank correlation with the measured times before and after the fit.
"""

from __future__ import annotations

import datetime
import json
import random
import sys
from pathlib import Path

import click

DEFAULT_SHAPE = {"E": 128, "N": 1536, "K": 2048, "top_k": 8}  # Qwen3-30B-A3B gate/up
DEFAULT_MS = (1, 16, 64, 256, 1024, 4096)


def design_sample(configs, n: int, seed: int = 7) -> list[dict]:
    rnd = random.Random(seed)
    cells: dict = {}
    for c in configs:
        cells.setdefault((c["BLOCK_SIZE_M"], c["num_stages"], c["num_warps"]), []).append(c)
    picked = [rnd.choice(v) for _, v in sorted(cells.items())]
    rest = [c for c in configs if c not in picked]
    rnd.shuffle(rest)
    return (picked + rest)[:max(n, len(picked))]


def samples_from_records(records, shape: dict):
    from tilefit.perf.calibrate import Sample
    from tilefit.perf.shapes import GemmShape

    out = []
    for r in records:
        if r.get("time_us") is None or r.get("status", "ok") != "ok":
            continue
        gemm = GemmShape("fused_moe", r.get("dtype", "bf16"), int(r["M"]), n=shape["N"], k=shape["K"],
                         experts=shape["E"], top_k=shape["top_k"], a_rows_unique=int(r["M"]))
        out.append(Sample(r["config"], gemm, float(r["time_us"]), None, f"{r.get('dtype')}/M={r['M']}"))
    return out


def measure_sample(device, dtypes, sample_size: int, Ms, shape: dict):
    """Measure the designed sample on the local GPU; returns JSON-able records."""
    from tilefit.estimate import Estimator
    from tilefit.families import classify

    from .measure import measure
    from .runner import _fits
    from .space import tuning_space
    from .workload import MoEShape, MoEWorkload

    est = Estimator("auto")
    records = []
    for dtype in dtypes:
        meta = classify(f"E={shape['E']},N={shape['N'] // 2},device_name=x"
                        + (",dtype=fp8_w8a8" if dtype == "fp8_w8a8" else "") + ".json")
        fitting = [c for c in tuning_space(groups=(1, 16)) if _fits(meta, c, device, est, 0)]
        sample = design_sample(fitting, sample_size)
        moe = MoEShape(shape["E"], shape["N"], shape["K"], shape["top_k"], dtype,
                       "per_tensor" if dtype == "fp8_w8a8" else "none")
        with click.progressbar(length=len(sample) * len(Ms), label=f"measuring {dtype}", file=sys.stderr) as bar:
            for M in Ms:
                wl = MoEWorkload(moe, M, "cuda")
                for cfg in sample:
                    m = measure(wl, cfg)
                    records.append({"dtype": dtype, "M": M, "config": cfg, "status": m.status, "time_us": m.time_us})
                    bar.update(1)
    return records


@click.command("perf")
@click.option("--from", "from_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Fit to measurements recorded earlier (JSON lines) instead of measuring now.")
@click.option("--device", "device_spec", default=None,
              help="The device the measurements are from (default: the local GPU).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Coefficient file to write [default: perf_model/device-<key>.json in the user data folder: $TILEFIT_DATA_DIR, else the platform's (~/.local/share/tilefit)].")
@click.option("--sample", "sample_size", type=int, default=40, show_default=True, help="Configs per dtype.")
@click.option("--dtype", "dtypes", multiple=True, default=("fp8_w8a8", "bf16"), show_default=True)
@click.option("--shape", default=None, metavar="E=..,N=..,K=..,topk=..",
              help="GEMM shape measured (N is the GEMM's N) [default: Qwen3-30B-A3B gate/up].")
def perf(from_file, device_spec, out, sample_size, dtypes, shape):
    """Fit the performance model to the local GPU (or to recorded measurements)."""
    from tilefit.api import UsageError, load_devices, resolve_targets
    from tilefit.config import Settings
    from tilefit.perf.calibrate import fit
    from tilefit.perf.coefficients import write_coefficients

    from .runner import TuneError, local_device

    shp = dict(DEFAULT_SHAPE)
    if shape:
        try:
            for part in shape.split(","):
                k, v = part.split("=")
                shp[{"topk": "top_k"}.get(k.strip(), k.strip())] = int(v)
        except ValueError:
            raise click.BadParameter("E=..,N=..,K=..,topk=..", param_hint="--shape") from None
    try:
        db = load_devices(Settings())
        if device_spec:
            found = resolve_targets(db, [device_spec])
            if len(found) != 1:
                raise UsageError(f"--device {device_spec!r} names {len(found)} devices")
            device = found[0]
        elif from_file:
            raise UsageError("--from needs --device (which GPU the measurements were taken on)")
        else:
            device = local_device(db)
        if from_file:
            with open(from_file, encoding="utf-8") as fh:
                records = [json.loads(line) for line in fh if line.strip()]
        else:
            records = measure_sample(device, dtypes, sample_size, DEFAULT_MS, shp)
    except (UsageError, TuneError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except (OSError, ValueError) as exc:
        click.echo(f"error: cannot read measurements: {exc}", err=True)
        sys.exit(2)
    samples = samples_from_records(records, shp)
    if len(samples) < 10:
        click.echo(f"error: only {len(samples)} usable measurements; need at least 10", err=True)
        sys.exit(2)
    report = fit(samples, device)
    default_out = out is None
    if out is None:
        from tilefit.perf.coefficients import user_folder

        folder = user_folder()
        if folder is None:
            click.echo("error: the user data folder is turned off (TILEFIT_DATA_DIR is empty); pass --out FILE",
                       err=True)
            sys.exit(2)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            click.echo(f"error: cannot create the user data folder {folder}: {exc.strerror or exc}; pass --out FILE",
                       err=True)
            sys.exit(2)
        out = str(folder / f"device-{device.key}.json")
    provenance = {"method": "tilefit calibrate perf: coordinate descent on log time",
                  "date": datetime.date.today().isoformat(), "measurements": len(samples),
                  "device_name": device.name, "shape": shp,
                  "loss_before": report.loss_before, "loss_after": report.loss_after,
                  "rank_correlation_before": report.rank_before, "rank_correlation_after": report.rank_after}
    write_coefficients(out, report.values, provenance, device=device.key)
    click.echo(f"{len(samples)} measurements on {device.key}: mean rank correlation "
               f"{report.rank_before:.3f} -> {report.rank_after:.3f}, log-loss {report.loss_before:.3f} -> "
               f"{report.loss_after:.3f}")
    if default_out:
        click.echo(f"wrote {out}; the fixer and the tuner use it for {device.key} from now on")
    else:
        click.echo(f"wrote {out}; use it with: export TILEFIT_PERF_MODEL_PATH={Path(out).parent}")
