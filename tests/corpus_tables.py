"""The corpus's Triton tables as the engine reads them, for tests that walk a sample of them."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Sequence

from tilefit.families import classify
from tilefit.tables import ConfigTable, read_table


def triton_tables(corpus_files: Sequence[Path], every: int) -> Iterator[tuple[Path, ConfigTable]]:
    """(path, table) of every ``every``-th corpus file that is a Triton tuning table (a family the
    kernel registry models) whose document is a JSON object."""
    for path in corpus_files[::every]:
        meta = classify(str(path))
        if meta is None or not meta.is_triton_table:
            continue
        table = read_table(str(path), meta=meta)
        if table.doc is None or not isinstance(table.value, dict):
            continue
        yield path, table
