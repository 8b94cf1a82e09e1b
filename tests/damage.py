"""Damaged copies of a record the result cache's folder keeps (``<tag> <digest> [fields] <SHA-256>``
then the body: :func:`tilefit.reporters.outputcache.write_record`), for the tests of the kept
reports and the kept html page: each damage must be a miss, drawn again and kept again."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable


def damaged_records(stored: bytes, tag: bytes, old: bytes, new: bytes) -> list[tuple[str, bytes]]:
    """``(what, bytes)`` of each damage of ``stored`` (a record written as ``tag``): emptied, cut
    short, cut short with a byte that is not UTF-8, one ``old`` byte string of the body turned
    into ``new`` (its SHA-256 no longer matches), the header's SHA-256 of another body, the tag of
    another version."""
    head, body = stored.split(b"\n", 1)
    fields = head.split(b" ")
    assert b" ".join(fields[:2]) == tag and old in body, (head, old)
    name, version = tag.rsplit(b" ", 1)
    other_sha = hashlib.sha256(body + b"x").hexdigest().encode()
    return [
        ("empty", b""),
        ("cut short", head + b"\n" + body[:-1]),
        ("cut short, a byte not UTF-8", head + b"\n" + body[:-1] + b"\xff"),
        ("a byte of the body changed", head + b"\n" + body.replace(old, new, 1)),
        ("another SHA-256 in the header", b" ".join(fields[:-1] + [other_sha]) + b"\n" + body),
        ("another version", head.replace(tag, name + b" " + str(int(version) + 1).encode(), 1) + b"\n" + body),
    ]


def each_damage(file: Path, tag: bytes, old: bytes, new: bytes, run: Callable[[str], None]) -> None:
    """Write each of :func:`damaged_records` of ``file`` in turn and call ``run(what)`` (the
    caller's asserts: the output as fresh); after each, the record must be kept again as it was."""
    stored = file.read_bytes()
    for what, damage in damaged_records(stored, tag, old, new):
        file.write_bytes(damage)
        run(what)
        assert file.read_bytes() == stored, f"{what}: not kept again"
