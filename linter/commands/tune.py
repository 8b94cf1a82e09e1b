"""``tilefit tune``: re-tune only the offending entries on the local GPU."""

from __future__ import annotations

import sys
import time

import click

from .common import fail, settings_or_exit


def _batch_sizes(value: str | None):
    if not value:
        return None
    try:
        return [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter("a comma-separated list of batch sizes") from None


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--target", default="local", show_default=True,
              help="The GPU to tune for; only `local` (the GPU tilefit runs on) is measured. See --emulate.")
@click.option("--emulate", metavar="DEVICE", default=None,
              help="Tune for a smaller card on this one: candidates must fit DEVICE's limits, computed for "
                   "its arch (e.g. --emulate rtx4090 on an H200). Timings still come from the local GPU.")
@click.option("--smem-limit", type=int, default=None, metavar="BYTES",
              help="Like --emulate, with an explicit per-block shared-memory limit.")
@click.option("--all", "all_entries", is_flag=True, help="Re-tune every entry, not only the offending ones.")
@click.option("--budget", type=click.IntRange(min=1), default=24, show_default=True, help="Timings per entry, the re-timing of the 3 fastest configs included.")
@click.option("--seed", type=click.IntRange(min=0), default=8, show_default=True,
              help="How many of the model's favourites are measured before climbing.")
@click.option("--model-shape", default=None, metavar="E=..,N=..,K=..,topk=..",
              help="The model's MoE shape (hidden size K, top_k); default: known models by (E, N).")
@click.option("--model-config", type=click.Path(exists=True), default=None,
              help="A local model folder or config.json to read the shape from.")
@click.option("--batch-sizes", default=None, help="Only these batch-size keys (comma-separated).")
@click.option("--results", type=click.Path(dir_okay=False), default=None,
              help="JSON lines of every measurement; an interrupted run with the same file resumes.")
@click.option("--diff", is_flag=True, help="Print the changes instead of writing them.")
@click.option("--gpus", type=int, default=None, help="Worker processes, one per GPU [default: all visible].")
@click.option("--backend", type=click.Choice(("local", "ray")), default="local", show_default=True,
              help="Run the jobs on local GPUs or on a Ray cluster (pip install 'tilefit[ray]').")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None)
@click.option("--isolated", is_flag=True)
def tune(paths, target, emulate, smem_limit, all_entries, budget, seed, model_shape, model_config, batch_sizes,
         results, diff, gpus, backend, config_file, isolated):
    """Re-tune the entries of fused-MoE tables that do not fit, by measuring on the local GPU.

    Only offending entries are measured (--all for every entry): candidates that fit the target,
    ordered by the performance model, then a measured search over neighbouring configs; each
    result is checked against an fp32 reference. Winners are written in place (--diff to preview).
    """
    from tilefit.api import UsageError
    from tilefit.tune.runner import TuneError, TuneOptions, tune_files
    from tilefit.tune.search import config_key

    if target != "local":
        fail("--target: tilefit tune measures on the local GPU; use --emulate DEVICE to tune for another card")
    settings = settings_or_exit(config_file, isolated)
    opts = TuneOptions(emulate=emulate, smem_limit=smem_limit, all_entries=all_entries, seed=seed, budget=budget,
                       model_shape=model_shape, model_config=model_config, results=results, write=not diff,
                       gpus=gpus, backend=backend, batch_sizes=_batch_sizes(batch_sizes))
    state = {"bar": None, "start": time.time()}

    def on_jobs(n):
        click.echo(f"tuning {n} entries", err=True)
        state["bar"] = click.progressbar(length=n, label="entries", show_eta=True, file=sys.stderr)
        state["bar"].__enter__()

    def on_result(r):
        state["bar"].update(1)

    try:
        result = tune_files(list(paths), opts, settings, on_jobs=on_jobs, on_result=on_result)
    except (TuneError, UsageError) as exc:
        fail(str(exc))
        return
    except KeyboardInterrupt:
        click.echo("\ninterrupted: files are unchanged; rerun with the same --results file to resume", err=True)
        sys.exit(130)
    finally:
        if state["bar"] is not None:
            state["bar"].__exit__(None, None, None)
    where = result.device + (f", emulating {result.emulated}'s limits" if result.emulated else "")
    for r in sorted(result.results, key=lambda r: (r.job.path, r.job.M)):
        best = config_key(r.best) if r.best else "-"
        t = r.times.get(best) if r.best else None
        click.echo(f"{r.job.path}:{r.job.key}: {best} {t:.1f} us ({r.measured} timings on {where})"
                   if t else f"{r.job.path}:{r.job.key}: no working candidate")
    for ff in result.written:
        if diff:
            click.echo(ff.diff(), nl=False)
        else:
            click.echo(f"wrote {ff.path} ({len(ff.fixes)} entries)", err=True)
    for e in result.errors:
        click.echo(f"error: {e}", err=True)
    if diff and result.written:
        sys.exit(1)
    sys.exit(2 if result.errors else 0)
