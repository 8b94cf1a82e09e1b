"""The fixer over a copy of the real corpus for the consumer targets (the 99 KB cards).

Every changed file parses, passes ``check`` for those targets (no SMEM001 left), differs from
the original only inside the edited values (plus inserted members), and a second run is a no-op.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from tilefit.api import CheckOptions, run_check
from tilefit.app import run_fix
from tilefit.fix.edits import apply_edits
from tilefit.jsonpos import JsonDocument

OPTS = dict(targets=["consumer"], estimator="analytic")


@pytest.fixture(scope="module")
def fixed_corpus(corpus, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFIT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    root = tmp_path_factory.mktemp("fixcorpus") / "corpus"
    shutil.copytree(corpus, root)
    for p in root.rglob("*.json"):  # the shared corpus is read-only; the copy must be writable
        p.chmod(0o644)
    before = run_check([str(root)], CheckOptions(**OPTS))
    start = time.perf_counter()
    result = run_fix([str(root)], CheckOptions(**OPTS))
    elapsed = time.perf_counter() - start
    yield root, before, result, elapsed
    mp.undo()


def _left(diagnostics):
    """SMEM001/THR001 still reported: none. (Once left: up to 7 SGLang ``USE_TMA`` entries of the
    Triton 3.7.1 folder's B300 and H100 tables, while SGLang's TMA forms were not proven on sm_120
    -- proven since 2026-12-02 -- and five entries of SGLang's ``triton_3_5_1`` H100 table
    E=128,N=1856: the planner's per-entry memo had no Triton folder in its key, so the plan of its
    ``triton_3_4_0`` twin, judged first and answered "nothing fits" on sm_120 under Triton 3.4,
    was reused for it; see test_one_table_under_two_triton_folders_is_planned_per_release.)"""
    left = [d for d in diagnostics if d.code in ("SMEM001", "THR001")]
    assert not left, [(d.path, d.pointer, d.message) for d in left]
    return left


def test_fix_run_has_no_errors_and_fixes_every_smem001(fixed_corpus):
    _root, before, result, elapsed = fixed_corpus
    assert not result.errors
    smem_before = sum(1 for d in before.diagnostics if d.code == "SMEM001")
    assert smem_before > 1000
    gap = _left(result.check.diagnostics)
    assert result.fixed["SMEM001"] == smem_before - len([d for d in gap if d.code == "SMEM001"])
    assert len(result.files) > 300
    # how long it takes is measured by bench/bench_fix.py, not here: a timed assertion failed
    # whenever the shared machine was loaded (498 s at load 9)


def test_changed_files_parse_and_pass_check(fixed_corpus):
    root, _before, result, _ = fixed_corpus
    after = run_check([str(root)], CheckOptions(**OPTS))
    _left(after.diagnostics)
    for ff in result.files:
        data = open(ff.path, "rb").read()
        assert data == ff.new
        JsonDocument.parse(data)
        json.loads(data)
    # nothing new appeared anywhere: the remaining findings are the ones the corpus always had
    codes_before = {(d.path, d.code) for d in _before.diagnostics if d.code != "SMEM001"}
    gap = {(d.path, d.code) for d in _left(after.diagnostics)}
    assert {(d.path, d.code) for d in after.diagnostics} - gap <= codes_before


def test_only_values_change(fixed_corpus):
    _root, _before, result, _ = fixed_corpus
    for ff in result.files:
        old, new = ff.original, ff.new
        doc = JsonDocument.parse(old)
        edits = sorted((e for f in ff.fixes for e in f.edits), key=lambda e: e.start_offset)
        rebuilt, applied = apply_edits(old, edits)
        assert rebuilt == new and len(applied) == len(edits)
        # bytes outside the edit spans are identical, in order
        pos_old = pos_new = 0
        for e in edits:
            keep = e.start_offset - pos_old
            assert old[pos_old:e.start_offset] == new[pos_new:pos_new + keep], ff.path
            pos_new += keep + len(e.content.encode())
            pos_old = e.end_offset
        assert old[pos_old:] == new[pos_new:]
        # each replaced span is exactly one number of the original (insertions replace nothing)
        for e in edits:
            span = old[e.start_offset:e.end_offset]
            if span:
                assert span.isdigit() and e.content.isdigit(), (ff.path, span, e.content)
            else:
                assert e.content.startswith(",")
        # line endings and the final newline state are kept
        assert old.count(b"\r\n") == new.count(b"\r\n")
        assert old.endswith(b"\n") == new.endswith(b"\n")
        # the edited entries are exactly the planned ones, keys in the original order
        new_value = json.loads(new)
        for plan in ff.plans:
            assert new_value[plan.key] == plan.entry
            assert list(new_value[plan.key])[:len(plan.original)] == list(plan.original)
        assert list(new_value) == [k for k, _ in doc.value.pairs] if hasattr(doc.value, "pairs") else list(doc.value)


def test_fixes_respect_the_kernel_constraints(fixed_corpus):
    from tilefit.families import classify
    from tilefit.fix.space import grid_for, table_values

    _root, _before, result, _ = fixed_corpus
    for ff in result.files:
        meta = classify(ff.path)
        original = json.loads(ff.original)
        own = table_values(v for k, v in original.items() if isinstance(v, dict))
        grid = grid_for("AMD" if "AMD" in ff.path else "NVIDIA")
        for plan in ff.plans:
            for k, v in plan.changes.items():
                # only values an engine's tuner searches or the table itself already uses
                assert v in grid.get(k, ()) or v in own.get(k, ()), (ff.path, plan.key, k, v)
                if k.startswith("BLOCK_SIZE") and v not in own.get(k, ()):
                    assert 16 <= v <= 256 and v & (v - 1) == 0
                if k == "BLOCK_SIZE_K" and meta.block_shape:
                    assert meta.block_shape[1] % v == 0


def test_second_run_is_a_no_op(fixed_corpus):
    root, _before, first, _ = fixed_corpus
    snapshot = {p: p.read_bytes() for p in root.rglob("*.json")}
    second = run_fix([str(root)], CheckOptions(**OPTS))
    assert not second.files and not second.errors
    assert {p: p.read_bytes() for p in root.rglob("*.json")} == snapshot


MOE = "sglang-0.5.23/sglang/srt/layers/moe/moe_runner/triton_utils/configs"
# SGLang's B300 table of the triton_3_7_1 folder: its USE_TMA entries offend on the consumer cards.
# Since the TMA forms are proven on every arch (2026-12-03) Triton 3.5 and 3.9 plan every SGLang
# table of the corpus alike (104 tables of the triton_3_5_1/triton_3_7_1 folders fixed under 3.4,
# 3.5 and 3.9: no entry planned differently), so the test makes 3.5's figures differ itself: the
# engine model answers a 3.5 spec 8 KiB larger, which moves the plans of the entries near the limit.
TWIN = ("triton_3_7_1", "E=32,N=1792,device_name=NVIDIA_B300_SXM6_AC.json")
RELEASES = ("triton_3_5_1", "triton_3_9_0")


def _fixed_copies(corpus, tmp_path, folders):
    root = tmp_path / "-".join(folders)
    for folder in folders:
        dest = root / MOE / folder / TWIN[1]
        dest.parent.mkdir(parents=True)
        shutil.copyfile(corpus / MOE / TWIN[0] / TWIN[1], dest)
    result = run_fix([str(root)], CheckOptions(**OPTS))
    assert not result.errors
    return {f: json.loads((root / MOE / f / TWIN[1]).read_bytes()) for f in folders}


def test_one_table_under_two_triton_folders_is_planned_per_release(corpus, tmp_path, monkeypatch):
    """The planner's per-entry memo is keyed by the table's Triton folder: one run over the same
    table in two release folders plans each copy as a run over it alone does. (Keyed without it,
    the first folder's plan was reused for the second: with SGLang's triton_3_4_0 H100 table
    E=128,N=1856 planned first, five entries of its triton_3_5_1 twin were left unfixed, 3.4's
    answer on sm_120 being 'nothing fits'.)"""
    import dataclasses

    from tilefit.smem import engine_model

    real = engine_model.EngineModel.answer

    def answer(self, spec, arch, forms_only=False):
        got = real(self, spec, arch, forms_only)
        if got is not None and got.shared_bytes is not None and str(spec.triton or "").startswith("3.5"):
            return dataclasses.replace(got, shared_bytes=got.shared_bytes + 8192)
        return got

    monkeypatch.setattr(engine_model.EngineModel, "answer", answer)
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(tmp_path / "cache"))
    original = json.loads((corpus / MOE / TWIN[0] / TWIN[1]).read_bytes())
    alone = {f: _fixed_copies(corpus, tmp_path, [f])[f] for f in RELEASES}
    changed = {k for k in original if original[k] != alone[RELEASES[0]][k] and original[k] != alone[RELEASES[1]][k]}
    assert any(alone[RELEASES[0]][k] != alone[RELEASES[1]][k] for k in changed)  # else this pair tests nothing
    assert _fixed_copies(corpus, tmp_path, list(RELEASES)) == alone
