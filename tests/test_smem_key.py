"""The engine model's answers are shared across the launch-order group (``KernelSpec.smem_key``):
checked on the corpus's own entries that the answer a spec gets alone equals the answer of the
same spec with another ``GROUP_SIZE_M`` (each asked of a fresh model, so no memo joins them), and
that one model answers both with one object (no Triton, nothing compiled)."""

from __future__ import annotations

import pytest

from tilefit.kernels.spec import KernelSpec
from tilefit.smem.engine_model import EngineModel
from tilefit.variants import kernel_variants

from corpus_tables import triton_tables

ARCHS = (("sm_89", "NVIDIA"), ("sm_120", "NVIDIA"), ("sm_86", "NVIDIA"), ("sm_90", "NVIDIA"),
         ("gfx942", "AMD"))


def _regrouped(spec: KernelSpec, group: int) -> KernelSpec:
    return spec.evolve(tile=tuple((k, group if k == "GROUP_SIZE_M" else v) for k, v in spec.tile))


@pytest.fixture(scope="module")
def corpus_specs(corpus_files) -> list[tuple[KernelSpec, str]]:
    """Distinct (engine spec, arch) of every 8th corpus table's entries on five archs."""
    seen: dict[tuple, tuple[KernelSpec, str]] = {}
    for _path, table in triton_tables(corpus_files, 8):
        meta = table.meta
        for _key, entry in table.live_entries():
            for arch, vendor in ARCHS:
                for v in kernel_variants(meta, entry, arch, vendor, meta.engine):
                    if v.spec.engine and v.spec.get("GROUP_SIZE_M") is not None:
                        seen.setdefault((v.spec.smem_key, arch), (v.spec, arch))
    return list(seen.values())


def test_the_corpus_reaches_many_grouped_engine_specs(corpus_specs):
    assert len(corpus_specs) > 1000
    assert len({spec.kernel for spec, _ in corpus_specs}) >= 3


def test_an_answer_does_not_depend_on_the_group(corpus_specs):
    differ = []
    for spec, arch in corpus_specs:
        other = _regrouped(spec, 1 if spec.get("GROUP_SIZE_M") != 1 else 64)
        assert other.smem_key == spec.smem_key and other != spec
        alone, regrouped = EngineModel().answer(spec, arch), EngineModel().answer(other, arch)
        failure, refailure = EngineModel().compile_failure(spec, arch), EngineModel().compile_failure(other, arch)
        if alone != regrouped or failure != refailure:
            differ.append((spec.key(), arch, alone, regrouped, failure, refailure))
    assert not differ, differ[:3]


def test_one_model_answers_specs_of_two_groups_once(corpus_specs):
    model = EngineModel()
    spec, arch = next((s, a) for s, a in corpus_specs if model.answer(s, a) is not None)
    assert model.answer(_regrouped(spec, 3 if spec.get("GROUP_SIZE_M") != 3 else 5), arch) is model.answer(spec, arch)


def test_the_key_keeps_every_other_field():
    spec = KernelSpec("fused_moe", "bf16", (("BLOCK_SIZE_K", 64), ("BLOCK_SIZE_M", 16), ("BLOCK_SIZE_N", 64),
                                            ("GROUP_SIZE_M", 8)), engine="vllm")
    assert spec.smem_key != spec.evolve(tile=(("BLOCK_SIZE_K", 128),) + spec.tile[1:]).smem_key
    assert spec.smem_key != spec.evolve(num_stages=4).smem_key
    assert spec.smem_key != spec.evolve(triton="3.4").smem_key
    assert spec.smem_key != spec.evolve(engine="sglang").smem_key
    # the memo is the object's own: an evolved spec builds its key again, and a pickle carries none
    import pickle

    assert "_smem_key" not in spec.evolve(num_stages=4).__dict__
    assert "_smem_key" not in pickle.loads(pickle.dumps(spec)).__dict__
