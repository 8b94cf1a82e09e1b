"""Candidates that launch the same work in the same order: time one of them, not each.

The fused-MoE kernels of vLLM and SGLang map a program id to a tile with the grouped order::

    num_pid_m = cdiv(EM, BLOCK_SIZE_M)
    group_id = pid // (GROUP_SIZE_M * num_pid_n); first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (pid % (GROUP_SIZE_M * num_pid_n)) % group_size_m

Every ``GROUP_SIZE_M >= num_pid_m`` gives ``group_id = 0``, ``pid_m = pid % num_pid_m``: the same
tile order, so those configs differ in a constexpr and in nothing the GPU does (and with
``num_pid_m == 1`` ``GROUP_SIZE_M`` 1 is the same order too). ``EM`` is the length of the
sorted-ids buffer (``moe_align_block_size``), with ``numel = M * top_k``: vLLM 0.33
``numel + E * (BM - 1)``, cut to ``numel * BM`` when ``numel < E`` (and to ``M * top_k * BM`` when
``M < BM``; its naive block assignment launches ``numel`` M-blocks); SGLang 0.5.23
``numel + (E + 1) * (BM - 1)`` rounded up to a multiple of 4, ``numel * BM`` when
``numel < E + 1``. So :func:`m_blocks_bound` (``numel`` blocks when ``numel < E``, else
``cdiv(numel + (E + 1) * (BM - 1) + 3, BM)``) bounds ``num_pid_m`` for either engine, and two
``GROUP_SIZE_M`` values at or above it are certainly the same launch.

At a batch size of 1 on a table of 8 experts and top-2 (Mixtral) GROUP_SIZE_M 16, 32 and 64 are
one launch: without this the tuner spent its budget timing the same kernel three times (issue 13,
check 11, bench/RESULTS.md).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .search import STEPS, config_key


def m_blocks_bound(M: int, top_k: int, experts: int, block_m: int) -> int:
    """An upper bound on the launch's number of M-blocks (``cdiv(EM, BLOCK_SIZE_M)``)."""
    numel = M * top_k
    if numel < experts:
        return numel
    return -(-(numel + (experts + 1) * (block_m - 1) + 3) // block_m)


def representative(cfg: Mapping, M: int, top_k: int, experts: int,
                   groups: Sequence[int] = STEPS["GROUP_SIZE_M"]) -> dict:
    """``cfg`` with its GROUP_SIZE_M replaced by the smallest value of ``groups`` that launches the
    same tile order (itself when no smaller one does)."""
    g = cfg.get("GROUP_SIZE_M", 1)
    bound = m_blocks_bound(M, top_k, experts, cfg["BLOCK_SIZE_M"])
    if g < bound:
        return dict(cfg)
    same = [v for v in groups if v >= bound]
    return dict(cfg, GROUP_SIZE_M=min(same + [g]))


def distinct_launches(candidates: Sequence[Mapping], M: int, top_k: int, experts: int) -> list[dict]:
    """``candidates`` with every config whose launch another one already makes (same tile order)
    left out: the representative (:func:`representative`) where it is a candidate, else the first
    of its class. Order kept."""
    present = {config_key(c) for c in candidates}
    out, seen = [], set()
    for c in candidates:
        rep = representative(c, M, top_k, experts)
        k = config_key(rep)
        if k in seen:
            continue
        if k in present and config_key(c) != k:
            continue  # the representative itself is a candidate: it stands for the class
        seen.add(k)
        out.append(dict(c))
    return out
