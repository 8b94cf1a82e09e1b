"""The per-file result cache: rows that name shared values, compaction, damaged files, and the
garbage collector's state around a run."""

from __future__ import annotations

import gc
import json

from tilefit.api import CheckOptions, run_check
from tilefit.config import Settings
from tilefit.model import Diagnostic, Position, Severity, Span
from tilefit.resultcache import FORMAT, ResultCache


def _diag(path, line, batch, message="OutOfResources on a10, a40: shared memory"):
    return Diagnostic(code="SMEM001", message=message, path=path,
                      span=Span(Position(line, 3), Position(line, 9), 10 * line, 10 * line + 6),
                      severity=Severity.ERROR, pointer=f"/{batch}/num_stages", target="a10",
                      data={"required_bytes": 147456, "targets": ["a10", "a40"], "archs": ["sm_86"],
                            "batch_size": batch}, fingerprint=f"fp{line}")


def test_round_trip_shares_values_in_the_file_but_not_between_diagnostics(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    diags = [_diag("a.json", 2, 1), _diag("a.json", 9, 1)]
    cache = ResultCache("k")
    cache.put("a.json", "d1", diags)
    cache.put("b.json", "d2", [_diag("b.json", 2, 1)])
    cache.save()
    stored = json.loads((tmp_path / "results" / "k.json").read_text())
    assert stored["values"].count("OutOfResources on a10, a40: shared memory") == 1
    assert len(stored["values"]) == 4  # one message, one pointer, one data object, no fix (None)

    again = ResultCache("k").get("a.json", "d1")
    assert again == diags
    assert again[0].data is not again[1].data
    assert again[0].data["targets"] is not again[1].data["targets"]
    assert ResultCache("k").get("a.json", "other digest") is None


def test_save_keeps_only_the_values_some_row_names(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    cache = ResultCache("k")
    cache.put("a.json", "d1", [_diag("a.json", 2, 1, message="old message")])
    cache.save()
    cache = ResultCache("k")
    cache.put("a.json", "d2", [_diag("a.json", 2, 1, message="new message")])
    cache.save()
    stored = json.loads((tmp_path / "results" / "k.json").read_text())
    assert "old message" not in stored["values"] and "new message" in stored["values"]
    assert ResultCache("k").get("a.json", "d2")[0].message == "new message"


def test_adopted_rows_store_what_put_of_their_diagnostics_would(tmp_path, monkeypatch):
    """A worker's rows (its own values) adopted by the run's cache give the diagnostics they
    were built from, with each value once among the cache's, in the file as put() writes it."""
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    worker = ResultCache.in_memory()
    a = [_diag("a.json", 2, 1, message="worker message"), _diag("a.json", 9, 2)]
    worker.put("a.json", "", a)
    worker.put("b.json", "", [_diag("b.json", 4, 1)])
    rows = ResultCache.in_memory(worker.entries, worker.values, trusted=True)
    cache = ResultCache("k")
    cache.put("c.json", "d3", [_diag("c.json", 2, 1)])  # values of its own first: the indices differ
    index: dict = {}
    cache.adopt("a.json", "d1", rows, index)
    cache.adopt("b.json", "d2", rows, index)
    assert cache.get("a.json", "d1") == a == rows.get("a.json", "")
    cache.save()
    put = ResultCache("p")
    put.put("c.json", "d3", [_diag("c.json", 2, 1)])
    put.put("a.json", "d1", a)
    put.put("b.json", "d2", [_diag("b.json", 4, 1)])
    put.save()
    assert (tmp_path / "results" / "k.json").read_text() == (tmp_path / "results" / "p.json").read_text()
    assert ResultCache("k").get("b.json", "d2") == [_diag("b.json", 4, 1)]


def test_the_entries_encoded_as_stored_give_the_file_json_dumps_writes(tmp_path, monkeypatch):
    """save() joins each entry's JSON text made when it was stored (put or adopted) while the
    rows are as stored, else it encodes the whole; either way the file holds the bytes of
    ``json.dumps`` of the records, compact."""
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    file = tmp_path / "results" / "k.json"

    def dumped(cache):
        entries, values = cache._compacted()
        return json.dumps({"format": FORMAT, "values": values, "files": entries}, separators=(",", ":"))

    worker = ResultCache.in_memory()
    worker.put("b.json", "", [_diag("b.json", 4, 1, message="\u00e9 worker")])
    cache = ResultCache("k")
    cache.put("a.json", "d1", [_diag("a.json", 2, 1), _diag("a.json", 9, 2)])
    cache.adopt("b.json", "d2", ResultCache.in_memory(worker.entries, worker.values, trusted=True), {})
    assert cache._texts_of(cache.entries) is not None  # the joined texts
    cache.save()
    assert file.read_text() == dumped(cache)
    # records read back, one file stored again: compacted, the whole encoded
    cache = ResultCache("k")
    cache.put("a.json", "d3", [_diag("a.json", 5, 1, message="new")])
    assert cache._texts_of(cache._compacted()[0]) is None
    cache.save()
    assert file.read_text() == dumped(cache)
    assert ResultCache("k").get("b.json", "d2") == [_diag("b.json", 4, 1, message="\u00e9 worker")]
    assert ResultCache("k").get("a.json", "d3") == [_diag("a.json", 5, 1, message="new")]


def test_a_damaged_cache_file_only_misses(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    (tmp_path / "results").mkdir()
    file = tmp_path / "results" / "k.json"
    row = ["SMEM001", 7, 2, 3, 2, 9, 20, 26, "error", 0, "a10", 0, "fp", 0]  # value 7 does not exist
    file.write_text(json.dumps({"format": FORMAT, "values": ["/1/num_stages"], "files": {"a.json": ["d1", [row]]}}))
    cache = ResultCache("k")
    assert cache.get("a.json", "d1") is None
    cache.put("b.json", "d2", [_diag("b.json", 2, 1)])
    cache.save()  # the damaged entry is dropped, the new one kept
    assert ResultCache("k").get("b.json", "d2") == [_diag("b.json", 2, 1)]
    assert ResultCache("k").get("a.json", "d1") is None
    file.write_text(json.dumps({"format": FORMAT, "values": {}, "files": []}))
    assert ResultCache("k").get("a.json", "d1") is None


def test_only_a_file_with_its_saved_digest_skips_row_validation(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    cache = ResultCache("k")
    assert cache.verified  # nothing read: every record is one put() wrote
    cache.put("a.json", "d1", [_diag("a.json", 2, 1)])
    cache.save()
    assert (tmp_path / "results-digests" / "k.sha256").is_file()
    again = ResultCache("k")
    assert again.verified and again.get("a.json", "d1") == [_diag("a.json", 2, 1)]
    # the same file changed after the save (a row naming a value that does not exist): the digest
    # no longer matches, the rows are validated and the bad one is a miss, as without a digest
    file = tmp_path / "results" / "k.json"
    stored = json.loads(file.read_text())
    stored["files"]["a.json"][1][0][1] = 99
    file.write_text(json.dumps(stored, separators=(",", ":")))
    damaged = ResultCache("k")
    assert not damaged.verified and damaged.get("a.json", "d1") is None


def test_run_check_restores_the_collector(tmp_path):
    (tmp_path / "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json").write_text(
        '{"1": {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}}')
    opts = CheckOptions(estimator="analytic", use_cache=False)
    assert gc.isenabled()
    run_check([str(tmp_path)], opts, Settings())
    assert gc.isenabled()
    gc.disable()
    try:
        run_check([str(tmp_path)], opts, Settings())
        assert not gc.isenabled()
    finally:
        gc.enable()


OVERFLOW = ('{"4096": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 32, '
            '"num_warps": 8, "num_stages": 4}, "8192": {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 128, '
            '"BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 1, "num_warps": 4, "num_stages": 6}}\n')


def test_json_format_takes_planned_fixes_from_the_cache(cli, tmp_path, monkeypatch):
    """--output-format json shows a fix per diagnostic: a warm run reads the plans from the
    result cache (no planning) and prints the same bytes; another fix margin plans again."""
    from tilefit.fix.planner import FixPlanner

    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    table = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    table.write_text(OVERFLOW)
    args = ("check", table, "--isolated", "-t", "rtx4090", "-t", "rtx5090", "--estimator", "analytic",
            "--output-format", "json")
    cold = cli(*args)
    doc = json.loads(cold.stdout)
    assert cold.exit_code == 1 and len(doc) >= 2 and all(d["fix"] and d["fix"]["edits"] for d in doc)
    planned = FixPlanner.plan_table

    def no_planning(self, *a, **k):
        raise AssertionError("planned again although the table and the settings did not change")

    monkeypatch.setattr(FixPlanner, "plan_table", no_planning)
    warm = cli(*args)
    assert warm.exit_code == 1 and warm.stdout == cold.stdout
    again = cli(*args, "--fix-margin", "1024")  # the planner's settings are in the key: it plans again
    assert again.exit_code == 2 and "planned again" in again.output
    monkeypatch.setattr(FixPlanner, "plan_table", planned)
    # the fix it shows is the one --fix writes, also when it came from the cache
    fixed = cli("check", table, "--isolated", "-t", "rtx4090", "-t", "rtx5090", "--estimator", "analytic", "--fix")
    assert fixed.exit_code == 0, fixed.output
    applied = OVERFLOW.encode()
    edits = {(e["start_offset"], e["end_offset"], e["content"]) for d in json.loads(warm.stdout)
             for e in d["fix"]["edits"]}
    for start, end, content in sorted(edits, reverse=True):
        applied = applied[:start] + content.encode() + applied[end:]
    assert table.read_bytes() == applied


def test_a_warm_json_run_does_not_import_the_fixers_graph_library(tmp_path):
    """A warm --output-format json run takes its plans from the cache: it neither builds nor
    walks a config graph, so networkx (a sixth of the warm run's time) stays unimported; a cold
    run, which plans, walks the config lattice without building its graph
    (``ConfigSpace.layers``/``neighbours``), so it does not import networkx either."""
    import os
    import subprocess
    import sys

    table = tmp_path / "E=128,N=768,device_name=NVIDIA_H100_80GB_HBM3,dtype=fp8_w8a8.json"
    table.write_text(OVERFLOW)
    code = ("import sys; from tilefit.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('networkx=%s' % ('networkx' in sys.modules))\n")
    env = dict(os.environ, TILEFIT_CACHE_DIR=str(tmp_path / "cache"))
    args = [sys.executable, "-c", code, "check", str(table), "--isolated", "-t", "rtx4090",
            "--estimator", "analytic", "--output-format", "json"]
    runs = [subprocess.run(args, capture_output=True, text=True, env=env) for _ in range(2)]
    assert [json.loads(r.stdout)[0]["fix"] is not None for r in runs] == [True, True]
    assert runs[0].stdout == runs[1].stdout
    assert [r.stderr.strip().rsplit("networkx=", 1)[-1] for r in runs] == ["False", "False"]


def test_data_objects_equal_in_python_but_not_in_json_get_values_of_their_own(tmp_path, monkeypatch):
    """A data object is indexed by a key (resultcache._data_key) that two objects share only
    where their JSON texts are equal: 1, 1.0 and true, 0.0 and -0.0, a string and a list of it
    are told apart, and data the key does not cover (a nested object, a list of numbers) by its
    repr; each diagnostic reads back its own data."""
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path))
    datas = [{"v": 1}, {"v": 1.0}, {"v": True}, {"v": 0.0}, {"v": -0.0}, {"v": "1"}, {"v": ["1"]},
             {"v": [1]}, {"v": [1.0]}, {"v": {"w": 1}}, {"v": {"w": True}}, {"v": None}, {"w": 1},
             {"v": 1, "w": 2}, {"w": 2, "v": 1}, {}, {"v": ["a", "b"]}, {"v": ("a", "b")}]
    span = Span(Position(1, 1), Position(1, 2), 0, 1)
    diags = [Diagnostic(code="X", message="m", path="a.json", span=span, severity=Severity.ERROR, pointer="/1",
                        data=dict(d), fingerprint="f") for d in datas]
    cache = ResultCache("k")
    cache.put("a.json", "d", diags + [Diagnostic(**{**vars(d), "data": dict(d.data)}) for d in diags])
    cache.save()
    stored = json.loads((tmp_path / "results" / "k.json").read_text())
    texts = [json.dumps(v) for v in stored["values"] if type(v) is dict]
    assert sorted(texts) == sorted({json.dumps(d) for d in datas})  # each JSON text once
    back = ResultCache("k").get("a.json", "d")
    want = [json.loads(json.dumps(d)) for d in datas]
    assert [json.dumps(d.data) for d in back] == [json.dumps(d) for d in want + want]
