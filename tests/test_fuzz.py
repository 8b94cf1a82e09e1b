"""Issue 12: the fuzzing / fault-injection pass, bounded for CI (about a minute).

Hypothesis mutates real corpus files (byte flips, truncation, huge and odd numbers, deep nesting,
byte-order marks, NUL bytes, odd and duplicated keys, line endings, whitespace, control
characters, FIFOs, folders, /dev/zero, empty and oversized files) and runs ``tilefit check`` in
every output format and ``--fix`` on each, next to an unmodified table; the properties are
:func:`fuzzing.run_case`'s. Derandomised (the same cases every run); ``bench/fuzz.py`` runs the
same harness for longer with fresh randomness and records its counts in bench/RESULTS.md.
A failure prints the mutation; replay it with ``python tests/fuzzing.py KIND AT SIZE CHOICE SAMPLE``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import fuzzing  # noqa: E402

MUTATIONS = st.builds(fuzzing.Mutation, kind=st.sampled_from(fuzzing.KINDS),
                      at=st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
                      size=st.integers(min_value=0, max_value=7), choice=st.integers(min_value=0, max_value=40))
# 25 drawn cases beside every kind once (test_every_mutation_kind_once): the draw adds mixes of
# samples and sizes; bench/fuzz.py runs thousands
EXAMPLES = int(os.environ.get("TILEFIT_FUZZ_EXAMPLES", "25"))


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("TILEFIT_CACHE_DIR", str(tmp_path_factory.mktemp("fuzz-cache")))
    yield tmp_path_factory.mktemp("fuzz")
    mp.undo()


@pytest.fixture(scope="module")
def baseline():
    return {}


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(sample=st.sampled_from(fuzzing.SAMPLES), mutation=MUTATIONS)
def test_mutated_corpus_files_never_break_check_or_fix(corpus, work, baseline, sample, mutation):
    outcome = fuzzing.run_case(corpus, sample, mutation, baseline, work)
    assert not outcome.problems, f"{mutation} on {sample}:\n" + "\n".join(outcome.problems)


@pytest.mark.parametrize("kind", fuzzing.KINDS)
def test_every_mutation_kind_once(corpus, work, baseline, kind):
    """Each kind on the offending H100 table, so none is left out by the draw."""
    outcome = fuzzing.run_case(corpus, fuzzing.SAMPLES[0], fuzzing.Mutation(kind, 0.4, 3, 5), baseline,
                               work)
    assert not outcome.problems, "\n".join(outcome.problems)
