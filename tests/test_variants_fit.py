"""The engine skips the target rules silent where an entry's variants fit (SMEM001, EST001, CMP001:
``Rule.silent_when_variants_fit``) after one look at the variants (``engine.variants_fit``): on
corpus tables judged for the consumer cards, the findings are those of a run that calls every rule."""

from __future__ import annotations

import dataclasses

from tilefit import engine as engine_module
from tilefit.api import CheckOptions, build_engine, run_check
from tilefit.config import Settings
from tilefit.rules import RULES


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
