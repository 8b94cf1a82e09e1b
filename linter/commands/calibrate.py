"""``tilefit calibrate``: regenerate model tables from compiles (``smem``) or GPU measurements.

A click group; each model has its subcommand (``smem`` here, ``perf`` added by the performance
model), registered with ``calibrate.add_command``.
"""

from __future__ import annotations

import shlex
import sys

import click

from .common import fail


@click.group()
def calibrate() -> None:
    """Regenerate model tables from compiles or GPU measurements."""


@click.command("smem")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Compiler processes. [default: all cores]")
@click.option("--scale", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
              help="Multiply the points of the fit grid per path and arch (with --engine: of every design).")
@click.option("--family", "families", multiple=True, metavar="FAMILY",
              help="Calibrate only these arch families (mma_v2, wgmma, tcgen05, ...). Repeatable.")
@click.option("--kernel", "kernels", multiple=True, metavar="KERNEL",
              help="Calibrate only these kernel families (fused_moe, mla_decode, a new one, ...): their "
                   "smem/triton-<major>.<minor>.json forms are written, the shared file is kept. Repeatable.")
@click.option("--out", "-o", type=click.Path(dir_okay=False), default=None,
              help="Write the whole model to this one file. [default: smem_model/triton-<major>.<minor>.json in "
                   "the user data folder ($TILEFIT_DATA_DIR, else the platform's, e.g. ~/.local/share/tilefit), "
                   "read before the bundled model]")
@click.option("--package", "into_package", is_flag=True,
              help="Write into tilefit's own data instead (tilefit/data/smem_model/ and each kernel family's "
                   "smem/ folder; with --engine its smem/<engine>-<version>/ folder): how the bundled model is "
                   "refreshed.")
@click.option("--dry-run", is_flag=True, help="Fit and report, write nothing.")
@click.option("--proof-points", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also compile the held-out proof set (a different design, plus real tables from "
                   "--proof-corpus) and write its points as compact JSON.")
@click.option("--proof-corpus", multiple=True, type=click.Path(exists=True), metavar="DIR",
              help="Tuning tables whose kernels join the proof set. Repeatable.")
@click.option("--proof-per-arch", type=click.IntRange(min=0), default=100, show_default=True,
              help="Kernels per arch taken from --proof-corpus.")
@click.option("--proof-only", is_flag=True, help="Only compile and write the proof set.")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=None,
              help="Compile cache folder. [default: $TILEFIT_CACHE_DIR or the user cache]")
@click.option("--engine", "engine", default=None, metavar="SOURCE",
              help="Calibrate against an engine's own kernels instead of ours: vllm==0.33.0 or sglang==0.5.23 "
                   "(the wheel is fetched with pip download --no-deps into the cache and read from its zip), a "
                   ".whl file, or a source tree. The forms, the compiled points and their provenance go into "
                   "engine_smem/<kernel>/<engine>-<version>/ in the user data folder, read before the bundled "
                   "data (with --package: each kernel family's smem/<engine>-<version>/ folder).")
@click.option("--corpus", "corpus", multiple=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="With --engine: tuning tables whose kernels (each file's own device and the consumer cards) "
                   "join the held-out points. Repeatable.")
@click.option("--arch", "archs", multiple=True, metavar="ARCH",
              help="With --engine: prove the forms on these archs only (default: every calibrated arch). Repeatable.")
@click.option("--probe-from", "probe_from", default=None, metavar="X.Y",
              help="With --engine: prove that the installed Triton gives the bytes of the calibration for Triton "
                   "X.Y on a probe set drawn from its held-out points; groups that agree reuse its forms (the "
                   "file says so), groups that differ are calibrated afresh.")
@click.option("--candidates", is_flag=True,
              help="With --engine: prove the kernel family's written candidate forms (calibration.engine_candidates "
                   "in its family.json) on a fresh held-out design; one replaces a group's form only where it is "
                   "exact on every fresh point and every point compiled before.")
@click.option("--borrow", is_flag=True,
              help="With --engine: compile nothing; an arch whose form is not proven takes another form of the "
                   "kernel's stored calibration (another arch family's, another dtype path's) where that one is "
                   "exact on more of the arch's fit points and on no fewer of its held-out points (proven only "
                   "where exact on all of them): an arch that lowers a path like another family "
                   "(tilefit.smem.engine_borrow).")
@click.option("--fresh/--no-fresh", "fresh", default=True, show_default=True,
              help="With --probe-from: calibrate the groups whose probe differs afresh for this release; "
                   "--no-fresh writes only the groups proven identical and the probe's record of the others "
                   "(answered with another release's forms, marked not proven).")
@click.option("--risk-share", type=click.FloatRange(min=0, max=1), default=None, metavar="SHARE",
              help="With --probe-from: the seeded share of the risk tiles (256-row tiles compilers fail on) "
                   "the probe compiles. [default: --scale, at most 1]")
@click.option("--triton-python", "triton_python", default=None, metavar="PYTHON",
              type=click.Path(exists=True, dir_okay=False),
              help="With --engine: compile with the Triton of this interpreter (a virtual environment with "
                   "another Triton release and packaging; the same Python version; tilefit itself is not "
                   "installed there). The forms are written for that release.")
@click.option("--extend", is_flag=True,
              help="With --engine and --arch: add these archs to the stored calibration of the engine release and "
                   "the installed Triton; its compiled points are kept, not recompiled, and its forms unchanged. "
                   "With --probe-from and --no-fresh: probe these archs and merge them into the release's stored "
                   "probe record (no group of another arch dropped).")
@click.option("--recheck", is_flag=True,
              help="With --engine: compile the stored points of the installed Triton's calibration again (--arch: "
                   "those archs only) and replace the figures that differ, counting the proofs of their groups "
                   "again; the provenance lists each change (tilefit.smem.engine_recheck).")
@click.option("--recheck-path", "recheck_paths", multiple=True, metavar="TEXT",
              help="With --recheck: only the dtype paths whose name contains TEXT (e.g. tma, fp8_w8a8/block). "
                   "Repeatable.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
def smem(jobs, scale, families, kernels, out, into_package, dry_run, proof_points, proof_corpus, proof_per_arch,
         proof_only, cache_dir, engine, corpus, archs, probe_from, candidates, fresh, risk_share, triton_python,
         extend, borrow, recheck, recheck_paths, quiet):
    """Regenerate the analytic shared-memory model for the installed Triton.

    Compiles a designed grid of kernel specialisations (kernel x dtype path x quantisation x tile x
    num_warps x num_stages x arch) ahead of time, chooses one closed form per (arch family,
    kernel, dtype path) from a library of candidates by exact matches, and writes the model
    with the figures of the fit to the user data folder (it says where; tilefit reads it before
    its bundled model from then on), to --out FILE, or, with --package, into tilefit's own data:
    the shared file triton-<major>.<minor>.json (arch families, epilogue tables, provenance) and
    each kernel family's smem/ forms. A form matching
    at least 99% of its points exactly (and no verdict against a device limit wrong) is
    `calibrated`.
    """
    from tilefit import kernels as registry
    from tilefit.smem import calibrate as cal
    from tilefit.smem.exact import TritonUnavailable

    unknown = sorted(set(families) - set(cal.CALIBRATION_ARCHS))
    if unknown:
        fail(f"unknown arch family {', '.join(unknown)}; known: {', '.join(cal.CALIBRATION_ARCHS)}")
    unknown = sorted(set(kernels) - set(registry.names()))
    if unknown:
        fail(f"unknown kernel {', '.join(unknown)}; known: {', '.join(registry.names())}")

    def log(msg: str) -> None:
        if not quiet:
            click.echo(msg, err=True)

    command = "tilefit " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv else "tilefit calibrate smem"
    if triton_python is not None:
        if engine is None:
            fail("--triton-python goes with --engine")
        from tilefit.smem import interpreter

        try:
            interpreter.use(triton_python)
        except interpreter.InterpreterError as exc:
            fail(str(exc))
    if engine is not None:
        _engine(engine, kernels=list(kernels) or None, corpus=list(corpus), archs=list(archs) or None, jobs=jobs,
                scale=scale, cache_dir=cache_dir, write=not dry_run, command=command, log=log, probe_from=probe_from,
                candidates=candidates, quiet=quiet, fresh=fresh, risk_share=risk_share, extend=extend,
                package=into_package, borrow=borrow, recheck=recheck,
                recheck_paths=list(recheck_paths))
        return
    if corpus or archs or probe_from or candidates or extend or borrow or recheck or recheck_paths:
        fail("--corpus, --arch, --probe-from, --candidates, --extend, --borrow and --recheck go with --engine")
    if not fresh or risk_share is not None:
        fail("--no-fresh and --risk-share go with --engine and --probe-from")
    if out and into_package:
        fail("--out and --package name two places; give one")
    try:
        default_out = not proof_only and not dry_run and not out and not into_package
        if default_out and cal.writes_user_folder(list(kernels) or None):
            from tilefit import versions

            cal.user_model_path(versions.installed_triton() or "0.0")  # refused before hours of compiles
        if not proof_only:
            result = cal.calibrate_smem(jobs=jobs, scale=scale, families=list(families) or None,
                                        kernels=list(kernels) or None, cache_dir=cache_dir, out=out,
                                        write=not dry_run, command=command, log=log, package=into_package)
            _report(result, default_out)
        if proof_points:
            from tilefit import versions

            pts = cal.proof_points(jobs=jobs, corpus=list(proof_corpus), per_arch=proof_per_arch,
                                   cache_dir=cache_dir, log=log)
            doc = cal.dump_points(pts, triton_version=versions.installed_triton() or "unknown",
                                  design="held out: seeded random grid (seed 2) without the fit grid's points, plus "
                                         f"up to {proof_per_arch} distinct kernels per arch from real tuning tables",
                                  extra={"command": command})
            cal.write_points(doc, proof_points)
            click.echo(f"wrote {len(doc['points'])} proof points to {proof_points}")
    except (TritonUnavailable, cal.CalibrationError) as exc:
        fail(str(exc))


def _engine(source, *, kernels, corpus, archs, jobs, scale, cache_dir, write, command, log, probe_from, quiet,
            candidates=False, fresh=True, risk_share=None, extend=False, package=False, borrow=False,
            recheck=False, recheck_paths=()) -> None:
    from tilefit import progress
    from tilefit.smem import calibrate as cal
    from tilefit.smem import engine_calibrate as ec
    from tilefit.smem.engine_source import EngineSourceError
    from tilefit.smem.exact import TritonUnavailable

    unknown = sorted(set(archs or ()) - set(cal.ARCH_FAMILIES))
    if unknown:
        fail(f"unknown arch {', '.join(unknown)}; known: {', '.join(cal.ARCH_FAMILIES)}")
    if extend and (candidates or not archs):
        fail("--extend adds the --arch archs to a calibration (with --probe-from: to a release's probe record): "
             "give --arch, without --candidates")
    if extend and probe_from and fresh:
        fail("--extend with --probe-from merges the --arch archs' probe into the release's probe record: give "
             "--no-fresh")
    if write and not package:
        from tilefit.smem.engine_files import EngineFilesError, write_dir

        try:  # refused before minutes of compiles
            write_dir((kernels or registry_kernels())[0], "vllm", "0", package=False)
        except EngineFilesError as exc:
            fail(str(exc))
    if borrow and (candidates or probe_from or extend or corpus or archs):
        fail("--borrow compiles nothing: give it without --candidates, --probe-from, --extend, --corpus or --arch")
    if recheck_paths and not recheck:
        fail("--recheck-path goes with --recheck")
    if recheck and (candidates or probe_from or extend or borrow or corpus):
        fail("--recheck compiles the stored points again: give it without --candidates, --probe-from, --extend, "
             "--borrow or --corpus")
    make = None if quiet else progress.factory(log=log if not sys.stderr.isatty() else None)
    try:
        if recheck:
            from tilefit.smem.engine_recheck import recheck as recheck_kernel

            results = []
            for k in (kernels or registry_kernels()):
                try:
                    results.append(recheck_kernel(source, k, archs=archs, paths=recheck_paths or None, jobs=jobs,
                                                  cache_dir=cache_dir, write=write, command=command, log=log,
                                                  progress_factory=make, package=package))
                except ValueError as exc:
                    if kernels:
                        raise
                    log(f"{k}: {exc}")
        elif borrow:
            results = _borrow(source, kernels or registry_kernels(), write=write, command=command, log=log,
                              package=package)
        elif candidates:
            from tilefit.app import touched_items

            items = touched_items(corpus) if corpus else None
            results = [ec.candidate_round(source, k, archs=archs, jobs=jobs, cache_dir=cache_dir, items=items,
                                          scale=scale, write=write, command=command, log=log, progress_factory=make,
                                          package=package)
                       for k in (kernels or registry_kernels()) if ec.engine_candidates(k, _engine_name(source))]
        elif probe_from:
            results = ec.probe_version(source, probe_from, kernels=kernels, archs=archs, jobs=jobs, scale=scale,
                                       cache_dir=cache_dir, write=write, command=command, log=log,
                                       progress_factory=make, fresh=fresh, risk_share=risk_share, package=package,
                                       extend=extend)
        else:
            if not fresh or risk_share is not None:
                fail("--no-fresh and --risk-share go with --probe-from")
            items = None
            if corpus:
                from tilefit.app import touched_items

                log(f"reading the tables under {', '.join(corpus)}")
                items = touched_items(corpus)
            results = ec.calibrate_engine(source, kernels=kernels, items=items, archs=archs, jobs=jobs,
                                          scale=scale, cache_dir=cache_dir, write=write, command=command, log=log,
                                          progress_factory=make, extend=extend, package=package)
    except (TritonUnavailable, EngineSourceError, ValueError) as exc:
        fail(str(exc))
    _engine_report(results)
    if not package and any(kc.written for kc in results):
        click.echo("written to the user data folder: tilefit reads it before the bundled calibration of the same "
                   "engine and Triton release (--package writes the package's data)")


def _borrow(source, kernels, *, write, command, log, package) -> list:
    """``--borrow``: :func:`tilefit.smem.engine_borrow.borrow_round` on the stored calibration of
    each kernel for the engine release ``source`` names and the installed Triton."""
    from tilefit import versions
    from tilefit.smem import engine_calibrate as ec
    from tilefit.smem.engine_borrow import borrow_round
    from tilefit.smem.engine_source import open_source

    tree = open_source(source)
    if tree.engine is None:
        raise ValueError(f"{source}: cannot tell which engine this is (name a wheel or a vllm/sglang tree)")
    triton = versions.major_minor(ec.compile_release())
    out = []
    for kernel in kernels:
        if not ec.points_path(kernel, tree.engine, tree.version or "unknown", triton, ec.read_from(package)).is_file():
            continue
        kc, taken = borrow_round(kernel, tree.engine, tree.version or "unknown", triton, write=write,
                                 command=command, package=package)
        for group, how in sorted(taken.items()):
            log(f"{kernel} {group}: form of {', '.join(how['from'])} (fit {how['fit_exact'][0]}/{how['fit_exact'][1]}, "
                f"held-out {how['held_out_exact'][0]}/{how['held_out_exact'][1]}, was "
                f"{how['was_held_out_exact']}){'; proven' if how['proven'] else ''}")
        out.append(kc)
    return out


def registry_kernels() -> list[str]:
    from tilefit import kernels as registry

    return registry.names()


def _engine_name(source: str) -> str:
    from tilefit.smem.engine_source import open_source

    return open_source(source).engine or ""


def _engine_report(results) -> None:
    rows = [("arch family", "kernel", "dtype", "form", "proven on", "held-out exact")]
    for kc in results:
        for (family, kernel, dtype), r in sorted(kc.results.items()):
            exact = sum(p.exact for p in r.proofs.values())
            total = sum(p.points for p in r.proofs.values())
            reuse = (kc.doc.get("reused") or {}).get("groups", {}).get(f"{family}/{dtype}")
            form = r.origin
            proven = r.proven_archs()
            if reuse:
                form = f"reused from Triton {kc.doc['reused']['from']} (probe {reuse['identical']}/{reuse['points']})"
                if "archs" in reuse:
                    proven = [a for a in proven if a in reuse["archs"]]
            rows.append((family, kernel, dtype, form, ",".join(proven) or "-", f"{exact}/{total}"))
        if not kc.doc.get("reused"):
            continue
        for key, g in sorted((kc.doc["reused"].get("differing") or {}).items()):
            family, dtype = key.split("/", 1)
            if (family, kc.kernel, dtype) not in kc.results:
                rows.append((family, kc.kernel, dtype, f"none: probe {g.get('identical')}/{g.get('points')} identical",
                             "-", "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    for kc in results:
        prov = kc.doc["provenance"]
        where = f" -> {', '.join(str(p) for p in kc.written)}" if kc.written else " (not written)"
        fails = sum(len(v["points"]) for per in kc.failures.values() for v in per.values())
        ext = (prov.get("probe_extensions") or [{}])[-1] if kc.doc.get("reused") else {}
        added = f" (this extension: {ext['compiled']} of {ext['points']} on {', '.join(ext['archs'])})" if ext else ""
        click.echo(f"{prov.get('engine')} {prov.get('engine_version')} {kc.kernel}, Triton {prov.get('triton')}: "
                   f"{prov.get('compiled')} points compiled{added}, {fails} do not compile{where}")


def _report(result, default_out: bool = False) -> None:
    rows = [("family", "kernel", "dtype", "points", "exact", "verdict err", "max err", "status")]
    for r in result.results:
        rows.append((r.family, r.kernel, r.dtype, str(r.points), f"{r.rate:.1%}", str(r.verdict_errors),
                     str(r.max_error), r.status))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    prov = result.table["provenance"]
    if not result.written:
        where = " (not written)"
    else:
        where = f"; wrote {', '.join(str(p) for p in result.written)}"
        if default_out:
            where += " (used instead of the bundled model from now on)"
    click.echo(f"Triton {prov['triton']}: {prov['fit_points']} fit points, {prov['exact_match_rate']:.2%} exact, "
               f"{prov['seconds']:.0f} s{where}")


calibrate.add_command(smem)


def _perf_command():
    from tilefit.tune.calibrate_perf import perf

    return perf


calibrate.add_command(_perf_command())
