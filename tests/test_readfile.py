"""How :func:`tilefit.readfile.read_bytes` reads: a regular file in one read of its size and one
byte more, and every byte of a file whose reads come back short (as /proc and sysfs files do) or
whose size fstat does not know."""

from __future__ import annotations

import os

import pytest

from tilefit import readfile
from tilefit.readfile import read_bytes


def _counting_reads(monkeypatch, most: int | None = None) -> list[int]:
    asked: list[int] = []
    real = os.read

    def read(fd, n):
        asked.append(n)
        return real(fd, n if most is None else min(n, most))
    monkeypatch.setattr(readfile.os, "read", read)
    return asked


def test_a_file_is_read_in_one_read(tmp_path, monkeypatch):
    (tmp_path / "t.json").write_bytes(b'{"1": {}}' * 1000)
    asked = _counting_reads(monkeypatch)
    assert read_bytes(tmp_path / "t.json") == b'{"1": {}}' * 1000
    assert asked == [9001]
    (tmp_path / "empty.json").write_bytes(b"")
    asked.clear()
    assert read_bytes(tmp_path / "empty.json") == b"" and asked == [1]


def test_short_reads_before_the_end_read_on(tmp_path, monkeypatch):
    (tmp_path / "t.json").write_bytes(bytes(range(256)) * 4)
    asked = _counting_reads(monkeypatch, most=100)
    assert read_bytes(tmp_path / "t.json") == bytes(range(256)) * 4
    assert len(asked) == 11  # ten full reads of 100 and the last one of 24, which ends where fstat said


@pytest.mark.skipif(not os.path.isfile("/proc/self/status"), reason="no procfs")
def test_a_file_fstat_calls_empty_is_read_to_its_end():
    with open("/proc/self/status", "rb") as fh:
        want = fh.read().split(b"\n")[0]
    assert os.stat("/proc/self/status").st_size == 0
    assert read_bytes("/proc/self/status").split(b"\n")[0] == want
