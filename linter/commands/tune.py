"""``tilefit tune``: re-tune only the offending entries on the local GPU."""

from __future__ import annotations

import sys
import time

import click

from .common import fail, plural, settings_or_exit


def _batch_sizes(value: str | None):
    if not value:
        return None
    try:
        return [int(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter("a comma-separated list of batch sizes") from None


def summary(result) -> str:
    """Where the work ran: timings per GPU worker, GPU and wall time, compiles, lost workers."""
    st = result.stats
    gpus = len(st.timings) or 1
    per = ", ".join(f"{w} {n}" for w, n in sorted(st.timings.items()))
    lines = [f"{st.measured} timings on {plural(gpus, 'GPU worker')} ({per or 'none'}; "
             f"{result.backend}), {st.replayed} replayed from --results; wall {st.wall_s:.1f} s, "
             f"GPU {st.gpu_total_s:.1f} s"]
    if st.compiles or st.compiled_on_gpu:
        failed = f", {st.compile_failed} failed there" if st.compile_failed else ""
        lines.append(f"{st.compiles} kernels compiled by CPU workers ({st.cpu_seconds:.1f} s{failed}), "
                     f"{st.compiled_on_gpu} compiled by a GPU worker at launch")
    for worker, why in st.lost:
        lines.append(f"worker {worker} lost: {why}")
    if st.lost:
        lines.append(f"{st.restarted} workers restarted, {st.retried} tasks sent again, "
                     f"{st.crashed} configs recorded as crashed")
    return "\n".join(lines)


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
@click.option("--budget", type=click.IntRange(min=1), default=16, show_default=True,
              help="Most timings per entry, the re-timing of the 2 fastest configs included (the search "
                   "stops earlier once 6 timings in a row found nothing faster).")
@click.option("--seed", type=click.IntRange(min=0), default=4, show_default=True,
              help="How many of the model's favourites are measured (after vLLM's default for the batch "
                   "size) before climbing.")
@click.option("--model-shape", default=None, metavar="E=..,N=..,K=..,topk=..",
              help="The model's MoE shape (hidden size K, top_k); default: known models by (E, N).")
@click.option("--model-config", type=click.Path(exists=True), default=None,
              help="A local model folder or config.json to read the shape from.")
@click.option("--batch-sizes", default=None, help="Only these batch-size keys (comma-separated).")
@click.option("--results", type=click.Path(dir_okay=False), default=None,
              help="JSON lines of every measurement; an interrupted run with the same file resumes.")
@click.option("--diff", is_flag=True, help="Print the changes instead of writing them.")
@click.option("--gpus", type=click.IntRange(min=1), default=None,
              help="GPU workers, one per GPU [default: every visible GPU (CUDA_VISIBLE_DEVICES), or every GPU "
                   "of the Ray cluster].")
@click.option("--backend", type=click.Choice(("local", "ray")), default="local", show_default=True,
              help="local: one worker process per GPU of this machine; ray: one Ray actor per GPU of a Ray "
                   "cluster (pip install 'tilefit[ray]').")
@click.option("--ray-address", default=None, metavar="ADDRESS",
              help="With --backend ray: the cluster to join (`auto` for the one `ray start` runs here, "
                   "ray://HOST:10001 for a remote one) [default: $RAY_ADDRESS, else a local cluster for this run].")
@click.option("--compile-workers", type=click.IntRange(min=0), default=None,
              help="CPU worker processes (per node) that compile kernels ahead of the GPU workers; 0: each GPU "
                   "worker compiles at its first launch [default: every core but one per GPU and one].")
@click.option("--task-timeout", type=click.FloatRange(min=1), default=600, show_default=True, metavar="SECONDS",
              help="A worker that holds one compile or timing longer is killed and replaced (a hung GPU); "
                   "a config that kills two workers is recorded as failed.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), default=None)
@click.option("--isolated", is_flag=True)
def tune(paths, target, emulate, smem_limit, all_entries, budget, seed, model_shape, model_config, batch_sizes,
         results, diff, gpus, backend, ray_address, compile_workers, task_timeout, config_file, isolated):
    """Re-tune the entries of fused-MoE tables that do not fit, by measuring on the local GPUs.

    Only offending entries are measured (--all for every entry): candidates that fit the target,
    ordered by the performance model, then a measured search over neighbouring configs; each
    result is checked against an fp32 reference. Winners are written in place (--diff to preview).

    Entries are spread over every visible GPU (one worker process each, or one Ray actor each with
    --backend ray); kernels are compiled ahead by CPU workers that see no GPU, so the GPU workers
    only time. Each entry is timed on one GPU, and the same timings give the same picks whatever
    the number of GPUs. Every timing is appended to --results as it is taken: a killed run, or a
    killed worker, loses nothing that finished, and a rerun with the same file resumes.
    """
    from tilefit.api import UsageError
    from tilefit.tune.runner import TuneError, TuneOptions, tune_files
    from tilefit.tune.search import config_key

    if target != "local":
        fail("--target: tilefit tune measures on the local GPU; use --emulate DEVICE to tune for another card")
    settings = settings_or_exit(config_file, isolated)
    if ray_address and backend != "ray":
        fail("--ray-address needs --backend ray")
    opts = TuneOptions(emulate=emulate, smem_limit=smem_limit, all_entries=all_entries, seed=seed, budget=budget,
                       model_shape=model_shape, model_config=model_config, results=results, write=not diff,
                       gpus=gpus, backend=backend, ray_address=ray_address, compile_workers=compile_workers,
                       task_timeout=task_timeout, batch_sizes=_batch_sizes(batch_sizes))
    state = {"bar": None, "start": time.time()}

    def on_jobs(n):
        click.echo(f"tuning {plural(n, 'entry', 'entries')}", err=True)
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
    if result.stats is not None:
        click.echo(summary(result), err=True)
    for ff in result.written:
        if diff:
            click.echo(ff.diff(), nl=False)
        else:
            click.echo(f"wrote {ff.path} ({plural(len(ff.fixes), 'entry', 'entries')})", err=True)
    for e in result.errors:
        click.echo(f"error: {e}", err=True)
    if diff and result.written:
        sys.exit(1)
    sys.exit(2 if result.errors else 0)
