"""The configuration space the tuner picks from: the engines' CUDA tuning grid, restricted to
what fits the target, ranked by the performance model.

The engines' tuners sweep BLOCK_SIZE_M {16..256} x BLOCK_SIZE_N {32..256} x BLOCK_SIZE_K
{64, 128, 256} x GROUP_SIZE_M {1, 16, 32, 64} x num_warps {4, 8} x num_stages {2..5} = 1920
configs per batch size (block-quantised tables keep only BLOCK_SIZE_K / BLOCK_SIZE_N multiples of
the block). tilefit keeps the ones whose shared memory fits every target (with the estimator of
the *target's* arch, so tuning for an RTX 4090 on an H200 filters with sm_89 numbers), ranks
them with the performance model and measures only the best few.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Mapping, Sequence

BM = (16, 32, 64, 128, 256)
BN = (32, 64, 128, 256)
BK = (64, 128, 256)
GROUPS = (1, 16, 32, 64)
WARPS = (4, 8)
STAGES = (2, 3, 4, 5)


def tuning_space(block_shape: tuple[int, int] | None = None, groups: Sequence[int] = GROUPS) -> list[dict]:
    out = []
    for bm, bn, bk, g, w, s in itertools.product(BM, BN, BK, groups, WARPS, STAGES):
        if block_shape is not None and block_shape[0] > 0:
            bsn, bsk = block_shape
            if bk % bsk and bsk % bk or bn % bsn and bsn % bn:
                continue
            if bk > bsk:
                continue
        out.append({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g,
                    "num_warps": w, "num_stages": s})
    return out


def fitting(configs: Iterable[Mapping], need: Callable[[Mapping], int | None], limit: int,
            margin: int = 0) -> list[dict]:
    """Configs whose shared memory (``need(config)``; None = cannot compile) fits ``limit``."""
    out = []
    for cfg in configs:
        n = need(cfg)
        if n is not None and n + margin <= limit:
            out.append(dict(cfg))
    return out


def rank(configs: Sequence[Mapping], shape, device, top_k: int, smem: Callable | None = None,
         coefficients=None) -> list[dict]:
    """The ``top_k`` configs the performance model predicts fastest for ``shape`` on ``device``."""
    from tilefit.perf.model import rank as perf_rank

    ranked = perf_rank(configs, shape, [device], smem=smem,
                       coefficients={device.key: coefficients} if coefficients is not None else None)
    return [dict(r.config) for r in ranked[:top_k]]


def config_key(cfg: Mapping) -> str:
    return "/".join(str(cfg.get(k)) for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M",
                                               "num_warps", "num_stages"))
