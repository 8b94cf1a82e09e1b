"""The engine skips the target rules silent where an entry's variants fit (SMEM001, EST001, CMP001:
``Rule.silent_when_variants_fit``) after one look at the variants (``engine.variants_fit``): on
corpus tables judged for the consumer cards, the findings are those of a run that calls every rule."""

from __future__ import annotations

import dataclasses

from tilefit import engine as engine_module
from tilefit.api import CheckOptions, build_engine, run_check
from tilefit.config import Settings
from tilefit.rules import RULES

from corpus_tables import triton_tables


def _check(paths, cache_dir, monkeypatch, estimator):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("TILEFIT_JOBS", "1")
    settings = Settings()
    opts = CheckOptions(targets=["consumer"], estimator=estimator)
    result = run_check([str(p) for p in paths], opts, settings, build_engine(settings, opts))
    return [dataclasses.asdict(d) for d in result.diagnostics]


def test_the_silent_rules_are_the_variant_rules():
    silent = sorted(code for code, cls in RULES.items() if cls.silent_when_variants_fit)
    assert silent == ["CMP001", "EST001", "SMEM001"]


def test_skipping_where_the_variants_fit_changes_no_finding(corpus_files, tmp_path, monkeypatch):
    paths = corpus_files[::6]  # about 200 tables of every family and engine
    real = engine_module.variants_fit
    looks = []

    def counted(*args):
        fit = real(*args)
        looks.append(fit)
        return fit

    # the default estimator (auto, deferring its compiles; the rule examples run the analytic one)
    monkeypatch.setattr(engine_module, "variants_fit", counted)
    skipped = _check(paths, tmp_path / "skip", monkeypatch, "auto")
    assert looks.count(True) > 1000 and looks.count(False) > 10, "the screen was not exercised both ways"
    monkeypatch.setattr(engine_module, "variants_fit", lambda *args: False)  # every rule called
    called = _check(paths, tmp_path / "all", monkeypatch, "auto")
    assert {"SMEM001", "EST001"} <= {row["code"] for row in called}
    assert skipped == called


def test_the_rules_that_read_no_variants_find_the_same_without_them(corpus_files):
    """``Rule.reads_variants = False`` is what lets the engine leave a fitting entry's variants
    unbuilt: those rules' findings on corpus entries are the same with the variants and without."""
    from tilefit.rules.base import EntryContext, FileContext, Scope, TargetContext
    from tilefit.device_db import load_database
    from tilefit.estimate import Estimator

    lean = [cls(None) for cls in RULES.values() if cls.scope is Scope.TARGET and not cls.reads_variants]
    assert sorted(r.code for r in lean) == ["DEV002", "THR001", "VAL005"]
    db, est = load_database(), Estimator("analytic")
    devices = [db.get(k) for k in ("rtx3090", "rtx4090", "rtx5090", "mi300x", "h100-sxm")]
    compared = 0
    for _path, table in triton_tables(corpus_files, 25):
        meta = table.meta
        fctx = FileContext(table=table, db=db, named_device=None, engine=meta.engine)
        for key, entry in list(table.live_entries())[:4]:
            ectx = EntryContext(fctx, key, entry)
            for dev in devices:
                variants = engine_module.kernel_variants(meta, entry, dev.arch, dev.vendor, meta.engine)
                for rule in lean:
                    with_ = list(rule.check(TargetContext(ectx, dev, (dev,), variants, est)))
                    without = list(rule.check(TargetContext(ectx, dev, (dev,), (), est)))
                    assert with_ == without, (rule.code, path.name, key)
                    compared += bool(variants)
    assert compared > 500


def test_entries_that_differ_only_in_the_group_share_one_screen(corpus, tmp_path, monkeypatch):
    """A table whose entries come in copies that differ only in ``GROUP_SIZE_M`` (one copy's value
    outside its domain: not launched, VAL003) gets the findings of a run that shares nothing,
    building fewer variants."""
    import json

    src = next(corpus.rglob("E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"))
    doc = json.loads(src.read_text(encoding="utf-8"))
    rows = {k: v for k, v in doc.items() if isinstance(v, dict)}
    out, n = {}, 1
    for entry in rows.values():
        for group in (0, entry["GROUP_SIZE_M"], 1, 32):  # the unlaunched copy first
            out[str(n)] = dict(entry, GROUP_SIZE_M=group)
            n += 1
    table = tmp_path / "t" / src.name
    table.parent.mkdir()
    table.write_text(json.dumps(out, indent=4), encoding="utf-8")
    real = engine_module.kernel_variants
    built = []

    def counted(*args):
        built.append(args[1])
        return real(*args)

    monkeypatch.setattr(engine_module, "kernel_variants", counted)
    shared = _check([table], tmp_path / "shared", monkeypatch, "auto")
    shared_built = len(built)
    built.clear()
    # each entry its own screen: nothing shared between copies
    monkeypatch.setattr(engine_module.Engine, "_group_free_id", lambda self, meta, entry, eid: ("alone", eid))
    alone = _check([table], tmp_path / "alone", monkeypatch, "auto")
    assert shared == alone
    assert shared_built < len(built)
    codes = {(row["pointer"], row["code"]) for row in shared}
    assert {"SMEM001", "VAL003"} <= {c for _, c in codes}
    for p, c in codes:  # an unlaunched copy is never judged for shared memory
        if c == "SMEM001":
            assert out[p.split("/")[1]]["GROUP_SIZE_M"] != 0


def test_the_variants_of_a_table_that_never_swaps_are_the_same_on_every_arch(corpus_files):
    """The engine memoises an entry's variants per (whether A and B may swap there, vendor)
    (``serving.launch.swap_can_apply``): a table of an engine and dtype that never swap launches the
    same kernels on sm_90 as on the consumer cards, so the device the file names shares them with
    the extra targets; a table that may swap (vLLM fp8 fused MoE) does not."""
    from tilefit.serving.launch import swap_can_apply
    from tilefit.variants import dtype_path

    same = swapped = 0
    for _path, table in triton_tables(corpus_files, 3):
        meta = table.meta
        for _key, entry in list(table.live_entries())[:40]:
            hopper = engine_module.kernel_variants(meta, entry, "sm_90", "NVIDIA", meta.engine)
            for arch in ("sm_89", "sm_120", "sm_121"):
                other = engine_module.kernel_variants(meta, entry, arch, "NVIDIA", meta.engine)
                if not swap_can_apply(meta.engine, dtype_path(meta)):
                    assert other == hopper, (meta.engine, meta.dtype, entry, arch)
                    same += bool(hopper)
                elif other != hopper:
                    swapped += 1
                    assert any(v.spec.swap_ab for v in hopper) and not any(v.spec.swap_ab for v in other)
    assert same > 1000 and swapped > 10, (same, swapped)
