"""Where a ``tilefit check`` run's CPU goes: this process (scan, sites, rules) vs its compile children.

On a shared machine the wall clock says more about the other processes than about the run; the
CPU seconds do not. Runs ``tilefit ARGS`` in this process and prints wall seconds, the process's
own user+system CPU (``RUSAGE_SELF``: the serial part), its waited-for children's
(``RUSAGE_CHILDREN``: the compile children, which run ``TILEFIT_COMPILE_JOBS`` at a time), the
load average at start and end, peak memory of each, and what that makes on an idle machine of
``--cores`` cores: at least ``max(self, (self + children) / cores)`` and at most ``self +
children / cores`` (the children's work overlapping none of the process's own, which is nearly
so: the process waits while the pool compiles).

    python bench/cpu_split.py --cores 2 -- check /path/to/vllm --target consumer --isolated --exit-zero
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    ns = ap.parse_args()
    argv = [a for a in ns.args if a != "--"] if ns.args[:1] == ["--"] else ns.args
    import tilefit.cli as cli

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        cli.cli.main(argv, prog_name="tilefit", standalone_mode=False)
    except SystemExit:
        pass
    import atexit

    atexit._run_exitfuncs()  # the compile children still running are stopped and waited for here
    wall = time.perf_counter() - t0
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own, children = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
    low, high = max(own, (own + children) / ns.cores), own + children / ns.cores
    print(f"wall {wall:.1f} s, load {load0:.1f}-{os.getloadavg()[0]:.1f}; CPU: process {own:.1f} s, "
          f"compile children {children:.1f} s; peak MB: process {me.ru_maxrss / 1024:.0f}, "
          f"largest child {kids.ru_maxrss / 1024:.0f}; on {ns.cores} idle cores: {low:.0f}-{high:.0f} s",
          file=sys.stderr)


if __name__ == "__main__":
    main()
