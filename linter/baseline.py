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
from .readfile import read_bytes

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
        data = json.loads(read_bytes(path).decode("utf-8"))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BaselineError(f"cannot read baseline {path}: not UTF-8 (offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"baseline {path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:  # a 4301-digit number, nesting too deep
        reason = "nesting too deep" if isinstance(exc, RecursionError) else str(exc)
        raise BaselineError(f"baseline {path} cannot be read as JSON: {reason}") from None
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise BaselineError(f"baseline {path}: expected an object with a 'findings' list")
    out = []
    for i, rec in enumerate(data["findings"]):
        if not isinstance(rec, dict) or not all(isinstance(rec.get(k), str) for k in ("code", "path", "fingerprint")):
            raise BaselineError(f"baseline {path}: findings[{i}] needs string code, path and fingerprint")
        if not all(rec.get(k) is None or isinstance(rec.get(k), str) for k in ("pointer", "target", "message")):
            raise BaselineError(f"baseline {path}: findings[{i}]: pointer, target and message must be strings")
        out.append(BaselineRecord(code=rec["code"], path=rec["path"], pointer=rec.get("pointer"),
                                  target=rec.get("target"), fingerprint=rec["fingerprint"],
                                  message=rec.get("message") or ""))
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
