"""Choosing the configs the doctor writes.

:func:`fixer_table` hands a whole table to the project's fixer (``tilefit.app.run_fix``: a
config graph searched from each offending entry, ranked by the performance model, re-checked
by the rules, verified and written atomically). Entries the fixer leaves overflowing (or every
entry, when the fixer cannot be imported or fails) go to :func:`choose_entry`, the repair ladder.

The ladder keeps the engine's own choice when it fits, and otherwise searches the configs
reachable from it by lowering ``num_stages`` and halving ``BLOCK_SIZE_K``, ``BLOCK_SIZE_N`` and
``BLOCK_SIZE_M`` (the repair ladder of oor_cases.md section 7: stages first, then blocks),
keeping quantisation-block and group divisibility, and takes the best by a simple order that
favours what the engine tuned for: the largest output tile (BLOCK_SIZE_M x BLOCK_SIZE_N), then
the deepest pipelined K (BLOCK_SIZE_K x buffered stages), then more stages. It prefers the
smallest change, not a measured optimum.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from tilefit.atomicfile import write_atomic

Fits = Callable[[dict], bool]


@dataclass(frozen=True)
class Constraints:
    block: tuple[int, int] | None = None  # (bn, bk): BLOCK_SIZE_N/K must divide them
    group: int | None = None  # weight-only group size: BLOCK_SIZE_K must divide it
    min_m: int = 16
    min_n: int = 16
    min_k: int = 32


def _halvings(value: int, floor: int) -> list[int]:
    out = [value]
    while value // 2 >= floor and value % 2 == 0:
        value //= 2
        out.append(value)
    return out


def _allowed(cfg: Mapping, c: Constraints) -> bool:
    bn, bk = cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"]
    if c.block is not None:
        if c.block[1] % bk or c.block[0] % bn and bn % c.block[0]:
            return False
    if c.group is not None and c.group % bk and bk % c.group:
        return False
    return True


def ladder_candidates(start: Mapping, c: Constraints) -> list[dict]:
    """Every config reachable from ``start`` by lowering stages and halving blocks, best first."""
    bm, bn, bk = start["BLOCK_SIZE_M"], start["BLOCK_SIZE_N"], start["BLOCK_SIZE_K"]
    stages = start.get("num_stages", 3)
    out = []
    for m in _halvings(bm, min(c.min_m, bm)):
        for n in _halvings(bn, min(c.min_n, bn)):
            for k in _halvings(bk, min(c.min_k, bk)):
                for s in range(stages, 0, -1):
                    cfg = dict(start)
                    cfg.update(BLOCK_SIZE_M=m, BLOCK_SIZE_N=n, BLOCK_SIZE_K=k, num_stages=s)
                    if _allowed(cfg, c):
                        out.append(cfg)
    out.sort(key=lambda d: (-(d["BLOCK_SIZE_M"] * d["BLOCK_SIZE_N"]),
                            -(d["BLOCK_SIZE_K"] * max(d["num_stages"] - 1, 1)), -d["num_stages"],
                            -d["BLOCK_SIZE_K"], -d["BLOCK_SIZE_N"]))
    return out


def choose_entry(start: Mapping, fits: Fits, constraints: Constraints) -> tuple[dict | None, str]:
    """(config to write, how it was chosen); None when nothing reachable fits."""
    start = dict(start)
    if "num_warps" not in start:
        start["num_warps"] = 4
    if "num_stages" not in start:
        start["num_stages"] = 3
    if fits(start):
        return start, "kept (fits)"
    for cfg in ladder_candidates(start, constraints):
        if fits(cfg):
            return cfg, "repair ladder"
    return None, "nothing reachable fits"


def fixer_table(path, start: Mapping[int, Mapping], target_keys, estimator_mode: str = "auto",
                device_files: Sequence[str] = ()) -> tuple[dict | None, str]:
    """Let the project's fixer repair the overflowing entries of a table.

    Writes ``start`` to ``path`` (the name and folder the engine reads, so the fixer sees the
    right engine and device) and runs ``tilefit.app.run_fix`` on it for the targets (with the
    devices of ``device_files``, the doctor's ``--device-file``), unsafe
    fixes allowed (the table is new: there is no earlier numerical behaviour to keep). Returns
    ({batch key: entry} as the fixer left the file, note), or (None, why the repair ladder is
    used instead).
    """
    import json
    from pathlib import Path

    try:
        from tilefit.app import run_fix
    except ImportError:
        return None, "the fixer (tilefit.app.run_fix) is not available: entries chosen by the doctor's repair ladder"
    from tilefit.api import CheckOptions
    from tilefit.config import Settings

    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(p, json.dumps({str(k): dict(v) for k, v in start.items()}, indent=4) + "\n")
        result = run_fix([str(p)], CheckOptions(targets=list(target_keys), estimator=estimator_mode,
                                                unsafe_fixes=True, device_files=list(device_files)), Settings(), write=True)
        fixed = json.loads(p.read_text())
        out = {int(k): dict(v) for k, v in fixed.items() if isinstance(v, dict)}
        n = sum(sum(f.fixed.values()) for f in result.files)
        note = f"overflowing entries repaired by the fixer (tilefit.app.run_fix, perf-model ranked): {n} fixed"
        if result.errors:
            note += f"; fixer errors: {'; '.join(result.errors)}"
        return out, note
    except Exception as exc:  # noqa: BLE001 - the fixer is optional here; the ladder always works
        return None, f"the fixer failed ({type(exc).__name__}: {exc}): entries chosen by the doctor's repair ladder"
