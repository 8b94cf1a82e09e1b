"""Which (kernel, dtype path) a check of the corpus judges on the AMD archs of the device database,
and how each is answered, per Triton release: nothing is compiled.

    python bench/amd_coverage.py --corpus ../shared/corpus [--target consumer ...]

The (spec, arch) pairs are those a ``tilefit check`` estimates (each file's own device, then
``--target consumer``: ``tilefit.app.touched_items``); each AMD pair is asked of the engine model of
the release its table names (an SGLang ``triton_X_Y_Z`` folder) or the installed one, with
``forms_only`` off (a stored compiled point answers first). A row per (kernel, engine, dtype key,
arch, release): entries, and how many are answered by a compiled point, a proven form, a form not
proven (with its reason), or nothing (the estimator then compiles or falls back to our reference
kernel).
"""

from __future__ import annotations

import argparse
import collections
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", action="append", required=True)
    args = ap.parse_args(argv)
    from tilefit import versions
    from tilefit.app import touched_items
    from tilefit.kernels import registry
    from tilefit.smem.engine_model import EngineModel

    installed = versions.major_minor(versions.installed_triton() or "3.9")
    models: dict[str, EngineModel] = {}
    rows: dict[tuple, collections.Counter] = collections.defaultdict(collections.Counter)
    why: dict[tuple, collections.Counter] = collections.defaultdict(collections.Counter)
    for spec, arch in touched_items(args.corpus):
        if not arch.startswith("gfx") or not spec.engine:
            continue
        rel = versions.major_minor(spec.triton) if spec.triton else installed
        model = models.setdefault(rel, EngineModel(rel))
        fam = registry.get(spec.kernel)
        key = (spec.kernel, spec.engine, "/".join(fam.form_dtypes(spec.reference)), arch, rel)
        rows[key]["entries"] += 1
        ans = model.answer(spec, arch)
        if ans is None:
            rows[key]["none"] += 1
        elif ans.compiled:
            rows[key]["compiled"] += 1
        elif ans.proven:
            rows[key]["proven"] += 1
        else:
            rows[key]["unproven"] += 1
            why[key][ans.detail.split(": ", 1)[-1][:160]] += 1
    print("| kernel | engine | dtype path | arch | Triton | entries | compiled point | proven form | form not proven | no answer | why not proven |")
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|---|")
    for key in sorted(rows):
        c = rows[key]
        reason = "; ".join(f"{n}x {t}" for t, n in why[key].most_common(2)) or "-"
        print(f"| {' | '.join(key)} | {c['entries']} | {c['compiled']} | {c['proven']} | {c['unproven']} | {c['none']} | {reason} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
