"""A baseline file of fingerprints: grandfather existing findings, fail only on new ones.

JSON has no comments, so there is no ``# noqa`` for a config entry; a committed baseline
(detect-secrets' model) is the main way to accept a finding. Fingerprints do not contain line
numbers, so reformatting a file keeps its baseline valid, and paths relative to the project
root, so it holds whatever folder tilefit runs from. Because pre-commit passes subsets of files,
``--update-baseline`` keeps the records of files that were not part of this run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .atomicfile import write_atomic
from .paths import project_path

FORMAT = 1


class BaselineError(ValueError):
    pass


@dataclass(frozen=True)
class BaselineRecord:
    code: str
    path: str
    pointer: str | None
    target: str | None
    fingerprint: str
    message: str = ""


def load_baseline(path: str) -> list[BaselineRecord]:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline {path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise BaselineError(f"baseline {path}: expected an object with a 'findings' list")
    out = []
    for i, rec in enumerate(data["findings"]):
        try:
            out.append(BaselineRecord(code=rec["code"], path=rec["path"], pointer=rec.get("pointer"),
                                      target=rec.get("target"), fingerprint=rec["fingerprint"],
                                      message=rec.get("message", "")))
        except (KeyError, TypeError):
            raise BaselineError(f"baseline {path}: findings[{i}] lacks code, path or fingerprint") from None
    return out


def filter_baselined(diagnostics, records) -> tuple[list, int]:
    """(diagnostics not in the baseline, how many were hidden)."""
    known = {r.fingerprint for r in records}
    kept = [d for d in diagnostics if d.fingerprint not in known]
    return kept, len(diagnostics) - len(kept)


def write_baseline(path: str, diagnostics, previous=(), checked_paths=(), root: str | None = None) -> int:
    """Write the baseline atomically: this run's findings plus earlier records of files not
    checked in this run. Paths are recorded relative to ``root`` (the project root; default the
    current folder). Returns the number of records."""
    import os

    base = root if root is not None else os.getcwd()
    checked = {project_path(p, base) for p in checked_paths}
    records = {r.fingerprint: r for r in previous if r.path not in checked}
    for d in diagnostics:
        records[d.fingerprint] = BaselineRecord(d.code, project_path(d.path, base), d.pointer, d.target,
                                                d.fingerprint, d.message)
    ordered = sorted(records.values(), key=lambda r: (r.path, r.pointer or "", r.code, r.target or ""))
    doc = {"format": FORMAT, "tool": "tilefit",
           "findings": [r.__dict__ for r in ordered]}
    write_atomic(path, json.dumps(doc, indent=2) + "\n")
    return len(ordered)
