"""The HTML report on big inputs: the corpus against `all` (issue 14: renders in under 2 s in the
browser, the file stays under 5 MB; identical entries aggregated).

Builds the page in this process (phases timed: check with fix planning, the audit, the page),
prints its size next to what the same model would weigh without aggregation (each entry's
config and figures written out per table), then loads it from file:// in headless Chromium
(tests/browser.py's flags), several rounds per view, interleaved, and prints the medians and the
slowest round: time from navigation start to the view drawn and laid out (two animation frames
after the load event), next to a page with the same data and nothing drawn (the floor:
reading and parsing the file).

    python bench/bench_html.py [CORPUS] [--target all] [--rounds 5] [--out build/bench-html/audit.html]
    python bench/bench_html.py --page build/bench-html/audit.html   # only the browser part, on a page
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

LIMIT_BYTES = 5 * 1024 * 1024
LIMIT_MS = 2000
VIEWS = ("#summary", "#matrix", "#t{worst}")


def build(corpus: str, targets: list[str], estimator: str):
    from tilefit import __version__
    from tilefit.app import CheckOptions, run_check
    from tilefit.audit import build_check_audit
    from tilefit.reporters.html import render_page

    t0 = time.perf_counter()
    result = run_check([corpus], CheckOptions(targets=targets, estimator=estimator, fix=True, fix_rank=True,
                                              use_cache=False))
    t1 = time.perf_counter()
    audit = build_check_audit(result, tool_version=__version__)
    t2 = time.perf_counter()
    data = audit.to_json()
    page = render_page(data, audit.title)
    t3 = time.perf_counter()
    return result, audit, data, page, (t1 - t0, t2 - t1, t3 - t2)


def unaggregated_bytes(audit) -> int:
    """What the model would weigh with every entry written out: its config and, per class, its
    bytes and verdict inline (no shared config list, no shared needs)."""
    size = 0
    for t in audit.tables:
        rows = []
        for j, (key, cfg) in enumerate(t.entries):
            cols = (t.entry_cols[j],) if t.entry_cols is not None else t.cells
            rows.append([key, audit.configs[cfg],
                         {c: [n.bytes, n.verdict] for c in cols if (n := audit.need(t, c, cfg)) is not None}])
        size += len(json.dumps(rows, separators=(",", ":")))
    return size


def blank_page(data) -> str:
    """The same data with a script that only parses it: the floor of any drawing."""
    from tilefit.reporters.html.page import embed_json

    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\" /><title>floor</title></head><body>"
            f"<script type=\"application/json\" id=\"report-data\">{embed_json(data)}</script>"
            "<script>JSON.parse(document.getElementById('report-data').textContent);"
            "document.body.setAttribute('data-ready','1');</script></body></html>")


DRAWN = """
const done = arguments[arguments.length - 1];
const ready = () => document.body && document.body.getAttribute('data-ready') === '1';
const finish = () => requestAnimationFrame(() => requestAnimationFrame(() => {
  document.body.offsetHeight;
  done([performance.now(), document.querySelectorAll('#mbody tr.row').length,
        document.querySelectorAll('#charts .chart').length]);
}));
(function wait() { if (ready() && document.readyState === 'complete') finish(); else setTimeout(wait, 5); })();
"""


def measure(browser, path: Path, fragment: str) -> tuple[float, int, int]:
    browser.driver.get("about:blank")
    browser.open(path, fragment)
    ms, rows, charts = browser.driver.execute_async_script(DRAWN)
    return ms, rows, charts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus", nargs="?", default=str(REPO.parent / "shared" / "corpus"))
    ap.add_argument("--target", action="append", default=None)
    ap.add_argument("--estimator", default="analytic")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "build" / "bench-html" / "audit.html"))
    ap.add_argument("--page", default=None, help="measure this page in the browser (no build)")
    args = ap.parse_args(argv)
    targets = args.target or ["all"]

    if args.page:
        out = Path(args.page)
        data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>',
                                    out.read_text(encoding="utf-8"), re.S).group(1))
        floor = out.with_name("floor.html")
        floor.write_text(blank_page(data), encoding="utf-8")
        return browse(args, out, floor, data["summary"])
    result, audit, data, page, (t_check, t_audit, t_page) = build(args.corpus, targets, args.estimator)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    floor = out.with_name("floor.html")
    floor.write_text(blank_page(data), encoding="utf-8")
    size = len(page.encode("utf-8"))
    data_size = len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    naive = unaggregated_bytes(audit)
    ours = sum(len(json.dumps(data[k], separators=(",", ":"))) for k in ("needs", "configs")) + \
        sum(len(json.dumps(t["en"], separators=(",", ":"))) for t in data["tables"])
    s = data["summary"]
    print(f"input: {len(result.tables)} files, {s['entries']} entries, {len(audit.columns)} device classes "
          f"(targets {targets}), estimator {args.estimator}; {len(audit.configs)} distinct configs, "
          f"{len(audit.needs)} distinct (kernel, config, class) figures, {len(audit.fixes)} fixes planned")
    print(f"build: check + fix planning {t_check:.1f} s, audit {t_audit:.1f} s, page {t_page:.2f} s")
    print(f"file: {size / 1e6:.2f} MB ({size} bytes; limit {LIMIT_BYTES}: {size / LIMIT_BYTES:.2f}x), "
          f"embedded data {data_size / 1e6:.2f} MB")
    print(f"entries and figures: aggregated {ours / 1e6:.2f} MB vs written out per entry {naive / 1e6:.2f} MB "
          f"(ratio {naive / max(ours, 1):.1f}x)")
    return browse(args, out, floor, s)


def browse(args, out: Path, floor: Path, s: dict) -> int:
    import browser as B
    from machine import cpu_name, load

    why = B.missing()
    if why:
        print(f"browser: not measured ({why})")
        return 0
    worst = s["worst"][0]["t"] if s["worst"] else 0
    views = [v.format(worst=worst) for v in VIEWS]
    browser = B.Browser()
    try:
        times: dict[str, list[float]] = {v: [] for v in ["floor"] + views}
        shapes = {}
        for _ in range(args.rounds):
            times["floor"].append(measure(browser, floor, "")[0])
            for v in views:
                ms, rows, charts = measure(browser, out, v)
                times[v].append(ms)
                shapes[v] = (rows, charts)
        errors = browser.console_errors()
    finally:
        browser.quit()
    print(f"browser: headless Chromium from file://, {args.rounds} interleaved rounds, ms from navigation "
          f"start to the view drawn and laid out (median / slowest; limit {LIMIT_MS} ms)")
    fmed = statistics.median(times["floor"])
    for v, ts in times.items():
        med, slow = statistics.median(ts), max(ts)
        extra = f"  rows in the DOM {shapes[v][0]}, charts {shapes[v][1]}" if v in shapes else ""
        print(f"  {v:<10} {med:7.0f} / {slow:7.0f}   {med / LIMIT_MS:.2f}x the limit, {med / fmed:.1f}x the floor{extra}")
    print(f"console errors: {len(errors)}")
    print(f"machine: {cpu_name()}, {load()}, Python {sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
