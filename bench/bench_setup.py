"""The README's test command on a fresh virtual environment: install time, venv size, test time.

    python bench/bench_setup.py [--python python3] [--keep DIR] [--skip-tests]

Runs, from the repository root, exactly what `.ci/run` runs, in a new venv with an empty pip
cache and empty compile caches (a fresh machine has none): ``pip install -e '.[test]'``, then ``python -m pytest -q``.
Prints the wall time of each step, the venv's size on disk, its biggest packages and whether
torch or ray got in (the `test` extra must not pull them). Targets (issue 19): the whole
command under 2 minutes on a fresh 2-core machine, the venv under 1.5 GB.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import cpu_name, load  # noqa: E402


def du(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            total += st.st_blocks * 512
    return total


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter to make the venv with")
    ap.add_argument("--keep", default=None, help="make the venv here and keep it (default: a temporary folder)")
    ap.add_argument("--skip-tests", action="store_true", help="install and measure only")
    ap.add_argument("--pip-arg", action="append", default=[],
                    help="an extra argument to the install (repeatable), e.g. --pip-arg=--no-compile, to measure a variant")
    ap.add_argument("--serial-too", action="store_true",
                    help="then run the suite again on one worker (-n0), for a side-by-side figure")
    args = ap.parse_args()

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tilefit-setup-"))
    venv = work / "venv"
    env = dict(os.environ, PIP_CACHE_DIR=str(work / "pip-cache"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    # a fresh machine has no compile caches either: tilefit's (the user cache folder unless
    # TILEFIT_CACHE_DIR says otherwise) and Triton's own start empty, inside the work folder
    env.pop("TILEFIT_CACHE_DIR", None)
    # nor, as a rule, PYTHONDONTWRITEBYTECODE (set in this project's helper shells): without .pyc
    # files every import of Triton, hypothesis, ... compiles from source, and pytest rewrites every
    # test module's asserts again in each worker
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["XDG_CACHE_HOME"] = str(work / "xdg-cache")
    env["TRITON_CACHE_DIR"] = str(work / "triton-cache")
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, {load()}; venv in {venv}", flush=True)
    try:
        t0 = time.perf_counter()
        subprocess.run([args.python, "-m", "venv", str(venv)], check=True)
        py = str(venv / "bin" / "python")
        t1 = time.perf_counter()
        pip_cpu0 = _children_cpu()
        pip = subprocess.run([py, "-m", "pip", "install", *args.pip_arg, "-e", ".[test]"], cwd=REPO, env=env, check=True,
                             capture_output=True, text=True)
        t2 = time.perf_counter()
        pip_cpu = _children_cpu() - pip_cpu0
        ignored = (pip.stdout + pip.stderr).count("Package would be ignored")
        size = du(venv)
        site = next((venv / "lib").glob("python*/site-packages"))
        sizes = sorted(((du(p), p.name) for p in site.iterdir() if p.is_dir()), reverse=True)[:5]
        has = {m: (site / m).is_dir() for m in ("torch", "ray", "triton", "nvidia")}
        print(f"venv: {t1 - t0:.1f} s; pip install {' '.join(args.pip_arg + [''])}-e '.[test]': {t2 - t1:.1f} s wall, {pip_cpu:.1f} s CPU; size {size / 2**30:.2f} GiB")
        print("largest: " + ", ".join(f"{name} {b / 2**20:.0f} MiB" for b, name in sizes))
        print(f"setuptools 'Package would be ignored' warnings: {ignored}")
        print("installed: " + ", ".join(f"{m} {'yes' if v else 'no'}" for m, v in has.items()))
        if args.skip_tests:
            return 0
        test_env = dict(env, PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv))
        runs = [("python -m pytest -q", [])] + ([("python -m pytest -q -n0", ["-n0"])] if args.serial_too else [])
        first = None
        for label, extra in runs:
            cpu0 = _children_cpu()
            t3 = time.perf_counter()
            proc = subprocess.run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra], cwd=REPO,
                                  env=test_env, capture_output=True, text=True)
            t4 = time.perf_counter()
            cpu = _children_cpu() - cpu0
            tail = [line for line in proc.stdout.splitlines() if line.strip()][-1:]
            for line in proc.stdout.splitlines():
                if line.startswith(("FAILED", "ERROR")):
                    print(line)
            print(f"{label}: {t4 - t3:.1f} s wall, {cpu:.1f} s CPU (user + system, all workers), "
                  f"exit {proc.returncode}: {tail[0] if tail else ''}; {load()}", flush=True)
            if first is None:
                first = (t3, t4, proc)
        t3, t4, proc = first
        print(f"whole command (install + tests): {t2 - t1 + t4 - t3:.1f} s; {load()} at the end")
        return proc.returncode
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
