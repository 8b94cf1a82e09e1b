"""``kernel_variants`` remembers its answers by the inputs that decide them (the name's fields the
families read, the tile, warps, stages, arch, engine, ``USE_TMA``), shared by entries of other
tables: on every Triton table of the corpus, for an arch of each family, each answer is the one
computed afresh."""

from __future__ import annotations

import json

from tilefit import variants
from tilefit.families import classify

ARCHS = (("sm_90", "NVIDIA"), ("sm_120", "NVIDIA"), ("gfx942", "AMD"))


def test_remembered_variants_are_the_computed_ones(corpus_files, monkeypatch):
    memo: dict = {}
    monkeypatch.setattr(variants, "_MEMO", memo)
    asked = shared = launched = 0
    for path in corpus_files[::3]:  # about 400 tables of every family and engine
        meta = classify(path)
        if meta is None or not meta.is_triton_table:
            continue
        doc = json.loads(path.read_bytes())
        if not isinstance(doc, dict):
            continue
        for entry in doc.values():
            for arch, vendor in ARCHS:
                before = len(memo)
                got = variants.kernel_variants(meta, entry, arch, vendor, meta.engine)
                asked += 1
                if got:
                    launched += 1
                    shared += len(memo) == before  # answered from the memo
                with monkeypatch.context() as m:
                    m.setattr(variants, "_MEMO", {})  # computed afresh
                    assert variants.kernel_variants(meta, entry, arch, vendor, meta.engine) == got, (path, entry, arch)
    assert launched > 2000 and shared > launched // 2, (asked, launched, shared)
