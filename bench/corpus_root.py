"""Where the benchmark scripts find the corpus, as the tests do: ``$TILEFIT_CORPUS``,
``../shared/corpus``, or the byte-identical copy in tests/data/corpus.tar.xz, extracted."""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def corpus_root(tmp: Path) -> Path:
    """The corpus folder; the archive is extracted under ``tmp`` when it is the one at hand."""
    env = os.environ.get("TILEFIT_CORPUS")
    if env:
        return Path(env)
    shared = REPO.parent / "shared" / "corpus"
    if (shared / "README.md").is_file():
        return shared
    with tarfile.open(REPO / "tests" / "data" / "corpus.tar.xz") as tar:
        tar.extractall(tmp / "extracted", filter="data")
    return tmp / "extracted" / "corpus"
