"""Profile of the call-site scan alone (issue 18 item 5): ``Project.scan`` of a whole package.

Prints files seen and parsed, CPU and wall seconds, peak RSS next to the 1 GiB target, and the
parsed modules by what they hold (K: a kernel, L: a launch, x: loaded only to follow an import)
with their source bytes, to show which modules the ASTs' memory belongs to.

    python bench/scan_profile.py /work/engines/src/sglang-0.5.23/sglang
"""

from __future__ import annotations

import collections
import glob
import resource
import sys
import time

from tilefit.callsites.project import Project


def main() -> None:
    root = sys.argv[1]
    files = sorted(glob.glob(root + "/**/*.py", recursive=True))
    t0, w0 = time.process_time(), time.perf_counter()
    p = Project.scan(files)
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{root}: {p.stats.files} files, {p.stats.parsed} parsed, {len(p.by_path)} modules, "
          f"{p.stats.kernels} kernels, {p.stats.launches} launches")
    print(f"scan: {cpu:.1f} s CPU, {wall:.1f} s wall, peak {rss:.0f} MB ({rss / 1024:.2f}x of 1024 MB)")
    count: collections.Counter = collections.Counter()
    size: collections.Counter = collections.Counter()
    for m in p.all_modules():
        kind = ("K" if m.all_kernels else "-") + ("L" if m.launches else "-") + ("x" if m.extra else "-")
        count[kind] += 1
        size[kind] += len(getattr(m.source, "text", "") or "")
    for kind, n in count.most_common():
        print(f"  {kind}: {n} modules, {size[kind] / 1e6:.1f} MB of source")
    print(f"wrapper names (second-pass text match): {len(p.wrapper_names())}")


if __name__ == "__main__":
    main()
