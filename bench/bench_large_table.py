"""`tilefit check` on one very large valid table (issue 12: a 50 MB table took 28 s in concise
output, and json output did not finish in 280 s at 2 GB), side by side with a bare `json.load`
of the same file, in one run.

The table is a real corpus table (an H100 fused-MoE fp8 table, which overflows an RTX 4090)
whose entries are repeated under batch keys 1, 2, 3, ... until the file is ``--mb`` MB. Each
command runs in a fresh process (``--rounds`` interleaved rounds); the script prints the
median CPU time (user + system: the machine is shared, wall time is noise) and the peak
resident memory of each, and their ratios to the bare load.

    python bench/bench_large_table.py [--mb 50] [--rounds 3] [--formats concise,json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from machine import cpu_name, load

REPO = Path(__file__).resolve().parents[1]
SOURCE = ("vllm-0.33.0/vllm/model_executor/layers/fused_moe/configs/"
          "E=128,N=352,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json")


def make_table(corpus: Path, folder: Path, mb: float) -> Path:
    values = list(json.loads((corpus / SOURCE).read_text()).values())
    size, n, out = 0, 0, {}
    while size < mb * 1e6:
        n += 1
        entry = values[n % len(values)]
        out[str(n)] = entry
        size += len(json.dumps({str(n): entry}, indent=4)) + 4
    path = folder / os.path.basename(SOURCE)
    path.write_text(json.dumps(out, indent=4))
    return path


def measure(args: list[str]) -> tuple[float, float, int]:
    """(CPU seconds, peak RSS in MB, exit code) of one child process."""
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--formats", default="concise,json")
    ap.add_argument("--corpus", default=os.environ.get("TILEFIT_CORPUS", str(REPO.parent / "shared" / "corpus")))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tilefit-large-"))
    path = make_table(Path(args.corpus), work, args.mb)
    entries = len(json.loads(path.read_text()))
    commands = {"json.load": [sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1], 'rb'))", str(path)]}
    for fmt in args.formats.split(","):
        commands[f"check {fmt}"] = [sys.executable, "-m", "tilefit", "check", str(path), "--isolated", "--no-cache",
                                    "--estimator", "analytic", "--target", "rtx4090", "--output-format", fmt]
    cpu: dict[str, list[float]] = {k: [] for k in commands}
    rss: dict[str, float] = {k: 0.0 for k in commands}
    codes: dict[str, int] = {}
    for r in range(args.rounds):
        for name, cmd in commands.items():
            t, m, code = measure(cmd)
            cpu[name].append(t)
            rss[name] = max(rss[name], m)
            codes[name] = code
            print(f"round {r + 1}: {name}: {t:.2f} s CPU, {m:.0f} MB", file=sys.stderr)
    base = statistics.median(cpu["json.load"])
    print(f"table: {path.stat().st_size / 1e6:.1f} MB, {entries} entries; medians of {args.rounds} interleaved rounds")
    print("| command | CPU s (median) | ratio to json.load | peak RSS MB | exit |")
    print("|---|---:|---:|---:|---:|")
    for name in commands:
        med = statistics.median(cpu[name])
        print(f"| {name} | {med:.2f} | {med / base:.1f}x | {rss[name]:.0f} | {codes[name]} |")
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
