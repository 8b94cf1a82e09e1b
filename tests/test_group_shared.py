"""An entry's merged target findings shared with the entries that differ from it only in the
launch-order group (``GROUP_SIZE_M``) where every rule that judged it reads nothing of the group
(``Rule.reads_launch_group``, see ``Engine._merged_findings``), and such a rule's findings memoised
per group-free entry (per table kernel for a rule that reads nothing of the entry,
``Rule.reads_entry``): the findings are those of runs that share nothing, and the sharing keys
tell the file's device classes and the tables' dtypes apart."""

from __future__ import annotations

import dataclasses
import json

from tilefit import engine as engine_module
from tilefit.api import CheckOptions, build_engine, run_check
from tilefit.config import Settings
from tilefit.rules import RULES

from corpus_tables import triton_tables


def _check(paths, cache_dir, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("TILEFIT_JOBS", "1")
    settings = Settings()
    opts = CheckOptions(targets=["consumer"])
    engine = build_engine(settings, opts)
    result = run_check([str(p) for p in paths], opts, settings, engine)
    return [dataclasses.asdict(d) for d in result.diagnostics], engine


def test_the_rules_blind_to_the_group_find_the_same_whatever_the_group(corpus_files):
    """``Rule.reads_launch_group = False`` is what lets the engine share an entry's findings with its
    group copies: those rules' findings on corpus entries are the same for every group value, and
    for the entry without the group. A rule that reads the variants is given each copy's own (the
    engine shares among the copies its group-free id keeps together: launched with a group in the
    domain, or not an integer) and reads them through estimates that hold for every group
    (``Estimator.group_free``)."""
    from tilefit.device_db import load_database
    from tilefit.estimate import Estimator, EstimatorUnavailable
    from tilefit.parameters import in_domain
    from tilefit.rules.base import EntryContext, FileContext, Scope, TargetContext

    blind = [cls(None) for cls in RULES.values() if cls.scope is Scope.TARGET and not cls.reads_launch_group]
    assert sorted(r.code for r in blind) == ["CMP001", "DEV002", "EST001", "SMEM001", "THR001", "VAL005"]
    db, est = load_database(), Estimator("analytic")
    devices = [db.get(k) for k in ("rtx3090", "rtx4090", "rtx5090", "mi300x", "h100-sxm")]
    compared = found = free = 0
    found_by_variants = set()
    for path, table in triton_tables(corpus_files, 20):
        meta = table.meta
        fctx = FileContext(table=table, db=db, named_device=None, engine=meta.engine)
        for key, entry in list(table.live_entries())[:3]:
            if not isinstance(entry, dict) or "GROUP_SIZE_M" not in entry:
                continue
            copies = [dict(entry, GROUP_SIZE_M=g) for g in (0, 1, 16, 64, "8")]
            copies.append({k: v for k, v in entry.items() if k != "GROUP_SIZE_M"})
            for dev in devices:

                def variants(e):
                    return engine_module.kernel_variants(meta, e, dev.arch, dev.vendor, meta.engine)

                def launched(e):  # what the engine's group-free id tells apart (Engine._group_free_id)
                    g = e.get("GROUP_SIZE_M")
                    return type(g) is not int or in_domain(meta.family, {"GROUP_SIZE_M": g})

                # the engine's screen asks the estimates first; it shares where they hold for every group
                for v in variants(entry):
                    try:
                        est.estimate(v.spec, dev.arch, dev.smem_per_block_optin)
                    except EstimatorUnavailable:
                        pass
                group_free = all(est.group_free(v.spec, dev.arch) for v in variants(entry))
                free += group_free
                for rule in blind:
                    if rule.reads_variants and not group_free:
                        continue
                    mine = variants(entry) if rule.reads_variants else ()
                    first = list(rule.check(TargetContext(EntryContext(fctx, key, entry), dev, (dev,), mine, est)))
                    found += bool(first)
                    if rule.reads_variants and first:
                        found_by_variants.add(rule.code)
                    for copy in copies:
                        theirs = ()
                        if rule.reads_variants:
                            if launched(copy) != launched(entry):
                                continue
                            theirs = variants(copy)
                        ctx = TargetContext(EntryContext(fctx, key, copy), dev, (dev,), theirs, est)
                        assert list(rule.check(ctx)) == first, (rule.code, path.name, key, copy)
                        compared += 1
    assert compared > 2000 and free > 100 and found > 0 and "SMEM001" in found_by_variants, (
        compared, free, found, found_by_variants)


def test_the_rules_blind_to_the_entry_find_the_same_for_every_entry(corpus_files):
    """``Rule.reads_entry = False`` lets the engine ask such a rule once per table kernel and device
    facts: its findings on every entry of corpus tables (launchable or not) are the first entry's."""
    from tilefit.device_db import load_database
    from tilefit.estimate import Estimator
    from tilefit.rules.base import EntryContext, FileContext, Scope, TargetContext

    blind = [cls(None) for cls in RULES.values() if cls.scope is Scope.TARGET and not cls.reads_entry]
    assert [r.code for r in blind] == ["DEV002"]
    db, est = load_database(), Estimator("analytic")
    devices = [db.get(k) for k in ("rtx3090", "rtx4090", "mi300x", "a100-sxm4-80gb")]
    compared = found = 0
    for path, table in triton_tables(corpus_files, 10):
        meta = table.meta
        fctx = FileContext(table=table, db=db, named_device=None, engine=meta.engine)
        entries = list(table.live_entries()) + [("x", {"BLOCK_SIZE_M": "16"})]
        for dev in devices:
            for unrunnable in (False, True):
                for rule in blind:
                    first = None
                    for key, entry in entries:
                        ctx = TargetContext(EntryContext(fctx, key, entry), dev, (dev,), (), est,
                                            extra_unrunnable=unrunnable)
                        got = list(rule.check(ctx))
                        if first is None:
                            first = got
                            found += bool(got)
                        assert got == first, (rule.code, path.name, key)
                        compared += 1
    assert compared > 5000 and found > 10


def test_group_copies_share_merged_findings_per_class_list(corpus, tmp_path, monkeypatch):
    """Three tables of the same entries in group copies: fp8 named for a device that runs fp8, fp8
    named for a device that does not (DEV002 on its own device) and bf16 named for that device:
    checked in one run they get the findings each gets alone with nothing shared, group copies
    took a copy's merged findings, and fewer rule checks ran. Fails when the sharing key leaves
    out the file's class list (the A100 table would take the H100 table's findings), the
    group-free entry, or the rule memo's kernel key its dtype (the bf16 table would take the fp8
    table's DEV002)."""
    src = next(corpus.rglob("E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json"))
    doc = json.loads(src.read_text(encoding="utf-8"))
    rows = [v for v in doc.values() if isinstance(v, dict)]
    out, n = {}, 1
    for entry in rows:
        for group in (entry["GROUP_SIZE_M"], 1, 32, 0):
            out[str(n)] = dict(entry, GROUP_SIZE_M=group)
            n += 1
    tables = []
    for i, name in enumerate(("E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json",
                              "E=8,N=7168,device_name=NVIDIA_A100-SXM4-80GB,dtype=fp8_w8a8.json",
                              "E=8,N=7168,device_name=NVIDIA_A100-SXM4-80GB.json")):
        path = tmp_path / f"t{i}" / name
        path.parent.mkdir()
        path.write_text(json.dumps(out, indent=4), encoding="utf-8")
        tables.append(path)
    together, engine = _check(tables, tmp_path / "together", monkeypatch)
    assert engine.group_merged_hits > 0  # copies took a copy's findings
    monkeypatch.setattr(engine_module.Engine, "_group_free_id", lambda self, meta, entry, eid: ("alone", eid))
    alone, checks = [], 0
    for i, path in enumerate(tables):
        rows_alone, lone = _check([path], tmp_path / f"alone{i}", monkeypatch)
        assert lone.group_merged_hits == 0
        alone.extend(rows_alone)
        checks += lone.rule_checks_memoised
    assert engine.rule_checks_memoised < checks / 2
    assert sorted(together, key=lambda r: (r["path"], r["pointer"] or "", r["code"], r["message"])) == \
        sorted(alone, key=lambda r: (r["path"], r["pointer"] or "", r["code"], r["message"]))
    dev002 = {(r["path"].split("/")[-2], r["severity"]) for r in together if r["code"] == "DEV002"}
    assert ("t1", "error") in dev002 and ("t0", "error") not in dev002 and ("t2", "error") not in dev002
