"""The GEMM a table entry configures, at one batch size.

A fused-MoE table ``E=<E>,N=<N>,...`` configures the gate/up GEMM ``[M*top_k, K] x [K, 2N]``
(A gathered from the M token rows, one weight matrix per expert); its ``_down`` twin the down GEMM
``[M*top_k, N] x [N, K]``. ``N`` is the per-shard intermediate size, ``K`` the model's hidden size
and ``top_k`` the experts per token: neither is in the file name, so they come from a small table
of known models keyed by (E, N) (``data/perf_model/model_shapes.json``), with a default.
A block-quantised GEMM table ``N=<N>,K=<K>,...`` configures ``[M, K] x [K, N]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from tilefit.dtypes import operand_bytes



@dataclass(frozen=True)
class GemmShape:
    """Problem sizes of one launch: ``rows`` x ``n`` output, reduction ``k``.

    ``M`` is the batch key (tokens); ``rows`` = M*top_k for MoE. ``a_rows_unique`` is how many
    distinct rows of A exist (M for the gate/up GEMM, whose A rows are gathered per expert).
    """

    kernel: str  # fused_moe, fused_moe_wna16, block_gemm
    dtype: str  # dtype path (variants.dtype_path)
    M: int
    n: int
    k: int
    experts: int = 1
    top_k: int = 1
    a_rows_unique: int | None = None
    block_shape: tuple[int, int] | None = None
    engine: str | None = None
    model: str | None = None  # which known model the sizes came from, or "default"

    def __hash__(self) -> int:  # shapes key memo tables: hash once
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.kernel, self.dtype, self.M, self.n, self.k, self.experts, self.top_k, self.a_rows_unique,
                      self.block_shape, self.engine, self.model))
            object.__setattr__(self, "_hash", h)
        return h

    @property
    def rows(self) -> int:
        return self.M * self.top_k

    @property
    def operand_bytes(self) -> tuple[float, float, float]:
        return operand_bytes(self.dtype)

    def at(self, M: int) -> "GemmShape":
        """The same GEMM at another batch size."""
        from dataclasses import replace

        unique = None
        if self.a_rows_unique is not None:
            unique = M if self.a_rows_unique == self.M else M * self.top_k
        return replace(self, M=M, a_rows_unique=unique)


@lru_cache(maxsize=None)
def model_table() -> dict:
    return json.loads((resources.files("tilefit") / "data" / "perf_model" / "model_shapes.json").read_text())


def _is_pow2_ratio(big: int, small: int) -> int | None:
    if small <= 0 or big % small:
        return None
    r = big // small
    return r if r & (r - 1) == 0 else None


@lru_cache(maxsize=4096)
def moe_model(E: int, N: int) -> tuple[int, int, str]:
    """(hidden size K, top_k, model name) for a fused-MoE table of E experts and shard size N."""
    table = model_table()
    models = table["models"]
    best = None
    for experts in (E, E - 1):
        for i, m in enumerate(models):
            if m["E"] != experts:
                continue
            ratio = _is_pow2_ratio(m["intermediate"], N)
            if ratio is not None:
                key = (experts != E, ratio, i)
                if best is None or key < best[0]:
                    best = (key, m)
        if best is not None:
            break
    if best is None:
        for experts in (E, E - 1):
            same = [m for m in models if m["E"] == experts]
            if same:
                best = (None, same[0])
                break
    if best is not None:
        m = best[1]
        return int(m["hidden"]), int(m["top_k"]), str(m["name"])
    d = table["default"]
    if E <= 1:
        top_k = d["top_k_one_expert"]
    elif E < 32:
        top_k = d["top_k_below_32_experts"]
    else:
        top_k = d["top_k"]
    return int(d["hidden"]), int(min(top_k, max(E, 1))), "default"


def shape_for(meta, M: int, kernel: str | None = None, dtype: str | None = None) -> GemmShape | None:
    """The GEMM of table ``meta`` (a ``TableMeta``) at batch size ``M``; None for other families.

    Which GEMM a config family's entries configure is its kernel family's data (``tables.perf``
    of ``family.json``): ``moe`` (gate/up or down GEMM of a MoE layer) or ``gemm`` (the name's N, K).
    """
    from tilefit import kernels
    from tilefit.dtypes import path_of_file_dtype

    owner = kernels.table(meta.family)
    if owner is None:
        return None
    perf = owner.table.get("perf") or {}
    dtype = dtype or path_of_file_dtype(meta.dtype) or "bf16"
    kernel = kernel or (perf.get("kernel_by_dtype") or {}).get(dtype, owner.name)
    if perf.get("shape") == "moe":
        if meta.E is None or meta.N is None:
            return None
        hidden, top_k, model = moe_model(meta.E, meta.N)
        if meta.down:
            return GemmShape(kernel, dtype, M, n=hidden, k=meta.N, experts=meta.E, top_k=top_k,
                             a_rows_unique=M * top_k, block_shape=meta.block_shape, engine=meta.engine,
                             model=model)
        return GemmShape(kernel, dtype, M, n=2 * meta.N, k=hidden, experts=meta.E, top_k=top_k,
                         a_rows_unique=M, block_shape=meta.block_shape, engine=meta.engine, model=model)
    if perf.get("shape") == "gemm":
        if meta.N is None or meta.K is None:
            return None
        return GemmShape(kernel, dtype, M, n=meta.N, k=meta.K, a_rows_unique=M,
                         block_shape=meta.block_shape, engine=meta.engine, model="file name")
    return None
